"""The kustomize base (deploy/kubernetes) and the example overlay over it
(deploy/kubernetes-example: namespace, images, an Ingress), rendered by `kubectl kustomize`
and every rendered document checked as the base's files are (the Kubernetes schemas, the
Prometheus Operator kinds apart), with the Ingress checked against the collector's API."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from deploy_kit import DEPLOY, KUBERNETES_VERSION, OPERATOR_API, all_kubernetes_documents

from ldptel.collector.settings import CollectorConfig

EXAMPLE = DEPLOY / "kubernetes-example"
OPENAPI = DEPLOY.parent / "collector" / "openapi.yaml"


def rendered(folder: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize folder`'s documents."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (with its built-in kustomize) is not installed")
    result = subprocess.run([kubectl, "kustomize", str(folder)], capture_output=True,
                            text=True, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def key(doc: dict[str, Any]) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


def test_the_base_renders_its_files_with_the_common_label() -> None:
    files = {key(doc): doc for doc in all_kubernetes_documents()}
    output = {key(doc): doc for doc in rendered(DEPLOY / "kubernetes")}
    assert output.keys() == files.keys()
    for doc in output.values():
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "ldptel"


def test_the_example_overlay_renders_and_every_document_follows_its_schema() -> None:
    docs = rendered(EXAMPLE)
    base = {key(doc) for doc in all_kubernetes_documents()}
    assert {key(doc) for doc in docs} == base | {("Ingress", "ldptel-collector")}
    for doc in docs:
        assert doc["metadata"]["namespace"] == "ldptel", key(doc)
        if doc["apiVersion"] == OPERATOR_API:
            assert doc["kind"] in {"ServiceMonitor", "PrometheusRule"}
        else:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_ingress_schema_check_can_fail() -> None:
    [ingress] = yaml.safe_load_all((EXAMPLE / "ingress.yaml").read_text())
    ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["prot"] = 80
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ingress, KUBERNETES_VERSION, strict=True)


def test_the_ingress_publishes_the_api_and_nothing_else_to_the_collector_service() -> None:
    [ingress] = yaml.safe_load_all((EXAMPLE / "ingress.yaml").read_text())
    services = {doc["metadata"]["name"]: doc for doc in all_kubernetes_documents()
                if doc["kind"] == "Service"}  # fmt: skip
    api = list(yaml.safe_load(OPENAPI.read_text())["paths"])
    [rule] = ingress["spec"]["rules"]
    assert rule["host"] in ingress["spec"]["tls"][0]["hosts"]
    prefixes = []
    for path in rule["http"]["paths"]:
        backend = path["backend"]["service"]
        ports = {p["name"] for p in services[backend["name"]]["spec"]["ports"]}
        assert backend["name"] == "ldptel-collector" and backend["port"]["name"] in ports
        assert path["pathType"] == "Prefix"
        prefixes.append(path["path"])
    published = {p for p in api if any(p.startswith(prefix) for prefix in prefixes)}
    assert published == {p for p in api if p.startswith("/v1/")}  # not /metrics nor probes
    # The proxy lets through every body the collector accepts (4m: 4 MiB, ingress-nginx units).
    size = ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-body-size"]
    assert int(size.rstrip("m")) * 2**20 >= CollectorConfig().max_body_bytes


def test_the_overlay_sets_images_the_base_uses() -> None:
    overlay = yaml.safe_load((EXAMPLE / "kustomization.yaml").read_text())
    assert overlay["resources"][0] == "../kubernetes"
    used = {c["image"].rsplit(":", 1)[0] for doc in all_kubernetes_documents()
            for c in _containers(doc)}  # fmt: skip
    assert {image["name"] for image in overlay["images"]} == used


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc.get("spec", {})
    if doc["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    containers: list[dict[str, Any]] = (
        spec.get("template", {}).get("spec", {}).get("containers", [])
    )
    return containers
