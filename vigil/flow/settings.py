"""The ingest section of the settings (``VIGIL_INGEST__*``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class IngestSettings(BaseModel):
    """How records are read and checked."""

    max_in_flight: int = Field(default=512, ge=1, description="Events being processed at once, all lanes.")
    max_text_bytes: int = Field(default=64 * 1024, ge=1, description="Longest message text, UTF-8 bytes.")
    max_event_bytes: int = Field(default=1024 * 1024, ge=1, description="Largest record accepted.")
    future_skew_s: float = Field(
        default=86400.0,
        ge=0,
        le=366 * 86400,
        description="An event time further ahead of vigil's clock counts as this far ahead for its conversation.",
    )
    dead_letter_attempts: int = Field(
        default=10,
        ge=1,
        description="Tries to write one dead letter while the broker answers (about 30 s of back-off; an outage "
        "uses up none) before it is counted as failed and skipped, so its partition moves on.",
    )
    retry_initial_s: float = Field(default=0.2, gt=0)
    retry_max_s: float = Field(default=5.0, gt=0)
