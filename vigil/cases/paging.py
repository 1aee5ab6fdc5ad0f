"""Pages of a conversation: its newest messages and suggestions first, and an opaque cursor for the page before.

A conversation can hold any number of messages, so a read holds at most one page of each: messages by stream order
(``seq``), suggestions by ``(created_at, suggestion_id)``, each walked backwards through an index from where the
page before stopped (keyset paging, so a page costs the same however far back it is). The cursor says where each
of the two stopped, or that it is done; it is base64url JSON, opaque to callers, and checked when it comes back.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from vigil.core.errors import InvalidCursor

DEFAULT_PAGE = 50
MAX_PAGE = 500
_MAX_CURSOR_CHARS = 2048


@dataclass(frozen=True, slots=True)
class Position:
    """Where the next (older) page starts: below these, or nothing more of that kind (``done``)."""

    message_seq: int | None = None
    """Older messages have a smaller ``seq``; None: start from the newest."""
    suggestion: tuple[datetime, str] | None = None
    """Older suggestions sort before this ``(created_at, suggestion_id)``; None: start from the newest."""
    messages_done: bool = False
    suggestions_done: bool = False

    def encode(self) -> str | None:
        """The cursor for this position, or None when both kinds are done (this page reached the start)."""
        if self.messages_done and self.suggestions_done:
            return None
        body = {
            "m": None if self.messages_done else self.message_seq,
            "s": None if self.suggestions_done or self.suggestion is None else self._suggestion_json(),
            "md": self.messages_done,
            "sd": self.suggestions_done,
        }
        raw = json.dumps(body, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def _suggestion_json(self) -> list[str]:
        assert self.suggestion is not None
        created_at, suggestion_id = self.suggestion
        return [created_at.isoformat(), suggestion_id]

    @classmethod
    def decode(cls, cursor: str | None) -> Position:
        """The position a cursor names (None: the newest page).

        Raises:
            InvalidCursor: the cursor is not one vigil made.
        """
        if cursor is None:
            return cls()
        try:
            if len(cursor) > _MAX_CURSOR_CHARS:
                raise ValueError("too long")
            body = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
            return cls._from_json(body)
        except (ValueError, TypeError, KeyError, OverflowError, binascii.Error) as exc:
            raise InvalidCursor("not a cursor this conversation's pages gave") from exc

    @classmethod
    def _from_json(cls, body: Any) -> Position:
        seq, suggestion = body["m"], body["s"]
        messages_done, suggestions_done = body["md"], body["sd"]
        if not isinstance(messages_done, bool) or not isinstance(suggestions_done, bool):
            raise TypeError("done flags")
        if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int)):
            raise TypeError("message position")
        position = None
        if suggestion is not None:
            created_at, suggestion_id = suggestion
            if not isinstance(created_at, str) or not isinstance(suggestion_id, str):
                raise TypeError("suggestion position")
            when = datetime.fromisoformat(created_at)
            if when.tzinfo is None:
                raise ValueError("naive time")
            position = (when.astimezone(UTC), suggestion_id)  # an OverflowError: not a time any suggestion has
        return cls(seq, position, messages_done, suggestions_done)


def messages_page(table: sa.Table, conversation_id: str, position: Position, limit: int) -> sa.Select[Any]:
    """The next page of messages, newest first, with one more row than ``limit`` (to tell whether more are left).

    Served by the index on ``(conversation_id, seq)``.
    """
    c = table.c
    stmt = sa.select(table).where(c.conversation_id == conversation_id)
    if position.message_seq is not None:
        stmt = stmt.where(c.seq < position.message_seq)
    return stmt.order_by(c.seq.desc()).limit(limit + 1)


def suggestions_page(table: sa.Table, conversation_id: str, position: Position, limit: int) -> sa.Select[Any]:
    """The next page of suggestions, newest first, with one more row than ``limit``.

    Served by the index on ``(conversation_id, created_at, suggestion_id)``.
    """
    c = table.c
    stmt = sa.select(table).where(c.conversation_id == conversation_id)
    if position.suggestion is not None:
        created_at, suggestion_id = position.suggestion
        # A row comparison, not an OR of two: PostgreSQL can only walk the index from a row comparison.
        stmt = stmt.where(sa.tuple_(c.created_at, c.suggestion_id) < sa.tuple_(created_at, suggestion_id))
    return stmt.order_by(c.created_at.desc(), c.suggestion_id.desc()).limit(limit + 1)


def latest_verdicts(table: sa.Table, conversation_id: str, suggestion_ids: list[str]) -> sa.Select[Any]:
    """The latest verdict on each of these suggestions (the one the panel shows), oldest first: at most one each."""
    c = table.c
    rank = sa.func.row_number().over(partition_by=c.suggestion_id, order_by=(c.at.desc(), c.received_at.desc()))
    ranked = (
        sa.select(table, rank.label("rank"))
        .where(c.conversation_id == conversation_id, c.suggestion_id.in_(suggestion_ids))
        .subquery()
    )
    columns = [ranked.c[column.name] for column in table.c]
    return sa.select(*columns).where(ranked.c.rank == 1).order_by(ranked.c.at, ranked.c.received_at)


def next_position(
    position: Position, messages: list[Any], suggestions: list[Any], limit: int
) -> tuple[Position, list[Any], list[Any]]:
    """Cut both pages to ``limit`` and say where the page before them starts."""
    more_messages, more_suggestions = len(messages) > limit, len(suggestions) > limit
    messages, suggestions = messages[:limit], suggestions[:limit]
    older = Position(
        message_seq=messages[-1].seq if messages else position.message_seq,
        suggestion=(suggestions[-1].created_at, suggestions[-1].suggestion_id) if suggestions else None,
        messages_done=position.messages_done or not more_messages,
        suggestions_done=position.suggestions_done or not more_suggestions,
    )
    return older, messages, suggestions
