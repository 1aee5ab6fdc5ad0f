"""The Kubernetes manifests (the Kafka deployment and the MQTT sidecar example) are valid, and agree with vigil's
settings and shutdown timing."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from pydantic import BaseModel

from vigil.app.settings import Settings

DEPLOY = Path(__file__).parent.parent / "deploy"
FOLDERS = ("kubernetes", "sidecar")
MANIFESTS = sorted(m for folder in FOLDERS for m in (DEPLOY / folder).glob("*.yaml"))
RESOURCES = [m for m in MANIFESTS if m.name != "kustomization.yaml"]


def load(name: str, folder: str = "kubernetes") -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((DEPLOY / folder / name).read_text())


@pytest.mark.parametrize("manifest", RESOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_manifests_are_valid_kubernetes(manifest: Path):
    for document in yaml.safe_load_all(manifest.read_text()):
        kubernetes_validate.validate(document, "1.30", strict=True)


@pytest.mark.parametrize("folder", FOLDERS)
def test_kustomization_lists_every_manifest(folder: str):
    listed = set(load("kustomization.yaml", folder)["resources"])
    assert listed == {m.name for m in RESOURCES if m.parent.name == folder}


def assert_real_setting(key: str) -> None:
    *parents, leaf = key.removeprefix("VIGIL_").lower().split("__")
    model: type[BaseModel] = Settings
    for part in parents:
        assert part in model.model_fields, f"{key} is not a vigil setting"
        model = model.model_fields[part].annotation  # type: ignore[assignment]
    assert leaf in model.model_fields, f"{key} is not a vigil setting"


def test_the_configmap_holds_only_real_settings(monkeypatch: pytest.MonkeyPatch):
    data = load("configmap.yaml")["data"]
    for key, value in data.items():
        monkeypatch.setenv(key, value)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.kafka.bootstrap_servers == data["VIGIL_KAFKA__BOOTSTRAP_SERVERS"]
    assert settings.http.host == "0.0.0.0" and not settings.kafka.create_topics
    for key in data:
        assert_real_setting(key)


def test_the_drain_finishes_before_kubernetes_kills_the_pod():
    graceful = float(load("configmap.yaml")["data"]["VIGIL_GRACEFUL_TIMEOUT_S"])
    grace_period = load("deployment.yaml")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert graceful + 5 <= grace_period


def sidecar_containers() -> dict[str, dict]:  # type: ignore[type-arg]
    pod = load("deployment.yaml", "sidecar")["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod["initContainers"] + pod["containers"]}


# Stand-ins for what the sidecar's Secrets hold, in the form each setting takes.
SECRET_EXAMPLES = {
    "VIGIL_DATABASE__URL": "postgresql+asyncpg://vigil:secret@postgres.db:5432/vigil",
    "VIGIL_PANEL__USERS": '[{"name": "ana", "role": "lead", "tenants": ["*"], "token_sha256": "' + "0" * 64 + '"}]',
    "VIGIL_PANEL__SESSION_SECRET": "not-a-real-secret",
    "VIGIL_APPROVALS__SECRET": "0" * 64,
}


def test_the_sidecar_vigil_env_holds_only_real_settings_and_reads_mqtt_alone(monkeypatch: pytest.MonkeyPatch):
    env = sidecar_containers()["vigil"]["env"]
    names = [e["name"] for e in env]
    assert all(n.startswith("VIGIL_") for n in names)
    for name in names:
        assert_real_setting(name)
    for var in env:
        monkeypatch.setenv(var["name"], var["value"] if "value" in var else SECRET_EXAMPLES[var["name"]])
    monkeypatch.delenv("VIGIL_KAFKA__BOOTSTRAP_SERVERS", raising=False)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.mqtt.host == "127.0.0.1" and settings.kafka.bootstrap_servers is None
    assert settings.panel.auth == "tokens" and settings.http.host == "0.0.0.0"
    secrets = {e["name"] for e in env if "valueFrom" in e}
    assert {"VIGIL_DATABASE__URL", "VIGIL_PANEL__USERS", "VIGIL_APPROVALS__SECRET"} <= secrets


def test_the_sidecar_broker_listens_where_vigil_connects_and_keeps_what_waits():
    settings = {e["name"]: e.get("value") for e in sidecar_containers()["vigil"]["env"]}
    conf = load("mosquitto-configmap.yaml", "sidecar")["data"]["mosquitto.conf"].splitlines()
    assert f"listener {settings['VIGIL_MQTT__PORT']} {settings['VIGIL_MQTT__HOST']}" in conf
    assert "persistence true" in conf
    queued = next(line for line in conf if line.startswith("max_queued_messages "))
    assert int(queued.split()[1]) >= 10_000  # Mosquitto's default of 1000 drops messages while vigil is away


def test_the_sidecar_drain_finishes_before_kubernetes_kills_the_pod():
    pod = load("deployment.yaml", "sidecar")["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in sidecar_containers()["vigil"]["env"]}
    assert float(env["VIGIL_GRACEFUL_TIMEOUT_S"]) + 5 <= pod["terminationGracePeriodSeconds"]
