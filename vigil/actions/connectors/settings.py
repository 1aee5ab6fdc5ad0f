"""The settings of one company system that actions call (``systems.<name>`` in the actions section)."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr


class SystemSettings(BaseModel):
    """Where a system is and how patiently to call it."""

    base_url: str = Field(description="The system's base URL, such as https://billing.internal:8443.")
    token: SecretStr | None = Field(default=None, description="Bearer token sent with every request, if any.")
    timeout_s: float = Field(default=5.0, gt=0, description="Seconds to wait for a connection and for an answer.")
    retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Retries after a timeout or an outage, for reads and for writes sent with an idempotency key.",
    )
