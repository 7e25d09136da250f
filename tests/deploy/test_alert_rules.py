"""The alerting rules (deploy/prometheus/ldptel-alerts.yaml and its PrometheusRule,
deploy/kubernetes/alerts.yaml) checked without promtool: the rule file's structure against a
schema written from Prometheus' rule format, the two copies equal, and every metric and label
they name against what the aggregator really exports."""

from __future__ import annotations

import copy
import re
from typing import Any

import jsonschema
import pytest
import yaml
from deploy_kit import DEPLOY, OPERATOR_API, operator_documents

RULES = DEPLOY / "prometheus" / "ldptel-alerts.yaml"
#: A Prometheus duration (model.Duration): units from ms to y, largest first.
DURATION = r"^((\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?|0)$"
STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
#: Prometheus' rule file format (prometheus/model/rulefmt: RuleGroups, RuleGroup, Rule): no
#: other key may appear, as Prometheus refuses unknown fields.
RULE_FILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["groups"],
    "additionalProperties": False,
    "properties": {"groups": {"type": "array", "minItems": 1, "items": {
        "type": "object",
        "required": ["name", "rules"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "interval": {"type": "string", "pattern": DURATION},
            "query_offset": {"type": "string", "pattern": DURATION},
            "limit": {"type": "integer", "minimum": 0},
            "labels": STRINGS,
            "rules": {"type": "array", "minItems": 1, "items": {
                "type": "object",
                "required": ["expr"],
                "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
                "additionalProperties": False,
                "properties": {
                    "alert": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
                    "record": {"type": "string", "pattern": r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"},
                    "expr": {"type": "string", "minLength": 1},
                    "for": {"type": "string", "pattern": DURATION},
                    "keep_firing_for": {"type": "string", "pattern": DURATION},
                    "labels": STRINGS,
                    "annotations": STRINGS,
                },
            }},
        },
    }}},
}  # fmt: skip


def rule_file() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(RULES.read_text())
    return document


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in rule_file()["groups"] for rule in group["rules"]]


def exported_metrics() -> set[str]:
    """Every sample name the aggregator's /metrics can carry (with the gauges filled)."""
    from ldptel.aggregator.alerts import CampaignAlerts, ItemAlert
    from ldptel.aggregator.metrics import AggregatorMetrics

    metrics = AggregatorMetrics(stale_seconds=60)
    item = ItemAlert("red", 0.3, 0.01, 1.0, False, 0.2, True)
    metrics.estimates.set([CampaignAlerts("colors", 86_400, 0, [item])])
    metrics.lag.labels("colors", "0").set(0)
    return {sample.name for family in metrics.registry.collect() for sample in family.samples}


def test_the_rule_file_follows_prometheus_rule_format() -> None:
    validator = jsonschema.Draft202012Validator(RULE_FILE_SCHEMA)
    assert [error.message for error in validator.iter_errors(rule_file())] == []
    # The check can fail: a misspelt key, a bad duration, a rule without expr.
    for path, value in ((("rules", 0, "fro"), "5m"), (("rules", 0, "for"), "5 minutes")):
        broken = copy.deepcopy(rule_file())
        group = broken["groups"][0]
        group[path[0]][path[1]][path[2]] = value
        assert list(validator.iter_errors(broken)), path
    broken = copy.deepcopy(rule_file())
    del broken["groups"][0]["rules"][0]["expr"]
    assert list(validator.iter_errors(broken))


def test_the_prometheus_rule_holds_the_same_groups() -> None:
    [rule] = [d for d in operator_documents() if d["kind"] == "PrometheusRule"]
    assert rule["apiVersion"] == OPERATOR_API
    assert set(rule) == {"apiVersion", "kind", "metadata", "spec"}
    assert rule["spec"] == {"groups": rule_file()["groups"]}


def test_every_metric_the_rules_read_is_exported() -> None:
    exported = exported_metrics()
    for rule in alert_rules():
        named = set(re.findall(r"\b(ldptel_[a-z_]+)\b", rule["expr"]))
        assert named and named <= exported, (rule["alert"], named - exported)


def test_the_estimate_alerts_read_the_alert_gauges_by_campaign_and_item() -> None:
    for rule in alert_rules():
        if "estimate" in rule["expr"]:
            assert rule["expr"].startswith("max by (campaign, item) (ldptel_estimate_")
            assert rule["expr"].endswith(") == 1")


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda r: r["alert"])
def test_annotations_name_only_labels_the_expression_keeps(rule: dict[str, Any]) -> None:
    by = re.search(r"\bby \(([^)]*)\)", rule["expr"])
    kept = {label.strip() for label in by.group(1).split(",")} if by else set()
    for text in rule.get("annotations", {}).values():
        assert set(re.findall(r"\$labels\.(\w+)", text)) <= kept, text
        assert text.count("{{") == text.count("}}")
    assert rule["expr"].count("(") == rule["expr"].count(")")
    assert rule["labels"]["severity"] in {"warning", "critical"}
