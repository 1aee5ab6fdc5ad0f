"""The LLM's section of the settings (``VIGIL_LLM__*``): one Anthropic account for every capability that uses it."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr


class LlmSettings(BaseModel):
    """The optional LLM (Anthropic): off unless an API key is set. Answers draft with it; the miner rewrites mined
    cases with it, with its own budget (``VIGIL_MINER__LLM_TIMEOUT_S``, ``VIGIL_MINER__LLM_MAX_TOKENS``)."""

    api_key: SecretStr | None = Field(default=None, description="Anthropic API key; unset: no LLM.")
    model: str = Field(default="claude-haiku-4-5", min_length=1)
    base_url: str | None = Field(default=None, description="Messages API endpoint; default the SDK's.")
    timeout_s: float = Field(
        default=3.0, gt=0, description="Hard budget for a draft; after it the extractive answer goes out."
    )
    max_tokens: int = Field(default=400, ge=16, le=8192, description="Longest draft, in output tokens.")
    # Estimates of the list prices of the default model, for the cost metric only; set them to your contract's.
    input_usd_per_mtok: float = Field(default=1.0, ge=0, description="USD per million input tokens (estimate).")
    output_usd_per_mtok: float = Field(default=5.0, ge=0, description="USD per million output tokens (estimate).")
