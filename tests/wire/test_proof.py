"""A decision on an action is believed only as its proof says: signed with a key the daemon holds, not expired, and
saying exactly what the event says about one action; the key is the setting's, or one kept in the data directory."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from vigil.wire.events import Feedback
from vigil.wire.proof import KEY_FILE, ApprovalSettings, Proofs, Unproven

T0 = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
KEY = b"the key the panel and the daemon share"
PROOFS = Proofs([KEY], ttl_s=600)


def decision(**changes: Any) -> Feedback:
    values: dict[str, Any] = {
        "type": "feedback", "schema_version": 1, "feedback_id": "f-1", "suggestion_id": "s-1",
        "conversation_id": "c-1", "tenant": "acme", "verdict": "approved", "by": "lee", "role": "lead",
        "arguments_hash": "a" * 64, "action_id": "act-1", "at": T0,
    }  # fmt: skip
    return Feedback.model_validate(values | changes)


def verified(event: Feedback, proofs: Proofs = PROOFS, *, action: str = "act-1", now: datetime = T0) -> str:
    """What verifying ``event`` says: who and in what role, or why not."""
    try:
        proven = proofs.verify(event, action_id=action, tenant="acme", now=now)
    except Unproven as exc:
        return exc.failure
    return f"{proven.by}/{proven.role}"


def test_a_signed_decision_is_believed_as_its_proof_says():
    assert verified(PROOFS.signed(decision(), action_id="act-1", now=T0)) == "lee/lead"
    rejected = PROOFS.signed(decision(verdict="rejected", arguments_hash=None), action_id="act-1", now=T0)
    assert verified(rejected) == "lee/lead"  # a rejection needs no hash


@pytest.mark.parametrize(
    ("sent", "why"),
    [
        (decision(role="admin"), "unsigned"),
        (decision(proof="not-a-token"), "bad_signature"),
        (decision(tenant=None, proof="x"), "incomplete"),
        (decision(arguments_hash=None, proof="x"), "incomplete"),
    ],
)
def test_a_decision_without_a_proof_that_holds_is_refused_before_anything_else(sent: Feedback, why: str):
    assert verified(sent) == why


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"role": "admin"}, "mismatch"),  # a role the signer did not give
        ({"by": "mallory"}, "mismatch"),
        ({"verdict": "rejected"}, "mismatch"),
        ({"arguments_hash": "b" * 64}, "mismatch"),  # other arguments than those approved
        ({"conversation_id": "c-2"}, "mismatch"),
    ],
)
def test_a_proof_is_bound_to_what_the_event_says(change: dict[str, Any], why: str):
    signed = PROOFS.signed(decision(), action_id="act-1", now=T0)
    assert verified(signed.model_copy(update=change)) == why


def test_a_real_proof_replayed_for_another_action_or_tenant_is_refused():
    signed = PROOFS.signed(decision(), action_id="act-1", now=T0)
    assert verified(signed, action="act-2") == "mismatch"
    with pytest.raises(Unproven) as refused:
        PROOFS.verify(signed, action_id="act-1", tenant="globex", now=T0)
    assert refused.value.failure == "mismatch"


def test_a_proof_expires_and_one_signed_with_another_key_is_refused():
    signed = PROOFS.signed(decision(), action_id="act-1", now=T0)
    assert verified(signed, now=T0 + timedelta(seconds=599)) == "lee/lead"
    assert verified(signed, now=T0 + timedelta(seconds=601)) == "expired"
    theirs = Proofs([b"someone else's key, long enough too"]).signed(decision(), action_id="act-1", now=T0)
    assert verified(theirs) == "unknown_key"


def test_a_key_retired_by_a_rotation_still_verifies_what_it_signed():
    old = Proofs([b"the key before the rotation, 32 bytes"])
    signed = old.signed(decision(), action_id="act-1", now=T0)
    rotated = Proofs([KEY, b"the key before the rotation, 32 bytes"])
    assert verified(signed, rotated) == "lee/lead"
    assert verified(rotated.signed(decision(), action_id="act-1", now=T0), old) == "unknown_key"


def test_a_short_key_is_refused():
    with pytest.raises(ValueError, match="32 bytes"):
        Proofs([b"short"])
    with pytest.raises(ValueError):
        ApprovalSettings(secret="short")


def test_without_a_setting_the_key_is_made_once_in_the_data_directory_and_kept(tmp_path: Path):
    first = Proofs.from_settings(ApprovalSettings(), data_dir=tmp_path / "data")
    kept = tmp_path / "data" / KEY_FILE
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
    again = Proofs.from_settings(ApprovalSettings(), data_dir=tmp_path / "data")  # a restart, or another process
    assert verified(first.signed(decision(), action_id="act-1", now=T0), again) == "lee/lead"
    configured = Proofs.from_settings(ApprovalSettings(secret=KEY.decode()), data_dir=tmp_path / "data")
    assert verified(configured.signed(decision(), action_id="act-1", now=T0)) == "lee/lead"
