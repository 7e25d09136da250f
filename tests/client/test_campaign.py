"""Campaign configs: the canonical JSON and id (RFC 8785), the parameters written at creation,
the label rules, and configs stored under legacy ids (docs/protocol.md)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldptel.client import configs
from ldptel.client.campaign import CampaignConfig
from ldptel.client.canonical import canonical_json, number
from ldptel.client.errors import LdptelError, ParameterError
from ldptel.client.oracles import make_oracle
from ldptel.client.oracles.histogram import derive_table
from ldptel.client.transport import ConfigAnswer

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "config_ids.json").read_text())
CASES = VECTORS["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["input"]["name"] for c in CASES])
def test_a_created_config_has_the_vectors_canonical_json_and_id(case: dict[str, Any]) -> None:
    created = CampaignConfig.from_dict(case["input"]).as_created()
    assert created.canonical_json() == case["canonical"]
    assert created.config_id == case["config_id"]
    assert created.to_dict() == case["created"]
    # As served and stored: the created JSON (integral floats read back as integers) is the
    # same config with the same id.
    served = CampaignConfig.from_dict(case["created"], stored=True)
    assert served.config_id == case["config_id"]
    assert served.legacy_config_id == case["legacy_config_id"]


@pytest.mark.parametrize(
    ("value", "text"),
    [  # RFC 8785, Appendix B and Sec. 3.2.2.3
        (0.0, "0"), (-0.0, "0"), (1.0, "1"), (-1.5, "-1.5"), (4.5, "4.5"), (2e-3, "0.002"),
        (0.00001, "0.00001"), (1e-6, "0.000001"), (1e-7, "1e-7"), (1.5e-7, "1.5e-7"),
        (1e-27, "1e-27"), (1e20, "100000000000000000000"), (1e21, "1e+21"), (1e30, "1e+30"),
        (333333333.33333329, "333333333.3333333"), (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (9007199254740992.0, "9007199254740992"),
    ],
)  # fmt: skip
def test_numbers_are_written_as_ecmascript_writes_them(value: float, text: str) -> None:
    assert number(value) == text
    assert float(text) == value


def test_keys_sort_by_utf16_code_units_and_strings_escape_as_json_stringify() -> None:
    # RFC 8785, Sec. 3.2.3: U+1F600 (surrogates D83D DE00) sorts before U+FB33.
    keys = {"\u20ac": 1, "\r": 2, "\ufb33": 3, "1": 4, "\U0001f600": 5, "\u0080": 6, "ö": 7}
    assert canonical_json(keys) == '{"\\r":2,"1":4,"\u0080":6,"ö":7,"€":1,"😀":5,"\ufb33":3}'
    assert canonical_json(["\x00\x1f\x7f\u2028", '\b\t\n\f\r"\\']) == (
        '["\\u0000\\u001f\x7f\u2028","\\b\\t\\n\\f\\r\\"\\\\"]'
    )
    for bad in (math.nan, math.inf, 2**53 + 1, "\ud800", {1: 2}):
        with pytest.raises(ParameterError):
            canonical_json(bad)


def test_derived_parameters_are_written_once_and_then_used() -> None:
    created = CampaignConfig.from_dict(
        {"name": "t", "oracle": "the", "epsilon": 1.0, "domain": ["a", "b"],
         "params": {"resolution": 8}}
    ).as_created()  # fmt: skip
    theta = created.params["theta"]
    assert created.build_oracle().threshold == math.floor(theta * 8)
    rappor = CampaignConfig.from_dict(
        {"name": "r", "oracle": "rappor", "epsilon": 1.5, "domain": ["a", "b"]}
    ).as_created()
    assert set(rappor.params) == {"k", "h", "m", "f", "p", "q"}
    assert rappor.params["f"] * 2**31 == round(rappor.params["f"] * 2**31)  # exact in JSON
    # A level that does not report (threshold) gets no parameters.
    leveled = CampaignConfig.from_dict(
        {"name": "l", "oracle": "olh", "epsilon": 2.0, "domain": ["a", "b"],
         "levels": {"high": 0.5, "low": 2.0}, "level_strategy": "threshold",
         "level_threshold": 1.0}
    ).as_created()  # fmt: skip
    # at t = 1: g = round(e + 1) and p = 1/(1 + (g - 1) e^-1)
    assert dict(leveled.level_params) == {"low": {"g": 4, "p": 1 / (1 + 3 * math.exp(-1.0))}}
    assert leveled.level_oracle("low").g == 4  # type: ignore[union-attr]


def test_level_params_are_validated() -> None:
    base = {"name": "l", "oracle": "olh", "epsilon": 2.0, "domain": ["a", "b"],
            "levels": {"high": 0.5}}  # fmt: skip
    for bad, reason in (
        ({"nope": {"g": 3}}, "not a privacy level"),
        ({"high": 3}, "object"),
    ):
        with pytest.raises(ParameterError, match=reason) as error:
            CampaignConfig.from_dict({**base, "level_params": bad})
        assert error.value.field == "level_params"
    with pytest.raises(ParameterError) as error:
        CampaignConfig.from_dict({**base, "level_params": {"high": {"g": 1}}})
    assert error.value.field == "g"


@pytest.mark.parametrize(
    ("label", "reason"),
    [
        ("", "empty"),
        ("a\x00b", "control"),
        ("tab\there", "control"),
        ("cafe\u0301", "NFC"),  # NFD spelling of café
        ("\ud800", "surrogate"),
    ],
)
def test_new_configs_refuse_labels_that_are_not_exact_text(label: str, reason: str) -> None:
    data = {"name": "c", "oracle": "de", "epsilon": 1.0, "domain": ["ok", label]}
    with pytest.raises(ParameterError, match=reason) as error:
        CampaignConfig.from_dict(data)
    assert error.value.field == "domain"
    if reason != "surrogate":  # a stored config (valid when created) still loads
        assert CampaignConfig.from_dict(data, stored=True).domain[1] == label


def test_nfc_and_nfd_are_one_label_so_a_domain_cannot_hold_both() -> None:
    with pytest.raises(ParameterError, match="NFC"):
        CampaignConfig.from_dict(
            {"name": "c", "oracle": "de", "epsilon": 1.0, "domain": ["caf\u00e9", "cafe\u0301"]}
        )


LEGACY = {"name": "old", "oracle": "olh", "epsilon": 1.0, "domain": ["a", "b"]}


def test_a_config_stored_under_its_legacy_id_keeps_it() -> None:
    config = CampaignConfig.from_dict(LEGACY, stored=True)
    legacy = json.dumps(config.to_dict(), sort_keys=True, separators=(",", ":"))
    assert '"epsilon":1.0' in legacy and config.legacy_json() == legacy
    assert config.legacy_config_id != config.config_id
    identified = config.identified_as(config.legacy_config_id)
    assert identified is not None and identified.config_id == config.legacy_config_id
    assert config.identified_as(config.config_id) == config
    assert config.identified_as("0123456789abcdef") is None


def test_a_client_accepts_and_caches_a_legacy_id(tmp_path: Path) -> None:
    config = CampaignConfig.from_dict(LEGACY, stored=True)
    body = {**config.to_dict(), "config_id": config.legacy_config_id}
    parsed = configs.parse_answer(ConfigAnswer(200, body))
    assert parsed.config_id == config.legacy_config_id
    configs.store(tmp_path, "old", configs.Known("active", parsed, 1.0))
    cached = configs.load(tmp_path, "old")
    assert cached is not None and cached.config is not None
    assert cached.config.config_id == config.legacy_config_id
    # A cache file from before ids were cached holds a config under its legacy id.
    path = tmp_path / "configs" / "old.json"
    data = json.loads(path.read_text())
    del data["config_id"]
    path.write_text(json.dumps(data))
    cached = configs.load(tmp_path, "old")
    assert cached is not None and cached.config is not None
    assert cached.config.config_id == config.legacy_config_id


# -- served parameters: every one a client needs, used as served ----------------------------

SERVED = {
    "de": {"p", "q"}, "sue": {"p", "q"}, "oue": {"p", "q"}, "blh": {"p"}, "olh": {"g", "p"},
    "hr": {"p"}, "ss": {"k", "p"}, "cms": {"k", "m", "p", "q"}, "hcms": {"k", "m", "f"},
    "she": {"resolution", "noise"}, "the": {"resolution", "noise", "theta"},
    "rappor": {"k", "h", "m", "f", "p", "q"},
}  # fmt: skip


def created_text(data: dict[str, Any]) -> str:
    """The JSON text a created config is stored and served as."""
    return CampaignConfig.from_dict(data).as_created().canonical_json()


def served(text: str) -> CampaignConfig:
    """A config as a client gets it: parsed from the served text as stored."""
    return CampaignConfig.from_dict(json.loads(text), stored=True)


def no_exp(value: float) -> float:
    raise AssertionError("a served parameter was derived again")


@pytest.mark.parametrize("name", sorted(SERVED))
def test_the_served_parameters_rebuild_exactly_the_oracle_the_collector_derived(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = {"name": "s", "oracle": name, "epsilon": 1.5, "domain": [f"v{i}" for i in range(6)]}
    if name in ("cms", "hcms"):
        data["params"] = {"k": 8, "m": 16}
    derived = CampaignConfig.from_dict(data).build_oracle()  # what the collector derives
    text = created_text(data)
    monkeypatch.setattr(math, "exp", no_exp)  # from here on nothing may be derived
    config = served(text)
    assert set(config.params) == SERVED[name]
    oracle = config.build_oracle()
    assert oracle.derived_params() == derived.derived_params()
    assert oracle.epsilon == derived.epsilon
    values = np.arange(6).repeat(50)
    batch = oracle.perturb_batch(values, np.random.default_rng(3))
    same = derived.perturb_batch(values, np.random.default_rng(3))
    assert all(np.array_equal(batch[f.name], same[f.name]) for f in oracle.fields)
    support = oracle.support(batch)
    assert np.array_equal(oracle.estimate(support, 300), derived.estimate(support, 300))
    assert np.array_equal(oracle.variance(300), derived.variance(300))


def test_each_level_is_served_its_own_parameters() -> None:
    data = {"name": "l", "oracle": "the", "epsilon": 2.0, "domain": ["a", "b", "c"],
            "levels": {"high": 0.5, "low": 2.0}}  # fmt: skip
    config = served(created_text(data))
    assert set(config.params) == {"resolution"}
    for level, epsilon in (("high", 0.5), ("low", 2.0)):
        assert set(config.level_params[level]) == {"noise", "theta"}
        oracle = config.level_oracle(level)
        fresh = make_oracle("the", epsilon=epsilon, domain_size=3)
        assert oracle is not None and oracle.derived_params() == fresh.derived_params()


def tampered(name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    data = {"name": "t", "oracle": name, "epsilon": 1.0, "domain": ["a", "b", "c", "d"]}
    config = json.loads(created_text(data))
    change(config["params"])
    return dict(config)


@pytest.mark.parametrize(
    ("name", "change", "field"),
    [
        ("de", lambda p: p.update(p=0.9, q=0.1 / 3), "p"),  # e^eps would be 27
        ("de", lambda p: p.update(q=p["q"] / 2), "q"),  # not the law's other values
        ("oue", lambda p: p.update(q=p["q"] * 0.9), "p"),
        ("sue", lambda p: p.update(q=p["p"]), "q"),
        ("olh", lambda p: p.update(p=0.99), "p"),
        ("blh", lambda p: p.update(p=0.3), "p"),  # below 1/g: not a randomized response
        ("hr", lambda p: p.update(p=0.75), "p"),
        ("ss", lambda p: p.update(p=0.5), "p"),
        ("cms", lambda p: p.update(p=0.8), "p"),
        ("hcms", lambda p: p.update(f=0.2), "f"),
        # a consistent table (its own total) of less noise: the one of epsilon 1.2
        ("she", lambda p: p.update(noise=derive_table(1.2, 1).to_json()), "noise"),
        ("she", lambda p: p["noise"].update(total=str(int(p["noise"]["total"]) + 1)), "noise"),
        ("she", lambda p: p["noise"].update(center="0012"), "noise"),
        ("the", lambda p: p["noise"].update(clamp=10**9), "noise"),
    ],
)
def test_a_served_value_that_would_weaken_the_guarantee_is_refused(
    name: str, change: Callable[[dict[str, Any]], None], field: str
) -> None:
    with pytest.raises(ParameterError) as error:
        CampaignConfig.from_dict(tampered(name, change), stored=True)
    assert error.value.field == field


def test_any_other_change_to_a_served_value_is_detected_by_the_config_id() -> None:
    original = CampaignConfig.from_dict(tampered("de", lambda p: None), stored=True)
    # More privacy than claimed is a valid config, but not the one the collector serves.
    body = tampered("de", lambda p: p.update(p=0.3, q=0.7 / 3))
    assert CampaignConfig.from_dict(body, stored=True).build_oracle().epsilon < 1.0
    with pytest.raises(LdptelError) as error:
        configs.parse_answer(ConfigAnswer(200, {**body, "config_id": original.config_id}))
    assert error.value.field == "config_id"
    with pytest.raises(LdptelError) as error:  # a tampered table: refused before the id
        configs.parse_answer(
            ConfigAnswer(
                200,
                {**tampered("she", lambda p: p["noise"].update(a=0.5)), "config_id": "0" * 16},
            )
        )
    assert error.value.field == "noise"


def test_a_config_created_before_the_probabilities_were_served_keeps_its_id_and_law() -> None:
    # As stored then: params {} (DE had nothing to write); the same id, p derived as before.
    stored = {"name": "unicode", "oracle": "de", "epsilon": 1.0,
              "domain": ["café", "日本語", "😀", 'say "hi" \\ ok'], "params": {},
              "lifetime_epsilon": None, "reports_per_window": 1, "retention_seconds": 604800,
              "shards": 1, "window_seconds": 86400}  # fmt: skip
    config = CampaignConfig.from_dict(stored, stored=True)
    assert config.config_id == "8cb4a22d03bc7854"  # its id in the vectors before this change
    oracle = config.build_oracle()
    assert (oracle.p, oracle.q) == (math.e / (math.e + 3), 1 / (math.e + 3))  # type: ignore[attr-defined]
