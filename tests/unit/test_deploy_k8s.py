"""deploy/k8s/, validated offline against the Kubernetes schemas `kubernetes-validate`
ships (strict: an unknown field fails), then read as a reviewer would: probes, secrets,
selectors that select, a grace period that outlasts the streams' shutdown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from notifyhub.settings import Settings
from support.project import pyproject_version

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
VERSIONS = ("1.29.0", kubernetes_validate.latest_version())
"""The oldest Kubernetes the manifests are meant for and the newest the package has
schemas for (its schemas are package files: no network)."""
CRDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
"""Kinds kubernetes-validate has no schema for (it ships Kubernetes' own schemas only, no
CRDs): checked field by field in `test_the_service_monitor_scrapes_the_hub`."""
SECRETS = {"NOTIFYHUB_JWT_SECRET", "NOTIFYHUB_REDIS_URL", "NOTIFYHUB_DATABASE_URL"}


def manifests() -> dict[str, list[dict[str, Any]]]:
    return {
        path.name: [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
        for path in sorted(K8S.glob("*.yaml"))
        if path.name != "kustomization.yaml"
    }


def resources() -> list[dict[str, Any]]:
    return [doc for docs in manifests().values() for doc in docs]


def one(kind: str) -> dict[str, Any]:
    [found] = [r for r in resources() if r["kind"] == kind]
    return found


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_matches_the_kubernetes_schemas(version: str) -> None:
    checked = []
    for doc in resources():
        if (doc["apiVersion"], doc["kind"]) in CRDS:
            continue
        kubernetes_validate.validate(doc, version, strict=True)
        checked.append(doc["kind"])
    assert sorted(checked) == [
        "ConfigMap",
        "Deployment",
        "Job",
        "PodDisruptionBudget",
        "Secret",
        "Service",
    ]


def test_the_validation_is_strict() -> None:
    """A misspelt field fails: the check above is not vacuous."""
    deployment = one("Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError, match="readinesProbe"):
        kubernetes_validate.validate(deployment, VERSIONS[-1], strict=True)


def test_kustomize_applies_every_manifest_but_the_example_secret_and_the_job() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert listed == set(manifests()) - {"secret.example.yaml", "migrate-job.yaml"}
    assert [image["newTag"] for image in kustomization["images"]] == [pyproject_version()]


def hub_container() -> dict[str, Any]:
    [container] = one("Deployment")["spec"]["template"]["spec"]["containers"]
    return container


def test_the_hub_is_probed_on_readyz_and_healthz() -> None:
    container = hub_container()
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert container["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert container["command"][:2] == ["notifyhub", "serve"]
    assert {"requests", "limits"} <= set(container["resources"])


def test_secrets_come_from_the_secret_and_settings_from_the_config_map() -> None:
    container = hub_container()
    from_secret = {
        e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e
    }
    assert set(from_secret) == SECRETS
    assert all(ref == {"name": "notifyhub-secrets", "key": k} for k, ref in from_secret.items())
    assert set(one("Secret")["stringData"]) == SECRETS
    assert container["envFrom"] == [
        {"configMapRef": {"name": one("ConfigMap")["metadata"]["name"]}}
    ]
    assert not SECRETS & set(one("ConfigMap")["data"])


def test_every_config_map_key_is_a_setting() -> None:
    for key in one("ConfigMap")["data"]:
        assert key.startswith("NOTIFYHUB_"), key
        model: Any = Settings
        for part in key.removeprefix("NOTIFYHUB_").lower().split("__"):
            assert part in model.model_fields, key
            model = model.model_fields[part].annotation


def test_pods_run_unprivileged_on_a_read_only_root() -> None:
    for kind in ("Deployment", "Job"):
        pod = one(kind)["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        assert pod["automountServiceAccountToken"] is False
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["readOnlyRootFilesystem"] is True
            assert context["capabilities"]["drop"] == ["ALL"]
            assert container["image"] == f"notifyhub:{pyproject_version()}"


def test_termination_outlasts_the_streams_shutdown_grace() -> None:
    pod = one("Deployment")["spec"]["template"]["spec"]
    pause_s = float(hub_container()["lifecycle"]["preStop"]["exec"]["command"][-1])
    grace_s = float(one("ConfigMap")["data"]["NOTIFYHUB_STREAM__SHUTDOWN_GRACE_S"])
    uvicorn_s = int(grace_s) + 1  # timeout_graceful_shutdown (process/supervisor.py)
    assert pod["terminationGracePeriodSeconds"] > pause_s + grace_s + uvicorn_s


def test_the_migration_job_runs_notifyhub_migrate() -> None:
    job = one("Job")["spec"]
    [container] = job["template"]["spec"]["containers"]
    assert container["command"] == ["notifyhub", "migrate"]
    assert job["template"]["spec"]["restartPolicy"] in {"Never", "OnFailure"}
    assert job["backoffLimit"] >= 1
    names = {e["name"] for e in container["env"]}
    assert names == {"NOTIFYHUB_DATABASE_URL"}


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def test_the_service_and_the_budget_select_the_hub_pods() -> None:
    deployment, service, pdb = one("Deployment"), one("Service"), one("PodDisruptionBudget")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selects(deployment["spec"]["selector"]["matchLabels"], pod_labels)
    assert selects(service["spec"]["selector"], pod_labels)
    assert selects(pdb["spec"]["selector"]["matchLabels"], pod_labels)
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    assert deployment["spec"]["replicas"] > pdb["spec"]["maxUnavailable"]


def test_the_service_monitor_scrapes_the_hub() -> None:
    monitor, service = one("ServiceMonitor"), one("Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(monitor) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(monitor["spec"]) == {"selector", "endpoints"}
    assert selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    ports = {port["name"] for port in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout"}
        assert endpoint["port"] in ports and endpoint["path"] == "/metrics"
        assert endpoint["interval"].endswith("s") and endpoint["scrapeTimeout"].endswith("s")
