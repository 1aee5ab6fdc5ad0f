"""The answers' sections of the settings: answers and when vigil speaks (``VIGIL_ANSWERS__*``), and LLM drafting
(``VIGIL_LLM__*``)."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr


class AnswerSettings(BaseModel):
    """Proactive answers and when vigil speaks (the intervention policy)."""

    enabled: bool = True
    min_confidence: float = Field(default=0.5, ge=0, le=1, description="Speak only above this probability.")
    faq_confidence: float = Field(default=0.6, ge=0, le=1, description="Answer from an FAQ at once above this.")
    implicit_requests: bool = Field(
        default=True,
        description="Also hear needs the rules miss (a problem stated as a fact) with the bundled model.",
    )
    max_age_s: float = Field(default=300.0, gt=0, description="Do not answer messages older than this.")
    max_similarity: float = Field(default=0.8, gt=0, le=1, description="Too close to an earlier suggestion.")
    max_question_overlap: float = Field(
        default=0.75,
        gt=0,
        le=1,
        description="A question asked again: this share of its subject words are those of an answered question.",
    )
    max_chars: int = Field(default=600, ge=80, description="Longest extractive answer.")


class LlmSettings(BaseModel):
    """Optional LLM drafting of answers (Anthropic): off unless an API key is set."""

    api_key: SecretStr | None = Field(default=None, description="Anthropic API key; unset: no LLM drafting.")
    model: str = Field(default="claude-haiku-4-5", min_length=1)
    base_url: str | None = Field(default=None, description="Messages API endpoint; default the SDK's.")
    timeout_s: float = Field(
        default=3.0, gt=0, description="Hard budget for a draft; after it the extractive answer goes out."
    )
    max_tokens: int = Field(default=400, ge=16, le=8192, description="Longest draft, in output tokens.")
    # Estimates of the list prices of the default model, for the cost metric only; set them to your contract's.
    input_usd_per_mtok: float = Field(default=1.0, ge=0, description="USD per million input tokens (estimate).")
    output_usd_per_mtok: float = Field(default=5.0, ge=0, description="USD per million output tokens (estimate).")
