"""The panel's own SQL table: sign-ins in a browser."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from vigil.db.schema import ID_LENGTH, when


class PanelSession(SQLModel, table=True):
    """A panel sign-in in a browser: its cookie names it, and it ends when its row goes (sign-out, an admin, expiry).

    Kept in the database, not in the cookie alone, so that every replica sees a sign-out at once. The cookie holds
    the session's id; the row only its SHA-256, as for tokens.
    """

    __tablename__ = "panel_session"

    id_sha256: str = Field(primary_key=True, max_length=64)
    name: str = Field(index=True, max_length=ID_LENGTH)
    via: str = Field(max_length=16)
    signed_in_at: datetime = when(nullable=False)
    expires_at: datetime = when(index=True, nullable=False)


PANEL_SESSION = PanelSession.__table__  # type: ignore[attr-defined]
