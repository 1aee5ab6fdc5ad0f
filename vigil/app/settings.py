"""vigil's settings: one ``Settings`` built once by the CLI and passed down.

Every setting comes from the environment with the prefix ``VIGIL_`` (nested parts joined by ``__``, for example
``VIGIL_KAFKA__BOOTSTRAP_SERVERS``) or from a ``.env`` file, and has a sane default. Each section is declared by the
package it configures (``vigil/<package>/settings.py``); this module composes them, checks the rules across
sections, and says which variable is wrong.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, DotEnvSettingsSource, EnvSettingsSource, SettingsConfigDict
from pydantic_settings import SettingsError as SourceError

from vigil.actions.settings import ActionsSettings
from vigil.answers.settings import AnswerSettings
from vigil.core.errors import SettingsError
from vigil.core.settings import RuleBroken
from vigil.db.settings import DatabaseSettings
from vigil.dev.settings import DemoSettings
from vigil.flow.settings import IngestSettings
from vigil.knowledge.settings import KnowledgeSettings
from vigil.llm.settings import LlmSettings
from vigil.mining.settings import MinerSettings
from vigil.panel.settings import PanelSettings, is_loopback
from vigil.progress.settings import ProgressSettings
from vigil.transport.settings import KafkaSettings, MqttSettings
from vigil.wire.proof import ApprovalSettings

ENV_PREFIX = "VIGIL_"
ENV_NESTED_DELIMITER = "__"


class HttpSettings(BaseModel):
    """The daemon's one HTTP port: health, metrics, the API and the panel."""

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)


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
    miner: MinerSettings = MinerSettings()
    progress: ProgressSettings = ProgressSettings()
    actions: ActionsSettings = ActionsSettings()
    approvals: ApprovalSettings = ApprovalSettings()

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
        return self.database.url_in(self.data_dir)


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
