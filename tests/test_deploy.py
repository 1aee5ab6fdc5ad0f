"""The Kubernetes manifests are valid, and agree with vigil's settings and shutdown timing."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from pydantic import BaseModel

from vigil.settings import Settings

MANIFESTS = sorted((Path(__file__).parent.parent / "deploy" / "kubernetes").glob("*.yaml"))
RESOURCES = [m for m in MANIFESTS if m.name != "kustomization.yaml"]


def load(name: str) -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((Path(__file__).parent.parent / "deploy" / "kubernetes" / name).read_text())


@pytest.mark.parametrize("manifest", RESOURCES, ids=lambda p: p.name)
def test_manifests_are_valid_kubernetes(manifest: Path):
    for document in yaml.safe_load_all(manifest.read_text()):
        kubernetes_validate.validate(document, "1.30", strict=True)


def test_kustomization_lists_every_manifest():
    listed = set(load("kustomization.yaml")["resources"])
    assert listed == {m.name for m in RESOURCES}


def test_the_configmap_holds_only_real_settings(monkeypatch: pytest.MonkeyPatch):
    data = load("configmap.yaml")["data"]
    for key, value in data.items():
        monkeypatch.setenv(key, value)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.kafka.bootstrap_servers == data["VIGIL_KAFKA__BOOTSTRAP_SERVERS"]
    assert settings.http.host == "0.0.0.0" and not settings.kafka.create_topics
    for key in data:
        *parents, leaf = key.removeprefix("VIGIL_").lower().split("__")
        model: type[BaseModel] = Settings
        for part in parents:
            model = model.model_fields[part].annotation  # type: ignore[assignment]
        assert leaf in model.model_fields, f"{key} is not a vigil setting"


def test_the_drain_finishes_before_kubernetes_kills_the_pod():
    graceful = float(load("configmap.yaml")["data"]["VIGIL_GRACEFUL_TIMEOUT_S"])
    grace_period = load("deployment.yaml")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert graceful + 5 <= grace_period
