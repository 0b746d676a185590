"""The deployment files parse and wire the roles to the servers the settings expect."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from adapters.settings import Settings

pytestmark = pytest.mark.unit
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_kubernetes_manifests_parse_and_configure_the_production_profile():
    docs = [d for d in yaml.safe_load_all((DEPLOY / "k8s" / "upstream.yaml").read_text()) if d]
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    for server in ("nats", "postgres", "qdrant", "neo4j"):
        assert ("StatefulSet", server) in kinds
    assert ("Deployment", "upstream-api") in kinds and ("Deployment", "upstream-worker") in kinds
    env = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    settings = Settings(**{k: v for k, v in env.items()})  # type: ignore[arg-type]
    assert settings.profile == "production"


def test_compose_file_parses_and_runs_both_roles():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    commands = {name: svc.get("command") for name, svc in compose["services"].items()}
    assert commands["worker"] == ["upstream", "worker"]
    assert commands["api"][:2] == ["upstream", "api"]
