"""The optional LLM (Anthropic's Messages API) that capabilities share: its settings section (``VIGIL_LLM__*``), the
client (one request within a hard budget, its failures mapped to one outcome), its metrics, and the grounding check
of what a reply states. Answers draft replies with it; the miner rewrites mined cases with it."""
