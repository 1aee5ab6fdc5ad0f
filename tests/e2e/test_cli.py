"""The `vigil` command line: settings errors, `replay`, `db upgrade`, `schema`."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import time
from pathlib import Path

import pytest

from tests.conftest import Topics, create_topics
from tests.e2e.harness import Database, VigilCli, case, message
from tests.kafka_client import read_topic
from vigil.dev.broker import EmbeddedBroker
from vigil.panel.settings import PanelUser

pytestmark = pytest.mark.e2e

RULEBOOKS = Path(__file__).parents[2] / "knowledge" / "rulebooks"
TABLES = {"conversation", "message", "case_event", "feedback", "suggestion"}


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("VIGIL_HTTP__PORT", "eighty"),
        ("VIGIL_HTTP__PORT", "70000"),
        ("VIGIL_KAFKA__PARTITIONS", "0"),
        ("VIGIL_KAFKA__SESSION_TIMEOUT_S", "1"),
        ("VIGIL_LOG_LEVEL", "LOUD"),
        ("VIGIL_INGEST__MAX_TEXT_BYTES", "-1"),
        ("VIGIL_DATABASE__URL", "mysql+aiomysql://vigil@127.0.0.1/vigil"),
        pytest.param(
            "VIGIL_DATABASE__URL",
            "postgres://postgres@127.0.0.1/vigil",
            id="VIGIL_DATABASE__URL-postgres-scheme",
        ),
        pytest.param(
            "VIGIL_KAFKA",
            "bootstrap_servers=127.0.0.1:9092",
            id="VIGIL_KAFKA-not-json",
        ),
    ],
)
def test_bad_setting_stops_start_up_with_one_line_naming_it(
    vigil: VigilCli, kafka: EmbeddedBroker, variable: str, value: str
) -> None:
    refused_at_start(vigil, kafka, variable, value)


def refused_at_start(vigil: VigilCli, kafka: EmbeddedBroker, variable: str, value: str) -> str:
    """``vigil run`` with ``variable`` set to ``value`` exits 2 with one line naming it; that line."""
    result = vigil.call("run", timeout_s=30, VIGIL_KAFKA__BOOTSTRAP_SERVERS=kafka.bootstrap, **{variable: value})
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"vigil: invalid setting {variable}: "), lines[0]
    return lines[0]


@pytest.mark.parametrize("command", ["run", "replay"])
def test_commands_that_need_kafka_refuse_to_start_without_bootstrap(
    vigil: VigilCli, tmp_path: Path, command: str
) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps(message("c", "m")) + "\n")
    args = ["replay", str(events)] if command == "replay" else ["run"]
    result = vigil.call(*args, timeout_s=30)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("vigil: invalid setting VIGIL_KAFKA__BOOTSTRAP_SERVERS: "), lines[0]


def test_http_port_in_use_stops_start_up_with_one_line(vigil: VigilCli, kafka: EmbeddedBroker) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = vigil.call(
            "run", timeout_s=30, VIGIL_KAFKA__BOOTSTRAP_SERVERS=kafka.bootstrap, VIGIL_HTTP__PORT=str(port)
        )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith("vigil: ") and f"127.0.0.1:{port}" in last, last


async def test_replay_unchecked_publishes_every_line_keyed_by_conversation(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, sqlite_url: str, tmp_path: Path
) -> None:
    events = [case("rp-c1", "rp-e1", "opened"), case("rp-c2", "rp-e2", "opened")]
    events += [message(f"rp-c{n % 2 + 1}", f"rp-m{n}", f"line {n} ✓") for n in range(8)]
    lines = [json.dumps(e, ensure_ascii=False).encode() for e in events]
    malformed = b'{"type": "message", "conversation_id": "rp-c1", oops'
    lines.insert(5, malformed)
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines[:3]) + b"\n\n   \n" + b"\r\n".join(lines[3:]) + b"\n")  # blank lines, CRLF
    await create_topics(kafka.bootstrap, topics)

    rate = 5.0
    started = time.monotonic()
    result = vigil.call(
        "replay",
        str(path),
        "--rate",
        str(rate),
        "--topic",
        topics.input,
        "--unchecked",  # the malformed line too: the daemon dead-letters it
        VIGIL_KAFKA__BOOTSTRAP_SERVERS=kafka.bootstrap,
        VIGIL_KAFKA__INPUT_TOPIC="not-this-one",
    )
    took = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"published {len(lines)} events to {topics.input}"
    assert took >= (len(lines) - 1) / rate, f"{len(lines)} lines at {rate}/s in {took:.2f}s"

    published = read_topic(kafka.bootstrap, topics.input, expect=len(lines))
    assert sorted(r.value or b"" for r in published) == sorted(lines)
    for r in published:
        want = None if r.value == malformed else json.loads(r.value or b"")["conversation_id"].encode()
        assert r.key == want, r
    for key in (b"rp-c1", b"rp-c2"):  # one partition per conversation, in file order
        got = [r for r in published if r.key == key]
        assert len({r.partition for r in got}) == 1
        assert [r.value for r in sorted(got, key=lambda r: r.offset)] == [
            v for v in lines if key in v and v != malformed
        ]

    daemon = vigil.daemon(kafka.bootstrap, topics, sqlite_url)
    db = Database(sqlite_url)
    await db.reach("message", 8, daemon)
    dead = read_topic(kafka.bootstrap, topics.dlq, expect=1)
    assert [(d.value, d.key, d.headers["vigil.dlq.reason"]) for d in dead] == [(malformed, None, b"invalid_json")]
    daemon.stop()


def test_db_upgrade_creates_the_schema_once(vigil: VigilCli, db_url: str) -> None:
    db = Database(db_url)
    assert not db.tables() & TABLES
    first = vigil.call("db", "upgrade", VIGIL_DATABASE__URL=db_url)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "database schema is up to date"
    assert db.tables() >= TABLES | {"alembic_version"}
    version = db.query("SELECT version_num FROM alembic_version")
    assert len(version) == 1

    db.execute(
        "INSERT INTO conversation (id, tenant, status, opened_at, updated_at, message_count) "
        "VALUES ('kept', 't', 'open', '2026-11-02 09:00:00', '2026-11-02 09:00:00', 0)"
    )
    second = vigil.call("db", "upgrade", VIGIL_DATABASE__URL=db_url)
    assert second.returncode == 0, second.stderr
    assert db.query("SELECT version_num FROM alembic_version") == version
    assert db.query("SELECT id FROM conversation") == [("kept",)], "a second upgrade must not touch the data"


@pytest.mark.parametrize(
    ("kind", "required"),
    [
        ("message", {"type", "message_id", "conversation_id", "sent_at", "role", "text"}),
        ("case", {"type", "event_id", "conversation_id", "at", "event"}),
        ("feedback", {"type", "feedback_id", "suggestion_id", "conversation_id", "verdict", "at"}),
    ],
)
def test_schema_prints_the_v1_json_schema_of_a_type(vigil: VigilCli, kind: str, required: set[str]) -> None:
    result = vigil.call("schema", kind)
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    assert set(schema["required"]) >= required
    assert schema["properties"]["schema_version"]["const"] == 1


def test_the_panel_is_never_open_beyond_loopback_without_sign_in(vigil: VigilCli, kafka: EmbeddedBroker) -> None:
    result = vigil.call("run", timeout_s=30, VIGIL_KAFKA__BOOTSTRAP_SERVERS=kafka.bootstrap, VIGIL_HTTP__HOST="0.0.0.0")
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("vigil: invalid setting VIGIL_PANEL__AUTH: ") and "0.0.0.0" in line, line
    tokens = vigil.call("run", timeout_s=30, VIGIL_KAFKA__BOOTSTRAP_SERVERS=kafka.bootstrap, VIGIL_PANEL__AUTH="tokens")
    assert tokens.returncode == 2 and "VIGIL_PANEL__USERS is empty" in tokens.stderr, tokens.stderr


def test_token_makes_a_token_and_the_users_entry_that_accepts_it(vigil: VigilCli) -> None:
    result = vigil.call("token", "ana", "--role", "lead", "--tenant", "acme", "--tenant", "globex")
    assert result.returncode == 0, result.stderr
    first, _, entry = result.stdout.splitlines()
    token = first.rsplit(" ", 1)[1]
    user = PanelUser.model_validate_json(entry)
    assert (user.name, user.role, user.tenants) == ("ana", "lead", ["acme", "globex"])
    assert user.token_sha256 == hashlib.sha256(token.encode()).hexdigest() and len(token) >= 40
    assert vigil.call("token", "bo").returncode == 2  # a tenant is required


def test_policy_check_prints_a_verdict_a_line_and_fails_on_a_line_that_is_not_a_request(
    vigil: VigilCli, tmp_path: Path
) -> None:
    requests = tmp_path / "requests.jsonl"
    verified = {"identity_verified": True, "confirmed": True, "customer": {"id": "CUS-1001"}}
    requests.write_text(
        json.dumps(
            {
                "action": "change_email",
                "args": {"customer_id": "CUS-1001", "email": "a@example.com"},
                "context": verified,
            }
        )
        + "\n"
        + json.dumps(
            {
                "action": "issue_credit",
                "args": {"customer_id": "CUS-1001", "amount_cents": 20000, "reason": "outage"},
                "context": verified | {"goodwill": {"last_30_days_cents": 0}},
            }
        )
        + "\n",
        encoding="utf-8",
    )
    result = vigil.call("policy", "check", str(requests), "--rulebook", "demo")
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {
            "verdict": "allow",
            "rule": "change_account_details",
            "reason": "A verified customer may change their address, contact e-mail, two-factor set-up and payment "
            "methods.",
            "approver": None,
            "separate_from": [],
        },
        {
            "verdict": "deny",
            "rule": "goodwill_over_limit",
            "reason": "A goodwill credit over £100 is the complaints team's decision, not the chat's.",
            "approver": None,
            "separate_from": [],
        },
    ]
    requests.write_text("{}\n", encoding="utf-8")
    invalid = vigil.call("policy", "check", str(requests))
    assert invalid.returncode == 1 and json.loads(invalid.stdout)["rule"] == "invalid_request"
    missing = vigil.call("policy", "check", str(requests), "--rulebook", str(tmp_path / "nowhere"))
    assert missing.returncode == 1 and "no such rulebook directory" in missing.stderr


@pytest.mark.parametrize("rulebook", ["demo", "tau2-retail", "tau2-airline"])
def test_policy_test_passes_every_case_a_bundled_rulebook_ships(vigil: VigilCli, rulebook: str) -> None:
    result = vigil.call("policy", "test", rulebook)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("PASS  ") for line in lines[:-1]), result.stdout
    assert lines[-1].startswith(f"{len(lines) - 1} passed, 0 failed ({rulebook}:")  # and no rule left unnamed


def test_policy_test_fails_on_a_wrong_expectation_saying_where_and_what(vigil: VigilCli, tmp_path: Path) -> None:
    rulebook = Path(shutil.copytree(RULEBOOKS / "demo", tmp_path / "acme"))
    tests = rulebook / "tests.yaml"
    text = tests.read_text("utf-8")
    wrong = "expect: {verdict: needs_approval, rule: large_refund_needs_lead, approver: analyst}"
    tests.write_text(
        text.replace("expect: {verdict: needs_approval, rule: large_refund_needs_lead, approver: lead}", wrong)
    )
    result = vigil.call("policy", "test", str(rulebook))
    assert result.returncode == 1, result.stdout + result.stderr
    case_line = text[: text.index("- name: a refund over £50 waits for a lead")].count("\n") + 1
    failure = result.stdout.split("FAIL  ", 1)[1].splitlines()
    assert failure[0] == f"a refund over £50 waits for a lead  ({tests}:{case_line})"
    assert failure[1].split() == [
        "expected:",
        "needs_approval",
        "by",
        "large_refund_needs_lead,",
        "a",
        "analyst",
        "approves",
    ]
    assert failure[2].split()[:7] == [
        "got:",
        "needs_approval",
        "by",
        "large_refund_needs_lead,",
        "a",
        "lead",
        "approves:",
    ]
    assert result.stdout.splitlines()[-1].endswith("1 failed (acme: 22 cases)")
    (rulebook / "tests.yaml").unlink()
    missing = vigil.call("policy", "test", str(rulebook))
    assert missing.returncode == 1 and "tests.yaml: no such file" in missing.stderr


# --- issue 9: errors a newcomer meets first ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("VIGIL_KNOWLEDGE__PATHS", "/no/such/dir", "a JSON list"),
        ("VIGIL_KNOWLEDGE__PATHS", '["/no/such/dir"]', "no such file or folder: /no/such/dir"),
        ("VIGIL_PANEL__USERS", "notjson", "a JSON list"),
    ],
)
def test_a_bad_list_setting_stops_start_up_at_once_naming_the_variable(
    vigil: VigilCli, kafka: EmbeddedBroker, variable: str, value: str, problem: str
) -> None:
    line = refused_at_start(vigil, kafka, variable, value)
    assert problem in line, line


@pytest.mark.parametrize("k", ["0", "-1", "two"])
def test_kb_search_refuses_a_k_below_one_before_loading_anything(vigil: VigilCli, tmp_path: Path, k: str) -> None:
    result = vigil.call("kb", "search", "my order", "--k", k, timeout_s=30)
    assert result.returncode == 2, result.stderr
    assert "argument --k" in result.stderr.splitlines()[-1], result.stderr
    assert not (tmp_path / ".vigil").exists(), "the knowledge store was opened"


def test_run_help_says_kafka_and_or_mqtt(vigil: VigilCli) -> None:
    result = vigil.call("run", "--help", timeout_s=30)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "Kafka" in text and "MQTT" in text and "VIGIL_MQTT__HOST" in text, text


async def test_replay_names_the_lines_that_are_not_events_and_publishes_the_rest(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, tmp_path: Path
) -> None:
    good = [json.dumps(message("rb-c1", f"rb-m{n}")) for n in range(5)]
    lines = [*good[:2], '{"type": "message", oops', *good[2:4], '{"type": "nonsense"}', good[4]]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    await create_topics(kafka.bootstrap, topics)

    result = vigil.call(
        "replay", str(path), VIGIL_KAFKA__BOOTSTRAP_SERVERS=kafka.bootstrap, VIGIL_KAFKA__INPUT_TOPIC=topics.input
    )
    assert result.returncode == 1, result.stderr
    assert result.stdout.strip() == f"published 5 events to {topics.input}"
    errors = result.stderr.splitlines()
    assert errors[0].startswith(f"vigil: {path}:3: not published, invalid_json: "), errors
    assert errors[1].startswith(f"vigil: {path}:6: not published, unknown_type: "), errors
    assert errors[2] == f"vigil: 2 lines of {path} are not v1 events and were not published", errors
    published = read_topic(kafka.bootstrap, topics.input, expect=5)
    assert sorted(r.value or b"" for r in published) == sorted(g.encode() for g in good)


@pytest.mark.parametrize("what", ["missing", "folder"])
def test_replay_of_a_missing_file_says_so(vigil: VigilCli, kafka: EmbeddedBroker, tmp_path: Path, what: str) -> None:
    path = tmp_path / "nowhere.jsonl" if what == "missing" else tmp_path
    result = vigil.call("replay", str(path), timeout_s=30, VIGIL_KAFKA__BOOTSTRAP_SERVERS=kafka.bootstrap)
    assert result.returncode == 2, result.stderr
    said = "no such file" if what == "missing" else "not a file"
    assert result.stderr.splitlines() == [f"vigil: {said}: {path}"], result.stderr


def test_a_command_on_an_up_to_date_database_logs_nothing(vigil: VigilCli, sqlite_url: str) -> None:
    first = vigil.call("db", "upgrade", timeout_s=60, VIGIL_DATABASE__URL=sqlite_url)
    assert first.returncode == 0, first.stderr
    assert "Running upgrade" in first.stderr  # what changed the schema is said
    assert "Context impl" not in first.stderr, first.stderr
    again = vigil.call("db", "upgrade", timeout_s=60, VIGIL_DATABASE__URL=sqlite_url)
    assert again.returncode == 0, again.stderr
    assert again.stderr == "", again.stderr
    assert again.stdout.strip() == "database schema is up to date"
