"""Proof of who decided an action: a decision on the stream (a ``feedback`` event that approves or rejects an
action) carries a signed statement of exactly what was decided, by whom, in what role, and the daemon believes the
statement, not the event's own fields.

Anyone who can produce to the input topic can write ``"role": "admin"`` into a feedback event; only the panel (or
another approver client given the key) can sign. The proof is a JSON Web Token (HS256: an HMAC with a secret the
panel and the daemon share) whose claims bind the decision to one action and its arguments:

    act  the action's id               vrd  the verdict (approved / rejected)
    ahs  its arguments_hash            sub  who decided        rol  their role
    cid  the conversation's id         ten  the tenant
    iat  when it was signed            exp  until when it may be acted on
    aud  "vigil-decisions"             header ``kid``: which key signed it

A decision is refused (and the refusal written to the action's audit log) when it carries no proof, when the proof
was not signed with a key the daemon holds or has expired, or when any claim differs from the event or the action:
a real approval's proof replayed for another action, other arguments, another tenant or another role is refused.
``tenant`` and, on an approval, ``arguments_hash`` are required.

The key: ``VIGIL_APPROVALS__SECRET`` (the same on every replica, and on the panel's); earlier keys stay valid for
verification under ``VIGIL_APPROVALS__PREVIOUS_SECRETS`` while proofs signed with them may still be in flight. Unset,
vigil generates one in its data directory (``approvals.key``, readable by its owner only) and uses it from then on:
enough for one process, or processes sharing the directory; replicas on separate disks need the setting.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import jwt
from pydantic import BaseModel, Field, SecretStr

from vigil.wire.events import Feedback

log = logging.getLogger(__name__)

AUDIENCE = "vigil-decisions"
ALGORITHM = "HS256"
KEY_FILE = "approvals.key"
MIN_KEY_BYTES = 32
"""RFC 7518 §3.2: an HS256 key is at least as long as the hash."""
_CLAIMS = ("act", "vrd", "sub", "rol", "cid", "ten", "iat", "exp", "aud")

Failure = Literal["unsigned", "unknown_key", "bad_signature", "expired", "mismatch", "incomplete"]


class ApprovalSettings(BaseModel):
    """``VIGIL_APPROVALS__*``: the key that signs decisions on actions (see ``vigil.wire.proof``)."""

    secret: SecretStr | None = Field(
        default=None,
        min_length=MIN_KEY_BYTES,
        description="Signs and verifies decisions on actions (HMAC); the same on every replica. Unset: a key "
        "generated once in the data directory.",
    )
    previous_secrets: list[Annotated[SecretStr, Field(min_length=MIN_KEY_BYTES)]] = Field(
        default_factory=list, description="Keys retired by a rotation, still accepted for proofs already signed."
    )
    ttl_s: float = Field(
        default=3600.0, gt=0, description="How long after it is signed a decision may still be acted on."
    )


class Unproven(Exception):
    """A decision whose proof does not hold: ``failure`` names why (for the audit log and the metrics)."""

    def __init__(self, failure: Failure, detail: str) -> None:
        super().__init__(detail)
        self.failure = failure
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Proven:
    """Who decided, as the proof says."""

    by: str
    role: str
    arguments_hash: str | None


class Proofs:
    """Signs decisions (the panel) and verifies them (the daemon), with the current key and the previous ones."""

    def __init__(self, keys: Sequence[bytes], *, ttl_s: float = 3600.0) -> None:
        if not keys:
            raise ValueError("a key is needed to sign decisions")
        if any(len(key) < MIN_KEY_BYTES for key in keys):
            raise ValueError(f"a key that signs decisions has {MIN_KEY_BYTES} bytes at least (HS256)")
        self._keys = {_key_id(key): key for key in keys}
        self._current = _key_id(keys[0])
        self._ttl_s = ttl_s

    @classmethod
    def from_settings(cls, settings: ApprovalSettings, *, data_dir: Path) -> Proofs:
        """The keys ``settings`` name, or the one kept in ``data_dir`` (made there the first time)."""
        if settings.secret is not None:
            keys = [settings.secret, *settings.previous_secrets]
            return cls([k.get_secret_value().encode() for k in keys], ttl_s=settings.ttl_s)
        path = data_dir / KEY_FILE
        return cls(
            [_kept_key(path), *(k.get_secret_value().encode() for k in settings.previous_secrets)], ttl_s=settings.ttl_s
        )

    def sign(
        self,
        *,
        action_id: str,
        conversation_id: str,
        tenant: str,
        verdict: str,
        by: str,
        role: str,
        arguments_hash: str | None,
        now: datetime,
    ) -> str:
        """The proof of one decision, valid for the configured time from ``now``."""
        claims: dict[str, Any] = {
            "act": action_id,
            "cid": conversation_id,
            "ten": tenant,
            "vrd": verdict,
            "sub": by,
            "rol": role,
            "iat": int(now.timestamp()),
            "exp": int(now.timestamp() + self._ttl_s),
            "aud": AUDIENCE,
        }
        if arguments_hash is not None:
            claims["ahs"] = arguments_hash
        return jwt.encode(claims, self._keys[self._current], algorithm=ALGORITHM, headers={"kid": self._current})

    def signed(self, event: Feedback, *, action_id: str, now: datetime) -> Feedback:
        """``event`` with the proof of what it says (its decision, person, role, tenant and hash) on ``action_id``:
        what an approver client that holds the key does before it produces a decision.

        Raises:
            ValueError: the event lacks a tenant or a role (a decision names both).
        """
        if event.tenant is None or event.role is None or event.by is None:
            raise ValueError("a decision names its tenant, who gave it and their role")
        proof = self.sign(
            action_id=action_id,
            conversation_id=event.conversation_id,
            tenant=event.tenant,
            verdict=event.verdict,
            by=event.by,
            role=event.role,
            arguments_hash=event.arguments_hash,
            now=now,
        )
        return event.model_copy(update={"proof": proof})

    def verify(self, event: Feedback, *, action_id: str, tenant: str, now: datetime) -> Proven:
        """Who decided ``event``'s verdict on the action ``action_id`` of ``tenant``, as its proof says.

        Raises:
            Unproven: no proof, a key the daemon does not hold, a bad signature, an expired proof, a required
                field missing (``tenant``; ``arguments_hash`` on an approval), or a claim that differs from the
                event or the action.
        """
        if not event.proof:
            raise Unproven("unsigned", "the decision carries no proof of who gave it")
        if event.tenant is None:
            raise Unproven("incomplete", "a decision must name its tenant")
        if event.verdict == "approved" and event.arguments_hash is None:
            raise Unproven("incomplete", "an approval must name the arguments_hash it approves")
        claims = self._claims(event.proof)
        if claims["exp"] < now.timestamp():
            raise Unproven("expired", f"the proof expired at {datetime.fromtimestamp(claims['exp'], UTC).isoformat()}")
        expected = {
            "act": action_id,
            "cid": event.conversation_id,
            "ten": tenant,
            "vrd": event.verdict,
            "sub": event.by,
            "rol": event.role,
            "ahs": event.arguments_hash,
        }
        if event.tenant != tenant:
            raise Unproven("mismatch", f"the decision names tenant {event.tenant!r}, the action is {tenant!r}'s")
        for claim, value in expected.items():
            if claims.get(claim) != value:
                raise Unproven("mismatch", f"the proof was given for another {_NAMES[claim]} than this decision's")
        return Proven(by=str(claims["sub"]), role=str(claims["rol"]), arguments_hash=claims.get("ahs"))

    def _claims(self, token: str) -> dict[str, Any]:
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.InvalidTokenError as exc:
            raise Unproven("bad_signature", f"the proof is not a signed token: {exc}") from exc
        key = self._keys.get(kid) if isinstance(kid, str) else None
        if key is None:
            raise Unproven("unknown_key", "the proof was signed with a key vigil does not hold")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                audience=AUDIENCE,
                options={"require": list(_CLAIMS), "verify_exp": False, "verify_iat": False},
            )
        except jwt.InvalidTokenError as exc:
            raise Unproven("bad_signature", f"the proof does not verify: {exc}") from exc
        return claims


_NAMES = {
    "act": "action",
    "cid": "conversation",
    "ten": "tenant",
    "vrd": "verdict",
    "sub": "person",
    "rol": "role",
    "ahs": "set of arguments",
}


def _key_id(key: bytes) -> str:
    """A key's public name: the start of its SHA-256 (says which key signed, reveals nothing of it)."""
    return hashlib.sha256(key).hexdigest()[:12]


def _kept_key(path: Path) -> bytes:
    """The key kept at ``path``, made there (owner-only) the first time. It is written whole to a file of its own
    and then linked into place, so a crash never leaves an empty key behind and two processes starting at once
    agree on the one that was linked first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(descriptor, "w") as file:
                file.write(secrets.token_hex(32))
                file.flush()
                os.fsync(file.fileno())
            os.link(draft, path)
            log.info("decisions on actions are signed with a key made in %s (VIGIL_APPROVALS__SECRET shares one)", path)
        except FileExistsError:
            pass  # another process linked its key first: that one is the key
        finally:
            draft.unlink(missing_ok=True)
    key = path.read_text("ascii").strip()
    if not key:
        raise OSError(f"{path} holds no key: remove it, or set VIGIL_APPROVALS__SECRET")
    return key.encode()
