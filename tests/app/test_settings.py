"""Settings come from VIGIL_* variables; a bad one is named in one clear error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vigil.app.settings import Settings, load_settings
from vigil.core.errors import SettingsError
from vigil.db.engine import open_engine


def test_defaults_are_the_documented_ones(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings.kafka.bootstrap_servers is None
    assert (settings.kafka.group_id, settings.kafka.input_topic) == ("vigil", "vigil.conversations")
    assert (settings.kafka.suggestions_topic, settings.kafka.dlq_topic) == ("vigil.suggestions", "vigil.dlq")
    assert settings.data_dir == Path(".vigil")
    assert settings.database_url == f"sqlite+aiosqlite:///{(tmp_path / '.vigil' / 'vigil.db').resolve()}"
    assert (settings.http.host, settings.http.port) == ("127.0.0.1", 8080)
    assert settings.graceful_timeout_s == 10
    assert settings.ingest.max_text_bytes == 64 * 1024


def test_nested_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VIGIL_KAFKA__BOOTSTRAP_SERVERS", "kafka-1:9092,kafka-2:9092")
    monkeypatch.setenv("VIGIL_DATABASE__URL", "postgresql+asyncpg://vigil@db/vigil")
    monkeypatch.setenv("VIGIL_HTTP__PORT", "9000")
    monkeypatch.setenv("VIGIL_GRACEFUL_TIMEOUT_S", "25")
    settings = load_settings()
    assert settings.kafka.bootstrap_servers == "kafka-1:9092,kafka-2:9092"
    assert settings.database_url == "postgresql+asyncpg://vigil@db/vigil"
    assert settings.http.port == 9000 and settings.graceful_timeout_s == 25


def test_a_dotenv_file_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("VIGIL_KAFKA__GROUP_ID=from-dotenv\n")
    assert load_settings().kafka.group_id == "from-dotenv"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("VIGIL_HTTP__PORT", "eighty"),
        ("VIGIL_HTTP__PORT", "70000"),
        ("VIGIL_GRACEFUL_TIMEOUT_S", "-1"),
        ("VIGIL_INGEST__MAX_IN_FLIGHT", "0"),
        ("VIGIL_LOG_LEVEL", "LOUD"),
        ("VIGIL_KAFKA__SESSION_TIMEOUT_S", "1"),
    ],
)
def test_a_bad_setting_names_its_variable(monkeypatch: pytest.MonkeyPatch, variable: str, value: str):
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert caught.value.setting == variable


def test_the_cli_prints_one_line_and_exits_2(tmp_path: Path):
    vigil = Path(sys.executable).parent / "vigil"
    result = subprocess.run(
        [str(vigil), "run"],
        env={"VIGIL_HTTP__PORT": "eighty", "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vigil: invalid setting VIGIL_HTTP__PORT")


@pytest.mark.parametrize("url", ["mysql+aiomysql://x@y/z", "postgres://x@y/z", "postgresql://x@y/z", "not a url"])
def test_unsupported_database_urls_are_refused(monkeypatch: pytest.MonkeyPatch, url: str):
    monkeypatch.setenv("VIGIL_DATABASE__URL", url)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert caught.value.setting == "VIGIL_DATABASE__URL"


def test_a_nested_section_given_whole_must_be_json(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VIGIL_KAFKA", "bootstrap_servers=kafka:9092")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert caught.value.setting == "VIGIL_KAFKA"
    monkeypatch.setenv("VIGIL_KAFKA", '{"bootstrap_servers": "kafka:9092"}')
    assert load_settings().kafka.bootstrap_servers == "kafka:9092"


def test_an_uncreatable_data_dir_is_a_settings_error(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    settings = Settings(_env_file=None, data_dir=blocker / "data")  # type: ignore[call-arg]
    with pytest.raises(SettingsError) as caught:
        open_engine(settings.database, data_dir=settings.data_dir)
    assert caught.value.setting == "VIGIL_DATA_DIR"


@pytest.mark.parametrize(
    ("host", "allowed"),
    [("127.0.0.1", True), ("localhost", True), ("::1", True), ("[::1]", True), ("0.0.0.0", False), ("10.0.0.7", False)],
)
def test_the_panel_runs_without_sign_in_only_on_loopback(monkeypatch: pytest.MonkeyPatch, host: str, allowed: bool):
    monkeypatch.setenv("VIGIL_HTTP__HOST", host)
    if allowed:
        assert load_settings().panel.auth == "none"
        return
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert refused.value.setting == "VIGIL_PANEL__AUTH" and host in refused.value.problem
    monkeypatch.setenv("VIGIL_PANEL__AUTH", "tokens")
    monkeypatch.setenv(
        "VIGIL_PANEL__USERS", '[{"name": "ana", "tenants": ["acme"], "token_sha256": "' + "a" * 64 + '"}]'
    )
    assert load_settings().panel.users[0].role == "analyst"
    # The API is served with the panel off too: switching the panel off does not lift the rule.
    monkeypatch.setenv("VIGIL_PANEL__AUTH", "none")
    monkeypatch.setenv("VIGIL_PANEL__ENABLED", "false")
    with pytest.raises(SettingsError):
        load_settings()


def test_sign_in_settings_must_be_complete(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VIGIL_PANEL__AUTH", "tokens")
    with pytest.raises(SettingsError, match="VIGIL_PANEL__USERS is empty"):
        load_settings()
    monkeypatch.setenv("VIGIL_PANEL__AUTH", "oidc")
    monkeypatch.setenv("VIGIL_PANEL__OIDC__ISSUER", "https://login.example.com")
    with pytest.raises(SettingsError, match="VIGIL_PANEL__OIDC__CLIENT_ID"):
        load_settings()
    monkeypatch.setenv("VIGIL_PANEL__USERS", '[{"name": "ana", "tenants": ["acme"], "token_sha256": "not-hex"}]')
    with pytest.raises(SettingsError) as bad_user:
        load_settings()
    assert bad_user.value.setting.startswith("VIGIL_PANEL__USERS")


def test_mqtt_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VIGIL_MQTT__HOST", "127.0.0.1")
    monkeypatch.setenv("VIGIL_MQTT__QOS", "2")
    assert (load_settings().mqtt.host, load_settings().mqtt.qos) == ("127.0.0.1", 2)
    monkeypatch.setenv("VIGIL_MQTT__EVENTS_TOPIC", "chat/+/events")
    with pytest.raises(SettingsError, match="VIGIL_MQTT__EVENTS_TOPIC"):
        load_settings()


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("VIGIL_MQTT__DLQ_TOPIC", "vigil/dlq/#", "wildcards"),
        ("VIGIL_MQTT__EVENTS_TOPIC", "{tenant}/{conversation_id}", "VIGIL_MQTT__DLQ_TOPIC"),  # +/+ matches vigil/dlq
        ("VIGIL_MQTT__SUGGESTIONS_TOPIC", "vigil/{tenant}/{conversation_id}/events", "VIGIL_MQTT__SUGGESTIONS_TOPIC"),
    ],
)
def test_vigil_never_subscribes_to_what_it_publishes(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, problem: str
):
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=problem):
        load_settings()


# Every kind of setting, given a bad value, is refused with the variable an operator set (never its section, never
# another variable) and what is wrong with the value.
@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        pytest.param("VIGIL_KAFKA__PARTITIONS", "six", "valid integer", id="int"),
        pytest.param("VIGIL_ANSWERS__MIN_CONFIDENCE", "high", "valid number", id="float"),
        pytest.param("VIGIL_ANSWERS__MIN_CONFIDENCE", "2", "less than or equal to 1", id="float-range"),
        pytest.param("VIGIL_KAFKA__CREATE_TOPICS", "perhaps", "valid boolean", id="bool"),
        pytest.param("VIGIL_PANEL__AUTH", "maybe", "'none', 'tokens' or 'oidc'", id="literal"),
        pytest.param("VIGIL_PANEL__OIDC__DEFAULT_ROLE", "boss", "'analyst', 'lead' or 'admin'", id="nested-literal"),
        pytest.param("VIGIL_KNOWLEDGE__PATHS", "/no/such/dir", "a JSON list", id="list-not-json"),
        pytest.param("VIGIL_KNOWLEDGE__PATHS", '{"a": 1}', "valid list", id="list-an-object"),
        pytest.param("VIGIL_KNOWLEDGE__PATHS", '["/no/such/dir"]', "no such file or folder: /no/such/dir", id="path"),
        pytest.param("VIGIL_KNOWLEDGE__MODEL_PATH", "/no/such/model", "no such folder: /no/such/model", id="folder"),
        pytest.param("VIGIL_DEMO__CONVERSATIONS", "/no/such.jsonl", "no such file: /no/such.jsonl", id="file"),
        pytest.param("VIGIL_PANEL__USERS", "notjson", "a JSON list", id="users-not-json"),
        pytest.param(
            "VIGIL_PANEL__USERS",
            '[{"name": "ana", "tenants": ["acme"], "token_sha256": "nothex"}]',
            "[0].token_sha256: String should match pattern",
            id="users-bad-entry",
        ),
        pytest.param("VIGIL_PANEL__OIDC", "notjson", "a JSON object", id="nested-section-not-json"),
        pytest.param("VIGIL_KAFKA", "notjson", "e.g. VIGIL_KAFKA__BOOTSTRAP_SERVERS", id="section-not-json"),
        pytest.param("VIGIL_HTTP", "notjson", "e.g. VIGIL_HTTP__HOST", id="other-section-not-json"),
        pytest.param("VIGIL_MQTT__TLS_CA_FILE", "/etc/hostname", "VIGIL_MQTT__TLS is not", id="rule-mqtt"),
        pytest.param("VIGIL_DATABASE__URL", "nope", "not a database URL", id="validator"),
    ],
)
def test_every_kind_of_bad_value_names_the_variable_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str, value: str, problem: str
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert caught.value.setting == variable, caught.value
    assert problem in caught.value.problem, caught.value
    assert "Value error" not in caught.value.problem


def test_a_bad_value_in_the_dotenv_file_is_named_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("VIGIL_PANEL__USERS=notjson\n")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert caught.value.setting == "VIGIL_PANEL__USERS" and "a JSON list" in caught.value.problem


def test_oidc_names_the_missing_part(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VIGIL_PANEL__AUTH", "oidc")
    monkeypatch.setenv("VIGIL_PANEL__OIDC__ISSUER", "https://login.example.com")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert caught.value.setting == "VIGIL_PANEL__OIDC__CLIENT_ID"


def test_existing_knowledge_paths_are_taken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    (tmp_path / "faq.yaml").write_text("")
    monkeypatch.setenv("VIGIL_KNOWLEDGE__PATHS", f'["{tmp_path}", "{tmp_path / "faq.yaml"}"]')
    assert load_settings().knowledge.paths == [tmp_path, tmp_path / "faq.yaml"]


def test_each_tenant_may_have_its_own_locale_and_time_zone(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(
        "VIGIL_PANEL__TENANT_DISPLAY",
        '{"acme-uk": {"locale": "en-GB", "time_zone": "Europe/London"}, "acme-us": {"locale": "en-US"}}',
    )
    monkeypatch.setenv("VIGIL_PANEL__TIME_ZONE", "America/New_York")
    displays = load_settings().panel.displays
    assert (displays.of("acme-uk").locale, displays.of("acme-uk").time_zone) == ("en-GB", "Europe/London")
    assert (displays.of("acme-us").locale, displays.of("acme-us").time_zone) == ("en-US", "America/New_York")
    assert (displays.default.locale, displays.default.time_zone) == ("en-GB", "America/New_York")


def test_times_default_to_24_hour_utc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.chdir(tmp_path)
    panel = load_settings().panel
    assert (panel.locale, panel.time_zone, panel.tenant_display) == ("en-GB", "UTC", {})


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("VIGIL_PANEL__TIME_ZONE", "Europe/Lundun", "'Europe/Lundun' is not an IANA time zone"),
        ("VIGIL_PANEL__LOCALE", "en_GB", "'en_GB' is not a BCP 47 locale tag"),
        (
            "VIGIL_PANEL__TENANT_DISPLAY",
            '{"acme-uk": {"locale": "en-GB", "time_zone": "Mars/Olympus"}}',
            "acme-uk.time_zone: 'Mars/Olympus' is not an IANA time zone",
        ),
        ("VIGIL_PANEL__TENANT_DISPLAY", '{"acme-uk": {"locale": "en GB"}}', "acme-uk.locale: 'en GB' is not a BCP 47"),
        ("VIGIL_PANEL__TENANT_DISPLAY", '{"acme-uk": {"zone": "UTC"}}', "acme-uk.zone: Extra inputs"),
        ("VIGIL_PANEL__TENANT_DISPLAY", '{"acme-uk": ', "not valid JSON"),
    ],
)
def test_an_unknown_time_zone_or_malformed_locale_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str
):
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert caught.value.setting == variable and says in str(caught.value)


def test_the_cli_refuses_an_unknown_time_zone_with_exit_2(tmp_path: Path):
    vigil = Path(sys.executable).parent / "vigil"
    result = subprocess.run(
        [str(vigil), "run"],
        env={
            "VIGIL_PANEL__TENANT_DISPLAY": '{"acme-uk": {"time_zone": "Europe/Lundun"}}',
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),  # this checkout's vigil, as the tests import it
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().startswith("vigil: invalid setting VIGIL_PANEL__TENANT_DISPLAY: acme-uk.time_zone:")


def test_a_removed_setting_still_set_is_ignored(monkeypatch: pytest.MonkeyPatch):
    # VIGIL_ANSWERS__COOLDOWN_S went with the cooldown (issue 11); a deployment that still sets it starts.
    monkeypatch.setenv("VIGIL_ANSWERS__COOLDOWN_S", "20")
    monkeypatch.setenv("VIGIL_ANSWERS__MAX_QUESTION_OVERLAP", "0.9")
    settings = load_settings()
    assert settings.answers.max_question_overlap == 0.9
    assert not hasattr(settings.answers, "cooldown_s")
