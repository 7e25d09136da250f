"""PEM against its test vectors (docs/protocol.md, `pem`; tests/vectors/pem.json, written in
plain Python by tests/vectors/make_pem.py): the created config and its id, values to group
labels, the client path fed the vectors' draws gives their wire reports, the collector
refuses the malformed ones naming the field, the window support's layout, which prefixes
are candidates, and every step of a discovery (candidates, estimates, the top_k kept)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldptel.client.campaign import CampaignConfig
from ldptel.client.discovery import PrefixExtendingMethod
from ldptel.client.discovery.pem import padded_bits, possible_prefix
from ldptel.client.errors import InvalidValueError, ReportError
from ldptel.client.hashing import item_keys
from ldptel.client.oracles.cms import OpenDomainCMS
from ldptel.client.oracles.hcms import OpenDomainHCMS
from ldptel.client.samplers import base256_digits

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "pem.json").read_text("utf-8"))
CASES = VECTORS["cases"]
IDS = [case["name"] for case in CASES]
#: A scripted draw: ("below", bound, value) or ("coins", first bytes).
Draw = tuple[Any, ...]


def config_of(case: dict[str, Any]) -> CampaignConfig:
    return CampaignConfig.from_dict(case["config_input"]).as_created()


class ScriptedDraws:
    """An Rng whose draws are given: uniform integers below a bound as ("below", bound,
    value), and the 64-bit words of exact coins as ("coins", bytes): each coin is decided by
    its first uniform byte (0 gives 1, 255 gives 0, as the probability's first base-256
    digit lies strictly between; docs/protocol.md, `oue`), the unused bytes are 255."""

    def __init__(self, draws: list[Draw]) -> None:
        self.draws = list(draws)

    def integers(self, low: int, high: int, size: int, dtype: Any = np.int64) -> Any:
        kind, *given = self.draws.pop(0)
        assert low == 0 and size >= 1
        if kind == "below":
            bound, value = given
            assert (high, size) == (bound, 1), (high, size, bound)
            return np.array([value], dtype=dtype)
        assert (kind, high, dtype) == ("coins", 1 << 64, np.uint64), (kind, high)
        (coins,) = given
        raw = np.full(8 * size, 255, dtype=np.uint8)
        raw[: len(coins)] = coins
        return raw.view(np.uint64)

    def random(self, size: int) -> Any:
        raise AssertionError("the exact samplers draw no floats")


def coin_byte(outcome: bool) -> int:
    return 0 if outcome else 255


def draws_of(pem: PrefixExtendingMethod, row: dict[str, Any]) -> list[Draw]:
    """The vector's draws in the order ldptel makes them: the group, the row j, then the
    sketch's (CMS: a q-coin per position, then the true position's p-coin; HCMS: the
    column l, then the flip coin)."""
    draws: list[Draw] = [
        ("below", pem.groups, row["group"]),
        ("below", pem.oracle.k, row["j"]),
    ]
    if isinstance(pem.oracle, OpenDomainCMS):
        # Bit i != bucket is its q-coin (1 iff flipped); the bucket's is its p-coin (1 iff
        # not flipped), drawn after the q-coins and replacing the bucket's q-coin.
        flipped = set(row["flipped"])
        others = [coin_byte(i in flipped and i != row["bucket"]) for i in range(pem.oracle.m)]
        draws += [("coins", others), ("coins", [coin_byte(row["bucket"] not in flipped)])]
    else:
        draws += [("below", pem.oracle.m, row["l"]), ("coins", [coin_byte(row["flipped"])])]
    return draws


def group_sketches(
    pem: PrefixExtendingMethod, support: Sequence[int]
) -> tuple[list[Any], list[int]]:
    return pem.split_support(np.array(support, dtype=np.int64))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_config_is_created_with_these_bytes_and_id(case: dict[str, Any]) -> None:
    config = config_of(case)
    assert config.to_dict() == case["config"]
    assert config.canonical_json() == case["config_json"]
    assert config.config_id == case["config_id"]
    pem = config.build_discovery()
    assert list(pem.lengths) == case["prefix_lengths"]
    # Not served: the sketch's probabilities, derived from epsilon as docs/protocol.md says.
    served = case["sketch_probabilities"]
    if isinstance(pem.oracle, OpenDomainHCMS):
        assert pem.oracle.flip == served["f"]
    else:
        assert isinstance(pem.oracle, OpenDomainCMS)
        assert (pem.oracle.p, pem.oracle.q) == (served["p"], served["q"])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_are_nfc_padded_bits_and_each_groups_label_a_prefix(case: dict[str, Any]) -> None:
    config = config_of(case)
    pem = config.build_discovery()
    for value in case["values"]:
        if not value["accepted"]:
            with pytest.raises(InvalidValueError):
                config.open_value(value["input"])
            continue
        text = config.open_value(value["input"])
        assert text == value["nfc"]
        assert len(text.encode("utf-8")) == value["utf8_bytes"]
        assert padded_bits(text, pem.max_length) == value["bits"]
        assert [pem.prefix(text, g) for g in range(pem.groups)] == value["labels"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_label_is_hashed_as_a_string(case: dict[str, Any]) -> None:
    sketch = config_of(case).build_discovery().oracle
    for label in case["labels"]:
        [key] = item_keys([label["label"]]).tolist()
        assert key == int(label["item_key"])
        rows = np.arange(sketch.k)
        buckets = sketch.key_buckets(np.full(sketch.k, key, dtype=np.uint64), rows)
        assert buckets.tolist() == label["hashes"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_client_maps_the_given_draws_to_the_wire_report(case: dict[str, Any]) -> None:
    pem = config_of(case).build_discovery()
    sketch = pem.oracle
    for probability in vars(sketch).keys() & {"p", "q", "flip"}:  # coins decided by 1 byte
        assert 0 < base256_digits(getattr(sketch, probability))[0] < 255
    hashes = {label["label"]: label["hashes"] for label in case["labels"]}
    for row in case["reports"]:
        assert pem.prefix(row["value"], row["group"]) == row["label"]
        assert hashes[row["label"]][row["j"]] == row["bucket"]
        rng = ScriptedDraws(draws_of(pem, row))
        assert pem.perturb(row["value"], rng) == row["report"]  # type: ignore[arg-type]
        assert rng.draws == []


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_reports_window_support_is_each_groups_sketch_then_the_group_counts(
    case: dict[str, Any],
) -> None:
    pem = config_of(case).build_discovery()
    reports = [row["report"] for row in case["reports"]]
    batch = pem.decode(json.loads(json.dumps(reports)))
    assert pem.encode(batch) == reports
    stored = pem.unpack(pem.pack(batch), len(reports))  # the form a stream entry holds
    assert pem.support(stored).tolist() == case["support"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_malformed_reports_are_refused_naming_the_field(case: dict[str, Any]) -> None:
    pem = config_of(case).build_discovery()
    for bad in case["malformed"]:
        with pytest.raises(ReportError) as caught:
            pem.decode([bad["report"]])
        assert (caught.value.field, caught.value.reason) == (
            f"reports[0].{bad['field']}",
            bad["reason"],
        )


def test_the_collector_refuses_the_malformed_reports_with_json_naming_the_field(
    collector: Any, token: str
) -> None:
    for case in CASES:
        assert collector.api.create_campaign(case["config_input"]) == case["config_id"]
        body = {"campaign": case["name"], "config_id": case["config_id"]}
        good = [row["report"] for row in case["reports"]]
        assert collector.api.post_reports(token, {**body, "reports": good}).status_code == 202
        for bad in case["malformed"]:
            response = collector.api.post_reports(token, {**body, "reports": [bad["report"]]})
            assert response.status_code == 400, response.text
            error = response.json()["error"]
            assert (error["field"], error["reason"]) == (
                f"reports[0].{bad['field']}",
                bad["reason"],
            )


def test_a_prefix_is_a_candidate_only_if_the_stated_rule_allows_it() -> None:
    for prefix in VECTORS["prefixes"]:
        assert possible_prefix(prefix["label"]) == prefix["possible"], prefix


class RecordedSteps(PrefixExtendingMethod):
    """PEM that records each step's kept prefixes and the candidates they extend to."""

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.steps: list[tuple[int, list[str], list[str]]] = []

    def extend(self, kept: Sequence[str], group: int) -> list[str]:
        candidates = super().extend(kept, group)
        self.steps.append((group, list(kept), candidates))
        return candidates


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_discovery_estimates_every_steps_candidates_and_keeps_the_top_k(
    case: dict[str, Any],
) -> None:
    config = config_of(case)
    assert config.max_length is not None
    pem = RecordedSteps(epsilon=config.epsilon, max_length=config.max_length, **config.params)
    discovery = case["discovery"]
    sketches, counts = group_sketches(pem, discovery["support"])
    steps = discovery["steps"]
    assert counts == [step["reports"] for step in steps]
    assert list(pem.first_candidates) == steps[0]["candidates"]
    for group, step in enumerate(steps):
        assert (step["group"], step["prefix_bits"]) == (group, pem.lengths[group])
        keys = item_keys(step["candidates"])
        estimate = pem.oracle.estimate_keys(sketches[group], counts[group], keys)
        assert estimate.tolist() == pytest.approx(step["estimate"], rel=1e-12, abs=1e-9)
    pem.discover(sketches, counts)  # the real loop: what it kept and extended to
    assert pem.steps == [
        (group, steps[group - 1]["kept"], steps[group]["candidates"])
        for group in range(1, len(steps))
    ]
    # The release: the vector's threshold is exact; ours rounds the collision offsets up on
    # a grid (cells of at most the noise's sigma / 64 here): at most 2 cells above, never
    # below; the same values listed, with the same estimates and stderr.
    release = discovery["release"]
    found = pem.discover(sketches, counts)
    sigma = math.sqrt(float(pem.oracle.key_variance(counts[-1], np.zeros(1))[0]))
    cells = 2 * sigma / 64 * found.n / counts[-1]
    assert release["threshold"] <= found.threshold <= release["threshold"] + cells
    assert list(found.values) == [item["value"] for item in release["listed"]]
    listed = release["listed"]
    assert found.estimate.tolist() == pytest.approx([i["estimate"] for i in listed], rel=1e-12)
    assert found.stderr.tolist() == pytest.approx([i["stderr"] for i in listed], rel=1e-12)
    assert found.expected_false_discoveries == pytest.approx(0.05)
