"""The files of deploy/, loaded, and what every check of them needs: the commands they run
(as `ldptel` argument lists), the environment variables they set, and the variables that
docs/operations.md documents."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
KUSTOMIZATION = DEPLOY / "kubernetes" / "kustomization.yaml"
KUBERNETES = sorted(p for p in (DEPLOY / "kubernetes").glob("*.yaml") if p != KUSTOMIZATION)
#: The Kubernetes release whose schemas the manifests must satisfy.
KUBERNETES_VERSION = "1.37.0"
#: Kinds of the Prometheus Operator's CRDs: not in the Kubernetes schemas (checked apart).
OPERATOR_API = "monitoring.coreos.com/v1"
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
TIMERS = sorted((DEPLOY / "systemd").glob("*.timer"))
OPERATIONS = ROOT / "docs" / "operations.md"


def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


def all_kubernetes_documents() -> list[dict[str, Any]]:
    return [doc for path in KUBERNETES for doc in yaml.safe_load_all(path.read_text()) if doc]


def kubernetes_documents() -> list[dict[str, Any]]:
    """The manifests of Kubernetes' own kinds (their schemas are Kubernetes')."""
    return [doc for doc in all_kubernetes_documents() if doc["apiVersion"] != OPERATOR_API]


def operator_documents() -> list[dict[str, Any]]:
    """The Prometheus Operator's resources (ServiceMonitor, PrometheusRule)."""
    return [doc for doc in all_kubernetes_documents() if doc["apiVersion"] == OPERATOR_API]


def pod_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    """(kind/name, pod spec) of every workload manifest."""
    for doc in kubernetes_documents():
        spec = doc.get("spec", {})
        if doc["kind"] == "CronJob":
            spec = spec["jobTemplate"]["spec"]
        if "template" in spec:
            yield f"{doc['kind']}/{doc['metadata']['name']}", spec["template"]["spec"]


def unit_settings(path: Path) -> dict[str, list[str]]:
    """A systemd unit's `Key=value` lines (a key may repeat)."""
    settings: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def ldptel_commands() -> dict[str, list[str]]:
    """Where -> the arguments after `ldptel`, for every ldptel command in deploy/."""
    found: dict[str, list[str]] = {}
    for name, service in compose()["services"].items():
        if "entrypoint" not in service and "redis" not in service["image"]:
            found[f"compose:{name}"] = list(service["command"])
    [loop] = compose()["services"]["report"]["command"]
    found["compose:report"] = shell_ldptel_args(loop.replace("$$", "$"))
    for where, pod in pod_specs():
        for container in pod["containers"]:
            if "ldptel" in container["image"]:
                found[f"k8s:{where}"] = list(container["args"])
    for path in UNITS:
        for number, exec_start in enumerate(unit_settings(path)["ExecStart"]):
            found[f"systemd:{path.name}:{number + 1}"] = shlex.split(exec_start)[1:]
    for number, line in enumerate((DEPLOY / "aggregator.cron").read_text().splitlines()):
        if "$LDPTEL " in line and not line.startswith("#"):
            # A command substitution stands for one value.
            command = re.sub(r"\$\([^)]*\)", "VALUE", line.split("$LDPTEL ", 1)[1])
            found[f"cron:{number + 1}"] = shlex.split(command)
    return found


def shell_ldptel_args(script: str) -> list[str]:
    """The arguments of the `ldptel` call in a shell loop."""
    words = shlex.split(script.split("||")[0].split("do", 1)[1])
    return words[words.index("ldptel") + 1 :]


def documented_variables() -> set[str]:
    """The variables of the one configuration table of docs/operations.md."""
    return set(re.findall(r"^\| `([A-Z_]+)` \|", OPERATIONS.read_text(), re.MULTILINE))


def deploy_variables() -> dict[str, str]:
    """Variable -> where, for every LDPTEL_* / GUNICORN_* variable deploy/ sets."""
    found: dict[str, str] = {}
    for name, service in compose()["services"].items():
        for variable in service.get("environment", {}):
            found[variable] = f"compose:{name}"
    for where, pod in pod_specs():
        for container in pod["containers"]:
            for item in container.get("env", []):
                found[item["name"]] = f"k8s:{where}"
    for path in UNITS:
        for assignment in unit_settings(path).get("Environment", []):
            found[assignment.partition("=")[0]] = f"systemd:{path.name}"
    for path in (DEPLOY / "Dockerfile", DEPLOY / "aggregator.cron"):
        for variable in re.findall(r"\b((?:LDPTEL|GUNICORN)_[A-Z_]+)=", path.read_text()):
            found[variable] = path.name
    return {v: w for v, w in found.items() if v.startswith(("LDPTEL_", "GUNICORN_"))}
