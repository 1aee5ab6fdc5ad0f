"""vigil's settings: one ``Settings`` built once by the CLI and passed down.

Every setting comes from the environment with the prefix ``VIGIL_`` (nested parts joined by ``__``, for example
``VIGIL_KAFKA__BOOTSTRAP_SERVERS``) or from a ``.env`` file, and has a sane default.
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, DotEnvSettingsSource, EnvSettingsSource, SettingsConfigDict
from pydantic_settings import SettingsError as SourceError

from vigil.core.errors import SettingsError
from vigil.panel.display import Display, Displays, locale_problem, zone_problem

ASYNC_DRIVERS = {("sqlite", "aiosqlite"), ("postgresql", "asyncpg"), ("postgresql", "psycopg")}
ENV_PREFIX = "VIGIL_"
ENV_NESTED_DELIMITER = "__"


class RuleBroken(ValueError):
    """A rule across settings is broken; ``setting`` names the variable to change (raised in model validators)."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"{setting} {problem}")
        self.setting = setting
        self.problem = problem


class KafkaSettings(BaseModel):
    """Where the conversation stream comes from and where suggestions and dead letters go."""

    bootstrap_servers: str | None = Field(
        default=None, description="Comma-separated host:port list; required by `vigil run`."
    )
    group_id: str = Field(default="vigil", min_length=1)
    input_topic: str = Field(default="vigil.conversations", min_length=1)
    suggestions_topic: str = Field(default="vigil.suggestions", min_length=1)
    dlq_topic: str = Field(default="vigil.dlq", min_length=1)
    client_id: str = Field(default="vigil", min_length=1)
    create_topics: bool = Field(default=True, description="Create missing topics at start-up.")
    partitions: int = Field(default=6, ge=1, description="Partitions of topics vigil creates.")
    replication_factor: int = Field(default=1, ge=1, description="Replication of topics vigil creates.")
    commit_interval_s: float = Field(default=0.5, gt=0)
    fetch_max_records: int = Field(default=500, ge=1)
    fetch_max_wait_s: float = Field(
        default=0.02, gt=0, description="Longest a fetch may wait on the broker for records; bounds latency."
    )
    request_timeout_s: float = Field(default=10.0, gt=0)
    session_timeout_s: float = Field(
        default=10.0, ge=6.0, description="Kafka group session; a new member joins in about half of it."
    )


class DatabaseSettings(BaseModel):
    """The case store."""

    @field_validator("url")
    @classmethod
    def _usable_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        # Imported here: SQLAlchemy takes half a second to import, which commands without a database skip.
        import sqlalchemy as sa  # noqa: PLC0415

        try:
            url = sa.make_url(value)
        except sa.exc.ArgumentError as exc:
            raise ValueError(f"not a database URL ({exc})") from exc
        backend, _, driver = url.drivername.partition("+")
        if (backend, driver) not in ASYNC_DRIVERS:
            raise ValueError(
                f"{url.drivername!r} is not supported; use sqlite+aiosqlite:///PATH or "
                "postgresql+asyncpg://USER:PASSWORD@HOST/DB"
            )
        return value

    url: str | None = Field(
        default=None,
        description="SQLAlchemy async URL; default SQLite in the data dir. "
        "PostgreSQL: postgresql+asyncpg://user@host/db",
    )
    migrate_on_start: bool = True
    batch_max_events: int = Field(default=256, ge=1)
    pool_size: int = Field(default=5, ge=1)
    timeout_s: float = Field(default=5.0, gt=0)


class HttpSettings(BaseModel):
    """The daemon's one HTTP port: health, metrics, API (and later the panel)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)


class MqttSettings(BaseModel):
    """The chat-platform sidecar: conversation events from MQTT, suggestions back to MQTT."""

    host: str | None = Field(default=None, description="MQTT broker host; set it to take events from MQTT.")
    port: int = Field(default=1883, ge=1, le=65535)
    username: str | None = None
    password: SecretStr | None = None
    tls: bool = Field(default=False, description="Connect with TLS (the system's CA certificates).")
    tls_ca_file: Path | None = Field(
        default=None, description="With tls: the CA certificates (PEM) to trust instead of the system's."
    )
    client_id: str = Field(
        default="vigil", min_length=1, description="Stable id: the broker keeps this session across restarts."
    )
    events_topic: str = Field(
        default="vigil/{tenant}/{conversation_id}/events",
        description="Where events arrive; {tenant} and {conversation_id} match one topic level each.",
    )
    suggestions_topic: str = Field(default="vigil/{tenant}/{conversation_id}/suggestions")
    dlq_topic: str = Field(default="vigil/dlq", min_length=1, description="Rejected payloads, unchanged.")
    qos: int = Field(default=1, ge=1, le=2, description="QoS of what vigil publishes (it subscribes at QoS 1).")
    session_expiry_s: int = Field(
        default=7 * 24 * 3600, ge=0, description="How long the broker keeps vigil's session while it is away."
    )
    keepalive_s: int = Field(default=30, ge=5)
    reconnect_initial_s: float = Field(default=0.5, gt=0)
    reconnect_max_s: float = Field(default=10.0, gt=0)
    max_queued_qos0: int = Field(
        default=1000,
        ge=1,
        description="QoS 0 messages held while vigil is busy (in the client's queue and in the inbox, each); beyond "
        "it new QoS 0 messages are dropped and counted. QoS 1 and 2 are never dropped: Receive Maximum bounds them.",
    )

    @field_validator("events_topic", "suggestions_topic")
    @classmethod
    def _names_the_conversation(cls, value: str) -> str:
        if "{conversation_id}" not in value:
            raise ValueError("must contain {conversation_id}")
        if "+" in value or "#" in value:
            raise ValueError("must not contain MQTT wildcards; use {tenant} and {conversation_id}")
        return value

    @field_validator("dlq_topic")
    @classmethod
    def _one_topic(cls, value: str) -> str:
        if "+" in value or "#" in value:
            raise ValueError("must not contain MQTT wildcards: it is one topic")
        return value

    @model_validator(mode="after")
    def _ca_file_with_tls(self) -> MqttSettings:
        if self.tls_ca_file is not None and not self.tls:
            raise RuleBroken("VIGIL_MQTT__TLS_CA_FILE", "is set but VIGIL_MQTT__TLS is not: set it to true to use TLS")
        return self

    @model_validator(mode="after")
    def _events_are_not_vigils_own(self) -> MqttSettings:
        """vigil must never read what it writes: a rejected payload would come back forever."""
        from paho.mqtt.client import topic_matches_sub  # noqa: PLC0415

        events = topic_filter(self.events_topic)
        for name, topic in (("DLQ_TOPIC", self.dlq_topic), ("SUGGESTIONS_TOPIC", self.suggestions_topic)):
            if topic_matches_sub(events, PLACEHOLDER.sub("x", topic)):
                raise RuleBroken("VIGIL_MQTT__EVENTS_TOPIC", f"would also receive VIGIL_MQTT__{name} ({topic!r})")
        return self


PLACEHOLDER = re.compile(r"\{(tenant|conversation_id)\}")


def topic_filter(template: str) -> str:
    """The MQTT subscription of a topic template: each level with a placeholder becomes ``+``."""
    return "/".join("+" if PLACEHOLDER.search(level) else level for level in template.split("/"))


PanelRole = Literal["analyst", "lead", "admin"]


class PanelUser(BaseModel):
    """A person who may sign in to the panel with a bearer token."""

    name: str = Field(min_length=1, max_length=256)
    role: PanelRole = "analyst"
    tenants: list[str] = Field(min_length=1, description='Tenants whose conversations they see; ["*"] for all.')
    token_sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 (hex) of their token; `vigil token`.")


class OidcSettings(BaseModel):
    """Sign-in through an OpenID Connect provider (authorization code flow with PKCE)."""

    issuer: str | None = Field(default=None, description="The provider's issuer URL (discovery is read from it).")
    client_id: str | None = None
    client_secret: SecretStr | None = None
    redirect_url: str | None = Field(
        default=None, description="This panel's callback as the provider knows it: https://HOST/auth/oidc/callback"
    )
    scopes: str = "openid email profile"
    name_claim: str = "email"
    tenant_claim: str = Field(default="tenant", description="Claim holding the tenant (a string or a list).")
    role_claim: str = Field(default="vigil_role", description="Claim holding analyst, lead or admin.")
    default_role: PanelRole = "analyst"
    timeout_s: float = Field(default=5.0, gt=0)
    session_max_age_s: float = Field(
        default=3600.0,
        gt=0,
        description="An OIDC sign-in lasts this long at most; then role and tenants are read again.",
    )


def _checked_locale(value: str | None) -> str | None:
    problem = locale_problem(value) if value is not None else None
    if problem:
        raise ValueError(problem)
    return value


def _checked_zone(value: str | None) -> str | None:
    problem = zone_problem(value) if value is not None else None
    if problem:
        raise ValueError(problem)
    return value


class TenantDisplay(BaseModel):
    """How one tenant's times are shown; a part left out is the panel's default (``VIGIL_PANEL__LOCALE`` or
    ``VIGIL_PANEL__TIME_ZONE``)."""

    model_config = {"extra": "forbid"}

    locale: str | None = Field(default=None, description="BCP 47 tag, e.g. en-GB (24-hour) or en-US (12-hour).")
    time_zone: str | None = Field(default=None, description="IANA time zone, e.g. Europe/London.")

    _locale = field_validator("locale")(_checked_locale)
    _zone = field_validator("time_zone")(_checked_zone)


class PanelSettings(BaseModel):
    """The analyst panel served on the HTTP port, and who may use it."""

    enabled: bool = True
    auth: Literal["none", "tokens", "oidc"] = Field(
        default="none", description="none (only on a loopback host), tokens (PANEL__USERS) or oidc."
    )
    users: list[PanelUser] = Field(default_factory=list)
    session_secret: SecretStr | None = Field(
        default=None, description="Signs session cookies; unset: random at start (sign-ins end with the process)."
    )
    session_max_age_s: float = Field(default=12 * 3600, gt=0, description="A sign-in lasts this long at most.")
    secure_cookies: bool = Field(default=False, description="Send cookies over HTTPS only (set behind TLS).")
    fanout: bool = Field(
        default=True, description="On PostgreSQL, relay live updates between replicas (LISTEN/NOTIFY)."
    )
    oidc: OidcSettings = OidcSettings()
    locale: str = Field(
        default="en-GB", description="How times are written for tenants not in TENANT_DISPLAY (BCP 47 tag)."
    )
    time_zone: str = Field(default="UTC", description="The time zone of tenants not in TENANT_DISPLAY (IANA name).")
    tenant_display: dict[str, TenantDisplay] = Field(
        default_factory=dict,
        description='Per tenant: {"acme-uk": {"locale": "en-GB", "time_zone": "Europe/London"}}.',
    )

    _locale = field_validator("locale")(_checked_locale)
    _zone = field_validator("time_zone")(_checked_zone)

    @property
    def displays(self) -> Displays:
        """Each tenant's display, with the default for the rest."""
        default = Display(self.locale, self.time_zone)
        tenants = {
            tenant: Display(d.locale or default.locale, d.time_zone or default.time_zone)
            for tenant, d in self.tenant_display.items()
        }
        return Displays(default, tenants)


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


class KnowledgeSettings(BaseModel):
    """The knowledge store: help articles, FAQs, documents and knowledge mined from cases."""

    paths: list[Path] = Field(
        default_factory=list, description="Knowledge files or folders imported at start-up (vigil demo: bundled)."
    )
    model_path: Path | None = Field(default=None, description="Sentence-transformers model folder; default bundled.")
    chroma_url: str | None = Field(default=None, description="Chroma server, for several replicas; default on disk.")
    refresh_interval_s: float = Field(default=10.0, gt=0, description="How often to pick up knowledge changes.")
    embedding_threads: int = Field(default=1, ge=1, description="CPU threads for embeddings.")

    @field_validator("paths")
    @classmethod
    def _paths_exist(cls, paths: list[Path]) -> list[Path]:
        # Checked here, not at the first import: start-up would retry a missing folder as if it were an outage.
        for path in paths:
            if not path.exists():
                raise ValueError(f"no such file or folder: {path}")
        return paths

    @field_validator("model_path")
    @classmethod
    def _model_is_a_folder(cls, path: Path | None) -> Path | None:
        if path is not None and not path.is_dir():
            raise ValueError(f"no such folder: {path}")
        return path


class AnswerSettings(BaseModel):
    """Proactive answers and when vigil speaks (the intervention policy)."""

    enabled: bool = True
    min_confidence: float = Field(default=0.5, ge=0, le=1, description="Speak only above this probability.")
    faq_confidence: float = Field(default=0.6, ge=0, le=1, description="Answer from an FAQ at once above this.")
    cooldown_s: float = Field(default=20.0, ge=0, description="Quiet time after an answer in a conversation.")
    max_age_s: float = Field(default=300.0, gt=0, description="Do not answer messages older than this.")
    max_similarity: float = Field(default=0.8, gt=0, le=1, description="Too close to an earlier suggestion.")
    max_chars: int = Field(default=600, ge=80, description="Longest extractive answer.")


class LlmSettings(BaseModel):
    """Optional LLM drafting of answers (Anthropic): off unless an API key is set."""

    api_key: SecretStr | None = Field(default=None, description="Anthropic API key; unset: no LLM drafting.")
    model: str = Field(default="claude-haiku-4-5", min_length=1)
    base_url: str | None = Field(default=None, description="Messages API endpoint; default the SDK's.")
    timeout_s: float = Field(
        default=3.0, gt=0, description="Hard budget for a draft; after it the extractive answer goes out."
    )
    max_tokens: int = Field(default=400, ge=16, le=8192, description="Longest draft, in output tokens.")
    # Estimates of the list prices of the default model, for the cost metric only; set them to your contract's.
    input_usd_per_mtok: float = Field(default=1.0, ge=0, description="USD per million input tokens (estimate).")
    output_usd_per_mtok: float = Field(default=5.0, ge=0, description="USD per million output tokens (estimate).")


class DemoSettings(BaseModel):
    """`vigil demo`: its embedded broker and the demo traffic it publishes."""

    conversations: Path | None = Field(default=None, description="JSONL of v1 events; default bundled.")
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


class Settings(BaseSettings):
    """All of vigil's settings."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        env_file=".env",
        extra="ignore",
    )

    data_dir: Path = Path(".vigil")
    default_tenant: str = Field(default="default", min_length=1)
    graceful_timeout_s: float = Field(default=10.0, gt=0)
    health_interval_s: float = Field(default=1.0, gt=0)
    log_level: str = "INFO"
    kafka: KafkaSettings = KafkaSettings()
    database: DatabaseSettings = DatabaseSettings()
    http: HttpSettings = HttpSettings()
    ingest: IngestSettings = IngestSettings()
    knowledge: KnowledgeSettings = KnowledgeSettings()
    answers: AnswerSettings = AnswerSettings()
    llm: LlmSettings = LlmSettings()
    demo: DemoSettings = DemoSettings()
    mqtt: MqttSettings = MqttSettings()
    panel: PanelSettings = PanelSettings()

    @model_validator(mode="after")
    def _panel_is_guarded(self) -> Settings:
        panel = self.panel
        # The API (/api/*) is served with the panel off too: the rule guards both.
        if panel.auth == "none" and not is_loopback(self.http.host):
            raise RuleBroken(
                "VIGIL_PANEL__AUTH",
                f"is none but VIGIL_HTTP__HOST {self.http.host!r} is not a loopback address; "
                "set VIGIL_PANEL__AUTH to tokens or oidc",
            )
        if panel.auth == "tokens" and not panel.users:
            raise RuleBroken("VIGIL_PANEL__AUTH", "is tokens but VIGIL_PANEL__USERS is empty")
        if panel.auth == "oidc":
            missing = [n for n in ("issuer", "client_id", "redirect_url") if not getattr(panel.oidc, n)]
            if missing:
                raise RuleBroken(
                    f"VIGIL_PANEL__OIDC__{missing[0].upper()}", "is not set, and VIGIL_PANEL__AUTH is oidc"
                )
        return self

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return level

    @property
    def database_url(self) -> str:
        """The database URL in force: the setting, or SQLite under the data dir."""
        if self.database.url:
            return self.database.url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'vigil.db').resolve()}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def env_name(loc: tuple[int | str, ...]) -> str:
    """The environment variable behind a validation error's location, e.g. ``VIGIL_HTTP__PORT``."""
    return _variable(loc)[0]


def _variable(loc: tuple[int | str, ...]) -> tuple[str, str]:
    """The variable behind ``loc`` and where in its value the problem is: the variable is the first field that
    is not a section of settings (``VIGIL_PANEL__USERS``, a JSON list; ``[0].token_sha256`` inside it)."""
    model: type[BaseModel] | None = Settings
    names: list[str] = []
    for depth, part in enumerate(loc):
        if model is None or not isinstance(part, str) or part not in model.model_fields:
            inside = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[depth:])
            return ENV_PREFIX + ENV_NESTED_DELIMITER.join(names), inside.removeprefix(".")
        names.append(part.upper())
        annotation = model.model_fields[part].annotation
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return ENV_PREFIX + ENV_NESTED_DELIMITER.join(names), ""


def _json_kind(variable: str) -> str:
    """What a JSON-valued variable takes: "a JSON list" or "a JSON object"."""
    model: type[BaseModel] | None = Settings
    annotation: Any = None
    for part in variable.removeprefix(ENV_PREFIX).lower().split(ENV_NESTED_DELIMITER):
        if model is None or part not in model.model_fields:
            break
        annotation = model.model_fields[part].annotation
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        if item in (str, Path):
            return 'a JSON list, e.g. ["/srv/knowledge"]'
        return "a JSON list"
    return "a JSON object"


def _undecodable(source_name: str, field_name: str) -> tuple[str, str] | None:
    """The variable of section ``field_name`` whose value is not the JSON it must be, and why (after the settings
    source refused the section without saying which variable)."""
    source_type = DotEnvSettingsSource if source_name == "DotEnvSettingsSource" else EnvSettingsSource
    source = source_type(Settings)
    field = Settings.model_fields.get(field_name)
    if field is None:
        return None
    for name, value in source.env_vars.items():
        try:  # one variable at a time, decoded as the source does it
            source.explode_env_vars(field_name, field, {name: value})
        except ValueError as exc:
            return name.upper(), str(exc)
    whole = source.env_vars.get((ENV_PREFIX + field_name).lower())
    if whole is not None:
        try:
            json.loads(whole)
        except ValueError as exc:
            return (ENV_PREFIX + field_name).upper(), str(exc)
    return None


def load_settings(**overrides: object) -> Settings:
    """Build ``Settings`` from the environment, translating the first problem into one ``SettingsError``."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        rule = first.get("ctx", {}).get("error")
        if isinstance(rule, RuleBroken):  # a rule across settings names the variable to change
            raise SettingsError(rule.setting, rule.problem) from exc
        variable, inside = _variable(first["loc"])
        problem = first["msg"].removeprefix("Value error, ")
        raise SettingsError(variable, f"{inside}: {problem}" if inside else problem) from exc
    except SourceError as exc:  # a value that must be JSON (a list, or a section given whole) is not
        found = re.search(r'field "([^"]+)" from source "([^"]+)"', str(exc))
        culprit = _undecodable(found.group(2), found.group(1)) if found else None
        if culprit is None:
            raise SettingsError(ENV_PREFIX + "*", f"a value is not valid JSON ({exc})") from exc
        variable, reason = culprit
        if variable.count(ENV_NESTED_DELIMITER) == 0:  # a whole section: its parts are simpler
            section: Any = Settings.model_fields[variable.removeprefix(ENV_PREFIX).lower()].annotation
            example = f"{variable}{ENV_NESTED_DELIMITER}{next(iter(section.model_fields)).upper()}"
            hint = f"not a JSON object ({reason}); set its parts instead, e.g. {example}"
            raise SettingsError(variable, hint) from exc
        raise SettingsError(variable, f"not valid JSON ({reason}); it takes {_json_kind(variable)}") from exc
