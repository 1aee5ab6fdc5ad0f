"""The demo section of the settings (``VIGIL_DEMO__*``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, field_validator


class DemoSettings(BaseModel):
    """`vigil demo`: its embedded broker and the demo traffic it publishes."""

    conversations: Path | None = Field(
        default=None,
        description=(
            "JSONL of v1 events; default bundled. Other wordings of its messages, if any, in NAME.rewordings.jsonl"
            " beside it (one {message_id, texts} per line): each run picks one per message."
        ),
    )
    pace_s: float = Field(default=2.0, gt=0, description="Mean seconds between demo events.")
    parallel: int = Field(default=3, ge=1, description="Conversations running at once.")
    broker_port: int = Field(
        default=9092,
        ge=0,
        le=65535,
        description="Port of the embedded broker on 127.0.0.1 (taken: a free one, logged; 0: always a free one).",
    )

    @field_validator("conversations")
    @classmethod
    def _conversations_exist(cls, path: Path | None) -> Path | None:
        if path is not None and not path.is_file():
            raise ValueError(f"no such file: {path}")
        return path
