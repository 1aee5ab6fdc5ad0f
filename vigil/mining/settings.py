"""The miner's section of the settings (``VIGIL_MINER__*``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class MinerSettings(BaseModel):
    """What the miner takes from closed cases, how often, and what it makes of them."""

    enabled: bool = Field(default=True, description="Mine closed, human-resolved cases on the scheduler.")
    interval_s: float = Field(default=600.0, gt=0, description="How often the miner runs.")
    min_analyst_words: int = Field(
        default=30,
        ge=0,
        description="A case whose analysts said fewer words than this, greetings and sign-offs aside, and told the "
        "customer nothing to do (no step, command, path or link) teaches nothing and is skipped.",
    )
    terse_words: int = Field(
        default=0,
        ge=0,
        description="The resolution kept from a case is its best one or two analyst turns; while they hold fewer "
        "words than this, the next best are kept too, up to six: a chat room answers in several short lines.",
    )
    faq_min_cases: int = Field(
        default=3, ge=2, description="A problem resolved in this many mined cases becomes an FAQ."
    )
    require_review: bool = Field(
        default=True,
        description="Mined entries wait for a lead's approval (the review page, or vigil kb approve) before being "
        "served, unless enough agreeing cases support them (serve_at_cases).",
    )
    serve_at_cases: int = Field(
        default=3,
        ge=0,
        description="With require_review, an entry supported by at least this many cases that agree (none of them, "
        "and no other entry, saying otherwise) is served without waiting for a lead; 0: every mined entry waits.",
    )
    merge_similarity: float = Field(
        default=0.75,
        gt=0,
        le=1,
        description="Two cases whose problems are at least this similar (cosine) are one entry (docs/evaluation.md).",
    )
    faq_similarity: float = Field(
        default=0.65,
        gt=0,
        le=1,
        description="Entries whose cases are on average at least this similar (cosine, problem and resolution "
        "together) and whose resolutions agree are one FAQ, once they hold faq_min_cases cases (docs/evaluation.md).",
    )
    conflict_similarity: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Merged cases whose resolutions take opposite stances on a decision (a refund, a fee, liability: "
        "vigil/mining/stances.py) disagree and are flagged for review; above 0, so are those sharing fewer of their "
        "words than this (off by default: two wordings of one answer share as few words as two answers do).",
    )
    duplicate_similarity: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="A case whose problem and resolution share at least this share of their pairs of adjacent words "
        "(Jaccard) with a case mined within duplicate_window_days repeats it: it counts once, with the repeat in "
        "provenance (a replayed or copied chat is no new evidence).",
    )
    duplicate_window_days: float = Field(
        default=30.0,
        ge=0,
        description="How far apart in closing time a case and the one it repeats may be (0: no case repeats another).",
    )
    conflict_problem_similarity: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="Two entries whose customers' problems are at least this similar are about one problem: if "
        "their resolutions disagree, both wait for review.",
    )
    low_csat: int = Field(default=2, ge=1, le=5, description="A CSAT at or below this demotes what the case taught.")
    entry_ttl_days: float | None = Field(
        default=None,
        gt=0,
        description="A mined entry expires this many days after the latest case that taught it, unless another "
        "case renews it (unset: never).",
    )
    lateness_s: float = Field(
        default=86_400.0,
        ge=0,
        description="How late a closure may reach vigil and still be mined: each run looks this far behind its "
        "watermark.",
    )
    batch: int = Field(default=500, ge=1, description="The most cases one run mines at a time, before it writes.")
    embed_parallelism: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="How many embedding calls a run makes at once, each on a core. Unset: 1 in the daemon, whose "
        "other cores answer questions meanwhile, and one per core in `vigil mine --once`.",
    )
    lease_s: float = Field(
        default=600.0,
        gt=0,
        description="One miner runs at a time across replicas and `vigil mine --once`: a run holds the lease "
        "`miner`, extended at every batch it writes; a run that stalls this long loses it to the next, and then "
        "writes nothing.",
    )
    replies: bool = Field(
        default=True,
        description="Propose, for a lead's review, an FAQ from each analyst reply that settled a question vigil did "
        "not answer (or answered and was told it was wrong), in the cases mined (vigil/mining/replies.py).",
    )
    reply_min_words: int = Field(
        default=8,
        ge=0,
        description="A reply teaches when it tells the customer what to do or how things work (a step, command, "
        "path, link or explanation) in at least this many words, courtesy aside.",
    )
    llm: bool = Field(
        default=True,
        description="With an Anthropic key (VIGIL_LLM__API_KEY), have the LLM rewrite each mined case in a fixed "
        "schema; the extractive entry stays whenever it cannot.",
    )
    llm_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Hard budget for one case's rewrite (a batch job, so longer than a live draft's).",
    )
    llm_max_tokens: int = Field(default=1024, ge=64, le=8192, description="Longest rewrite, in output tokens.")
