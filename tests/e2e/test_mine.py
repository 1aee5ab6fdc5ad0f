"""`vigil mine --once` and the review commands as subprocesses: cases a replay stored are mined once, and a lead
approves what waits for review."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from vigil.core.clock import SystemClock
from vigil.flow.leases import Lease
from vigil.mining.miner import LEASE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

VIGIL = Path(sys.executable).parent / "vigil"
ROOT = Path(__file__).resolve().parent.parent.parent


def vigil(tmp_path: Path, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "VIGIL_DATA_DIR": str(tmp_path / "data"),
        "VIGIL_LOG_LEVEL": "WARNING",
        **settings,
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }
    return subprocess.run([str(VIGIL), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


async def hold_the_miners_lease(database: Path) -> str:
    engine = create_async_engine(f"sqlite+aiosqlite:///{database}")
    try:
        lease = Lease(engine, LEASE, owner="daemon-replica-1", clock=SystemClock(), duration_s=600)
        assert await lease.take() is None
    finally:
        await engine.dispose()
    return lease.owner


def test_mine_once_mines_the_stored_cases_once_and_a_lead_approves_what_waits(tmp_path: Path):
    demo = ROOT / "knowledge" / "demo" / "conversations.jsonl"
    # The demo's conversations stored (and answered from the help centre), with the daemon's miner off.
    stored = vigil(
        tmp_path, "eval", "replay", str(demo), "--out", str(tmp_path / "out.jsonl"), VIGIL_MINER__ENABLED="false"
    )
    assert stored.returncode == 0, stored.stderr

    # Every mined entry waits for a lead: review is the default, and no group of cases is served without one here.
    first = vigil(tmp_path, "mine", "--once", VIGIL_MINER__SERVE_AT_CASES="0")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("mined 18 cases"), first.stdout
    again = vigil(tmp_path, "mine", "--once", VIGIL_MINER__SERVE_AT_CASES="0")
    assert again.stdout.startswith("mined 0 cases"), again.stdout
    # While another miner (a daemon's) runs, this one mines nothing and says so, with sysexits' "try again later".
    holder = asyncio.run(hold_the_miners_lease(tmp_path / "data" / "vigil.db"))
    busy = vigil(tmp_path, "mine", "--once")
    assert busy.returncode == 75 and busy.stdout == "", busy
    assert f"nothing mined: another miner ({holder}) holds the lease until" in busy.stderr

    entries = list(map(json.loads, vigil(tmp_path, "kb", "export").stdout.splitlines()))
    # Each case in one entry (an FAQ lists its group's; the entries it states are retired, the FAQ waits for them).
    mined = [e for e in entries if e["origin"] == "miner" and e["status"] != "retired"]
    assert sum(len(e["provenance"]["cases"]) for e in mined) == 18
    assert all(e["status"] == "pending_review" for e in mined)
    # The analysts' replies to the questions vigil was silent on wait for review too, whatever the setting.
    replies = [e for e in entries if e["origin"] == "reply"]
    assert first.stdout.rstrip().endswith(f"{len(replies)} analysts' replies proposed for review") and replies
    assert all(e["status"] == "pending_review" and e["provenance"]["kept"].startswith("demo-c") for e in replies)
    pending = vigil(tmp_path, "kb", "pending").stdout.splitlines()
    assert len(pending) == len(mined) + len(replies) and all("demo-c" in line for line in pending)
    chosen = next(line.split()[0] for line in pending if not line.startswith("reply-"))
    assert vigil(tmp_path, "kb", "approve", chosen).stdout.strip() == f"{chosen}: active"
    assert len(vigil(tmp_path, "kb", "pending").stdout.splitlines()) == len(mined) + len(replies) - 1
    exported = {e["id"]: e for e in map(json.loads, vigil(tmp_path, "kb", "export").stdout.splitlines())}
    assert exported[chosen]["status"] == "active" and exported[chosen]["provenance"]["source"] == "miner"
    # Searched as the conversations' tenant sees it (VIGIL_DEFAULT_TENANT here; a running demo's otherwise), the
    # approved entry is found with its problem's words; it is the tenant's, so global entries alone would miss it.
    problem = exported[chosen]["provenance"]["cases"][0]["problem"]
    found = vigil(tmp_path, "kb", "search", problem, "--k", "10", VIGIL_DEFAULT_TENANT=exported[chosen]["tenant"])
    assert found.stdout.startswith(f"as tenant {exported[chosen]['tenant']}:") and chosen in found.stdout, found
    assert exported[chosen]["provenance"]["cases"][0]["conversation_id"].startswith("demo-c")

    retired = vigil(tmp_path, "kb", "retire", chosen)
    assert retired.stdout.strip() == f"{chosen}: retired"
    unknown = vigil(tmp_path, "kb", "approve", "no-such-entry")
    assert unknown.returncode == 1 and "no knowledge entry 'no-such-entry'" in unknown.stderr
