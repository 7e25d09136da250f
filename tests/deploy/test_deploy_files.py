"""deploy/ checked without a container engine: the Dockerfile's stages, compose.yaml against
the compose specification's schema, the manifests against the Kubernetes schemas, the systemd
units with systemd-analyze, and every command, variable, port and probe path against the real
CLI and services."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from deploy_kit import (
    DEPLOY,
    KUBERNETES,
    KUBERNETES_VERSION,
    KUSTOMIZATION,
    ROOT,
    TIMERS,
    UNITS,
    compose,
    deploy_variables,
    documented_variables,
    kubernetes_documents,
    ldptel_commands,
    operator_documents,
    pod_specs,
    unit_settings,
)
from dockerfile_parse import DockerfileParser

from ldptel.cli.main import build_parser


# -- Dockerfile --------------------------------------------------------------------------------
def dockerfile_stages() -> dict[str, list[dict[str, Any]]]:
    """Stage name -> its instructions."""
    parser = DockerfileParser(path=str(DEPLOY / "Dockerfile"))
    stages: dict[str, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] = []
    for instruction in parser.structure:
        if instruction["instruction"] == "FROM":
            current = stages.setdefault(instruction["value"].split()[-1], [])
        current.append(instruction)
    return stages


def values(stage: list[dict[str, Any]], instruction: str) -> list[str]:
    return [i["value"] for i in stage if i["instruction"] == instruction]


def test_each_service_image_is_slim_non_root_and_installs_exactly_its_extra() -> None:
    stages = dockerfile_stages()
    assert list(stages) == ["wheels", "base", "collector", "aggregator"]
    assert values(stages["base"], "FROM")[0].startswith("python:${PYTHON_VERSION}-slim")
    for service in ("collector", "aggregator"):
        assert values(stages[service], "FROM") == ["base AS " + service]
        [install] = values(stages[service], "RUN")
        assert "from=wheels" in install and "--no-index" in install  # no compiler, no network
        assert f'"ldptel[{service}]"' in install and install.count("ldptel[") == 1
        [user] = values(stages[service], "USER")
        assert user.split(":")[0] not in ("0", "root")


def test_the_images_copy_every_part_the_wheel_needs() -> None:
    import tomllib

    copied = {v.split()[0] for v in values(dockerfile_stages()["wheels"], "COPY")}
    copied |= set(values(dockerfile_stages()["wheels"], "COPY")[0].split()[:-1])
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    parts = {name.split(".")[1] for name in packages["packages"] if name.count(".") == 1}
    assert parts | {"ldptel", "pyproject.toml", "README.md", "LICENSE"} <= copied


def test_the_images_default_commands_and_ports_match_the_cli() -> None:
    stages = dockerfile_stages()
    parser = build_parser()
    for service, port_variable in (("collector", "LDPTEL_PORT"),
                                   ("aggregator", "LDPTEL_AGGREGATOR_HEALTH_PORT")):  # fmt: skip
        [cmd] = values(stages[service], "CMD")
        parser.parse_args(json.loads(cmd))
        [env] = values(stages[service], "ENV")
        port = shlex.split(env.replace("\\\n", " "))
        assert f"{port_variable}={values(stages[service], 'EXPOSE')[0]}" in port


# -- compose -----------------------------------------------------------------------------------
def test_compose_follows_the_compose_specification() -> None:
    text = resources.files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json")
    schema = json.loads(text.read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    assert [e.message for e in validator.iter_errors(compose())] == []
    # The check can fail: a misspelt key is an error.
    broken = compose()
    broken["services"]["collector"]["healthcheck"]["intervall"] = "5s"
    assert list(validator.iter_errors(broken))


def test_compose_redis_keeps_every_write_and_never_evicts() -> None:
    command = compose()["services"]["redis"]["command"]
    settings = dict(zip(command[1::2], command[2::2], strict=False))
    assert settings["--appendonly"] == "yes"
    assert settings["--maxmemory-policy"] == "noeviction"


def test_compose_services_have_healthchecks_and_secrets_from_files() -> None:
    services = compose()["services"]
    for name in ("redis", "collector", "aggregator"):
        assert services[name]["healthcheck"]["test"][0] == "CMD"
    for name, secret in compose()["secrets"].items():
        assert secret["file"].startswith("./secrets/"), name
    environment = services["collector"]["environment"]
    assert environment["LDPTEL_ADMIN_TOKEN_FILE"] == "/run/secrets/admin_token"
    assert not any("TOKEN" in v and not v.endswith("_FILE") for v in environment)


# -- Kubernetes --------------------------------------------------------------------------------
@pytest.mark.parametrize("document", kubernetes_documents(), ids=lambda d: d["kind"])
def test_manifests_follow_the_kubernetes_schemas(document: dict[str, Any]) -> None:
    kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_the_schema_check_can_fail() -> None:
    [deployment, *_] = kubernetes_documents()
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["pth"] = "/"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_kubernetes_has_every_piece_the_issue_lists() -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for d in kubernetes_documents()}
    assert {
        ("Deployment", "ldptel-collector"), ("Service", "ldptel-collector"),
        ("HorizontalPodAutoscaler", "ldptel-collector"),
        ("PodDisruptionBudget", "ldptel-collector"), ("Deployment", "ldptel-aggregator"),
        ("CronJob", "ldptel-report"), ("Secret", "ldptel-tokens"),
    } <= kinds  # fmt: skip


def test_the_kustomize_base_lists_every_manifest() -> None:
    base = yaml.safe_load(KUSTOMIZATION.read_text())
    assert base["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    assert base["kind"] == "Kustomization"
    assert sorted(base["resources"]) == sorted(path.name for path in KUBERNETES)


#: The ServiceMonitor fields used, as the Prometheus Operator's API reference states them
#: (monitoring.coreos.com/v1): no other field may appear (a typo is not silently ignored).
SERVICE_MONITOR_SPEC = {"selector": dict, "endpoints": list}
ENDPOINT = {"port": str, "path": str, "interval": str}


def test_each_service_monitor_scrapes_a_services_named_port_at_metrics() -> None:
    monitors = [d for d in operator_documents() if d["kind"] == "ServiceMonitor"]
    assert {m["metadata"]["name"] for m in monitors} == {"ldptel-collector", "ldptel-aggregator"}
    services = [d for d in kubernetes_documents() if d["kind"] == "Service"]
    pods = {where.split("/")[1]: pod for where, pod in pod_specs()}  # by workload name
    for monitor in monitors:
        spec = monitor["spec"]
        assert {k: type(v) for k, v in spec.items()} == SERVICE_MONITOR_SPEC
        [service] = [s for s in services if s["metadata"]["labels"].items()
                     >= spec["selector"]["matchLabels"].items()]  # fmt: skip
        ports = {p["name"]: p for p in service["spec"]["ports"]}
        for endpoint in spec["endpoints"]:
            assert {k: type(v) for k, v in endpoint.items()} == ENDPOINT
            assert endpoint["path"] == "/metrics" and re.fullmatch(r"\d+s", endpoint["interval"])
            target = ports[endpoint["port"]]["targetPort"]
            pod = pods[service["spec"]["selector"]["app.kubernetes.io/name"]]
            named = {p["name"] for c in pod["containers"] for p in c.get("ports", [])}
            assert target in named, monitor["metadata"]["name"]


def test_kubernetes_probes_ports_and_secrets_are_consistent() -> None:
    secrets = {d["metadata"]["name"]: d["stringData"] for d in kubernetes_documents()
               if d["kind"] == "Secret"}  # fmt: skip
    for where, pod in pod_specs():
        mounts = {v["name"]: v["secret"]["secretName"] for v in pod.get("volumes", [])
                  if "secret" in v}  # fmt: skip
        assert pod["securityContext"]["runAsNonRoot"] is True, where
        for container in pod["containers"]:
            env = {e["name"]: e for e in container.get("env", [])}
            ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
            for probe in ("readinessProbe", "livenessProbe"):
                if probe in container:
                    port = ports[container[probe]["httpGet"]["port"]]
                    variable = "LDPTEL_PORT" if "LDPTEL_PORT" in env else (
                        "LDPTEL_AGGREGATOR_HEALTH_PORT")  # fmt: skip
                    assert env[variable]["value"] == str(port), where
            for item in env.values():
                ref = item.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in secrets[ref["name"]], where
                if item["name"].endswith("_FILE"):
                    [mount] = [m for m in container["volumeMounts"]
                               if item["value"].startswith(m["mountPath"] + "/")]  # fmt: skip
                    key = item["value"].rsplit("/", 1)[1]
                    assert key in secrets[mounts[mount["name"]]], where


# -- systemd -----------------------------------------------------------------------------------
def installed_units(folder: Path) -> Path:
    """deploy/systemd copied into `folder`, ExecStart pointing at this venv's ldptel, and
    each template unit also as an instance for the campaign `colors`."""
    ldptel = Path(shutil.which("ldptel") or ROOT / ".venv" / "bin" / "ldptel")
    for unit in [*UNITS, *TIMERS]:
        text = unit.read_text().replace("/opt/ldptel/.venv/bin/ldptel", str(ldptel))
        (folder / unit.name).write_text(text)
        if "@." in unit.name:
            (folder / unit.name.replace("@.", "@colors.")).write_text(text)
    return folder


@pytest.mark.parametrize("unit", [*UNITS, *TIMERS], ids=lambda p: p.name)
def test_systemd_units_verify(unit: Path, tmp_path: Path) -> None:
    """`systemd-analyze verify` on the unit (a template also as its instance `colors`, a timer
    beside its service) with ExecStart pointing at this venv's ldptel (it checks that the
    program exists); any warning (an unknown key) fails."""
    folder = installed_units(tmp_path)
    names = {unit.name, unit.name.replace("@.", "@colors.")}
    result = subprocess.run(["systemd-analyze", "verify", *(str(folder / n) for n in names)],
                            capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert (result.returncode, result.stderr) == (0, "")
    if unit.suffix == ".service":
        assert unit_settings(unit)["KillSignal"] == ["SIGTERM"]
    else:  # a timer starts the service of its own name
        assert (DEPLOY / "systemd" / unit.name.replace(".timer", ".service")).exists()


# -- against the real CLI and apps -------------------------------------------------------------
@pytest.mark.parametrize(("where", "args"), sorted(ldptel_commands().items()))
def test_every_command_parses_with_the_real_cli(where: str, args: list[str]) -> None:
    build_parser().parse_args([a.replace("$(POD_NAME)", "pod-0") for a in args])


def test_every_variable_deploy_sets_is_documented() -> None:
    variables = deploy_variables()
    assert {v: w for v, w in variables.items() if v not in documented_variables()} == {}


def test_the_collector_probe_paths_answer(redis_url: str) -> None:
    from ldptel.collector import create_app

    client = create_app({"redis_url": redis_url}).test_client()
    paths = {p["httpGet"]["path"] for _, pod in pod_specs() for c in pod["containers"]
             for p in (c.get("readinessProbe"), c.get("livenessProbe")) if p
             and c["name"] == "collector"}  # fmt: skip
    paths.add(compose()["services"]["collector"]["healthcheck"]["test"][-1].split("8080")[1]
              .split("'")[0])  # fmt: skip
    assert paths == {"/healthz", "/readyz"}
    for path in paths:
        response = client.get(path)
        assert response.status_code == 200, path


def test_the_aggregator_probe_paths_answer() -> None:
    import requests

    from ldptel.aggregator.metrics import AggregatorMetrics, HealthServer

    metrics = AggregatorMetrics(stale_seconds=60)
    metrics.ready = True
    paths = {p["httpGet"]["path"] for _, pod in pod_specs() for c in pod["containers"]
             for p in (c.get("readinessProbe"), c.get("livenessProbe")) if p
             and c["name"] == "aggregator"}  # fmt: skip
    assert paths == {"/healthz", "/readyz"}
    with HealthServer(metrics, "127.0.0.1", 0) as server:
        for path in [*paths, "/metrics"]:
            assert requests.get(server.address + path, timeout=5).status_code == 200, path
