"""The Kubernetes manifests: a kustomize base and three overlays (production, the one-pod demo, the MQTT sidecar),
each built with `kubectl kustomize` as `kubectl apply -k` would, valid against the Kubernetes schemas, and in
agreement with vigil's settings, its shutdown timing, its metrics and its consumer group."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from pydantic import BaseModel

from vigil.app.settings import Settings
from vigil.transport.settings import KafkaSettings

KUBERNETES = Path(__file__).parent.parent / "deploy" / "kubernetes"
OVERLAYS = ("production", "demo", "sidecar")
FOLDERS = [KUBERNETES / "base", *(KUBERNETES / "overlays" / o for o in OVERLAYS)]
CUSTOM = {"ScaledObject", "ServiceMonitor", "PrometheusRule"}
"""The kinds of the operators production relies on (KEDA, the Prometheus Operator): no Kubernetes schema knows them,
so the tests below check what vigil depends on in each."""


@cache
def built(overlay: str) -> tuple[dict[str, Any], ...]:
    """The documents ``kubectl kustomize`` builds from an overlay (or ``base``)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is missing (it builds the kustomizations; .ci/run installs it)")
    folder = KUBERNETES / ("base" if overlay == "base" else f"overlays/{overlay}")
    out = subprocess.run([kubectl, "kustomize", str(folder)], check=True, capture_output=True, text=True).stdout
    return tuple(d for d in yaml.safe_load_all(out) if d)


def one(overlay: str, kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in built(overlay) if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def container(
    overlay: str, name: str = "vigil", workload: tuple[str, str] = ("StatefulSet", "vigil")
) -> dict[str, Any]:
    pod = one(overlay, *workload)["spec"]["template"]["spec"]
    (found,) = [c for c in pod.get("initContainers", []) + pod["containers"] if c["name"] == name]
    return found


@pytest.mark.parametrize("overlay", ["base", *OVERLAYS])
def test_each_overlay_builds_into_valid_kubernetes(overlay: str):
    kinds = set()
    for document in built(overlay):
        kinds.add(document["kind"])
        if document["kind"] not in CUSTOM:
            kubernetes_validate.validate(document, "1.30", strict=True)
    assert ("StatefulSet" in kinds) != (overlay == "sidecar")
    assert (kinds >= CUSTOM) == (overlay == "production")


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_every_manifest_in_a_folder_is_used_by_its_kustomization(folder: Path):
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    used = set(kustomization.get("resources", [])) | {
        p["path"] for p in kustomization.get("patches", []) if "path" in p
    }
    assert {m.name for m in folder.glob("*.yaml") if m.name != "kustomization.yaml"} == {
        u for u in used if not u.startswith("..")
    }


def assert_real_setting(key: str) -> None:
    *parents, leaf = key.removeprefix("VIGIL_").lower().split("__")
    model: type[BaseModel] = Settings
    for part in parents:
        assert part in model.model_fields, f"{key} is not a vigil setting"
        model = model.model_fields[part].annotation  # type: ignore[assignment]
    assert leaf in model.model_fields, f"{key} is not a vigil setting"


def settings_of(data: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for key in [k for k in os.environ if k.startswith("VIGIL_")]:
        monkeypatch.delenv(key)
    for key, value in data.items():
        assert_real_setting(key)
        monkeypatch.setenv(key, value)
    return Settings(_env_file=None)  # type: ignore[call-arg]


def test_production_reads_kafka_and_a_chroma_server_with_only_real_settings(monkeypatch: pytest.MonkeyPatch):
    data = one("production", "ConfigMap", "vigil")["data"]
    settings = settings_of(data, monkeypatch)
    assert settings.kafka.bootstrap_servers == data["VIGIL_KAFKA__BOOTSTRAP_SERVERS"]
    assert settings.http.host == "0.0.0.0" and not settings.kafka.create_topics
    chroma = one("production", "Service", "chroma")["spec"]["ports"][0]["port"]
    assert settings.knowledge.chroma_url == f"http://chroma.vigil:{chroma}"
    assert {"vigil-database", "vigil-panel"} <= {
        e["secretRef"]["name"] for e in container("production")["envFrom"] if "secretRef" in e
    }


def test_each_replica_is_a_static_member_under_its_pod_name_with_a_session_a_restart_fits_in(
    monkeypatch: pytest.MonkeyPatch,
):
    env = {e["name"]: e for e in container("production")["env"]}
    assert env["VIGIL_KAFKA__GROUP_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    settings = settings_of(one("production", "ConfigMap", "vigil")["data"], monkeypatch)
    startup = container("production")["startupProbe"]
    assert settings.kafka.session_timeout_s >= 30 > startup["periodSeconds"] * 2  # a restart, not a slow start
    assert one("production", "StatefulSet", "vigil")["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == 1


def test_the_drain_finishes_before_kubernetes_kills_the_pod():
    graceful = float(one("production", "ConfigMap", "vigil")["data"]["VIGIL_GRACEFUL_TIMEOUT_S"])
    grace_period = one("production", "StatefulSet", "vigil")["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"
    ]
    assert graceful + 5 <= grace_period


def test_the_autoscaler_follows_the_groups_lag_and_stops_at_one_replica_a_partition(monkeypatch: pytest.MonkeyPatch):
    scaled = one("production", "ScaledObject", "vigil")["spec"]
    data = one("production", "ConfigMap", "vigil")["data"]
    assert scaled["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "vigil"}
    (trigger,) = scaled["triggers"]
    assert trigger["type"] == "kafka"
    assert trigger["metadata"]["bootstrapServers"] == data["VIGIL_KAFKA__BOOTSTRAP_SERVERS"]
    assert trigger["metadata"]["consumerGroup"] == data["VIGIL_KAFKA__GROUP_ID"]
    assert trigger["metadata"]["topic"] == data["VIGIL_KAFKA__INPUT_TOPIC"]
    assert int(trigger["metadata"]["lagThreshold"]) > 0 and trigger["metadata"]["allowIdleConsumers"] == "false"
    assert 1 <= scaled["minReplicaCount"] < scaled["maxReplicaCount"] == KafkaSettings().partitions


def test_prometheus_scrapes_each_replica_once_through_the_pods_service():
    monitor = one("production", "ServiceMonitor", "vigil")["spec"]
    wanted = monitor["selector"]["matchLabels"]
    services = [s for s in built("production") if s["kind"] == "Service"]
    chosen = [s for s in services if wanted.items() <= s["metadata"].get("labels", {}).items()]
    assert [s["metadata"]["name"] for s in chosen] == ["vigil-pods"]
    assert chosen[0]["spec"]["clusterIP"] == "None"  # every pod an endpoint of its own
    assert monitor["endpoints"][0]["port"] in {p["name"] for p in chosen[0]["spec"]["ports"]}


VIGIL = Path(__file__).parent.parent / "vigil"


@cache
def metric_names() -> set[str]:
    """Every metric vigil declares (a ``"vigil_..."`` name in its code), with the suffixes Prometheus gives them."""
    names = {m for path in VIGIL.rglob("*.py") for m in re.findall(r'"(vigil_[a-z_]+)"', path.read_text())}
    return names | {f"{n}_{suffix}" for n in names for suffix in ("total", "bucket", "sum", "count")}


def test_the_alerts_are_valid_prometheus_rules_on_metrics_vigil_exports(tmp_path: Path):
    groups = one("production", "PrometheusRule", "vigil")["spec"]["groups"]
    alerts = {r["alert"]: r["expr"] for g in groups for r in g["rules"]}
    assert {
        "VigilConsumerLagGrowing",
        "VigilDeadLetters",
        "VigilSlaBreaches",
        "VigilActionsInDoubt",
        "VigilMinerStale",
    } <= alerts.keys()
    for alert, expr in alerts.items():
        used = set(re.findall(r"\bvigil_[a-z_]+", expr))
        assert used and used <= metric_names(), f"{alert} reads a metric vigil does not export: {used}"
    promtool = shutil.which("promtool") or str(Path(__file__).parent.parent / ".tools" / "bin" / "promtool")
    if not Path(promtool).exists():
        pytest.fail("promtool is missing (make test installs it into .tools/bin)")
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": groups}))
    checked = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_demo_is_one_pod_of_vigil_demo_with_nothing_outside_it_but_its_users(monkeypatch: pytest.MonkeyPatch):
    workload = one("demo", "StatefulSet", "vigil")
    pod = workload["spec"]["template"]["spec"]
    assert workload["spec"]["replicas"] == 1 and "initContainers" not in pod
    vigil = container("demo")
    assert vigil["args"] == ["demo"]
    assert [e["secretRef"]["name"] for e in vigil["envFrom"] if "secretRef" in e] == ["vigil-panel"]
    assert "VIGIL_DATABASE__MIGRATE_ON_START" not in {e["name"] for e in vigil["env"]}
    users = {"VIGIL_PANEL__USERS": SECRET_EXAMPLES["VIGIL_PANEL__USERS"]}  # from the Secret vigil-panel
    settings = settings_of(one("demo", "ConfigMap", "vigil")["data"] | users, monkeypatch)
    assert settings.kafka.bootstrap_servers is None and settings.panel.auth == "tokens"
    assert not [d for d in built("demo") if d["kind"] == "PodDisruptionBudget"]


SIDECAR = ("Deployment", "chat-platform")

# Stand-ins for what the sidecar's Secrets hold, in the form each setting takes.
SECRET_EXAMPLES = {
    "VIGIL_DATABASE__URL": "postgresql+asyncpg://vigil:secret@postgres.db:5432/vigil",
    "VIGIL_PANEL__USERS": '[{"name": "ana", "role": "lead", "tenants": ["*"], "token_sha256": "' + "0" * 64 + '"}]',
    "VIGIL_PANEL__SESSION_SECRET": "not-a-real-secret",
    "VIGIL_APPROVALS__SECRET": "0" * 64,
}


def test_the_sidecar_vigil_env_holds_only_real_settings_and_reads_mqtt_alone(monkeypatch: pytest.MonkeyPatch):
    env = container("sidecar", workload=SIDECAR)["env"]
    names = [e["name"] for e in env]
    assert all(n.startswith("VIGIL_") for n in names)
    settings = settings_of(
        {var["name"]: var["value"] if "value" in var else SECRET_EXAMPLES[var["name"]] for var in env}, monkeypatch
    )
    assert settings.mqtt.host == "127.0.0.1" and settings.kafka.bootstrap_servers is None
    assert settings.panel.auth == "tokens" and settings.http.host == "0.0.0.0"
    secrets = {e["name"] for e in env if "valueFrom" in e}
    assert {"VIGIL_DATABASE__URL", "VIGIL_PANEL__USERS", "VIGIL_APPROVALS__SECRET"} <= secrets


def test_the_sidecar_broker_listens_where_vigil_connects_and_keeps_what_waits():
    settings = {e["name"]: e.get("value") for e in container("sidecar", workload=SIDECAR)["env"]}
    conf = one("sidecar", "ConfigMap", "chat-platform-mosquitto")["data"]["mosquitto.conf"].splitlines()
    assert f"listener {settings['VIGIL_MQTT__PORT']} {settings['VIGIL_MQTT__HOST']}" in conf
    assert "persistence true" in conf
    queued = next(line for line in conf if line.startswith("max_queued_messages "))
    assert int(queued.split()[1]) >= 10_000  # Mosquitto's default of 1000 drops messages while vigil is away


def test_the_sidecar_drain_finishes_before_kubernetes_kills_the_pod():
    pod = one("sidecar", *SIDECAR)["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in container("sidecar", workload=SIDECAR)["env"]}
    assert float(env["VIGIL_GRACEFUL_TIMEOUT_S"]) + 5 <= pod["terminationGracePeriodSeconds"]
