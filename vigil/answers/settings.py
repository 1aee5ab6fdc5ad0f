"""The answers' section of the settings: answers and when vigil speaks (``VIGIL_ANSWERS__*``). LLM drafting is
configured in the LLM's section (``VIGIL_LLM__*``, ``vigil.llm.settings``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


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
