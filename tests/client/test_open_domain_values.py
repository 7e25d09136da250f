"""Open-domain campaigns on the client: the config form (max_length, no domain), `auto`
choosing a sketch by exact variance, and report() of free text through the real SDK (NFC,
length checked, never raises, nothing of the text on disk or the wire)."""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from live_collector import sent_reports, stored_reports

from ldptel.analysis.audit import audit
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import InvalidValueError, ParameterError, ReportError
from ldptel.client.hashing import item_keys
from ldptel.client.labels import CONTROL_CHARACTER, check_candidates
from ldptel.client.oracles import make_oracle
from ldptel.client.oracles.olh import OpenDomainOLH
from ldptel.client.oracles.sketch import KeySketch
from ldptel.client.status import ReportStatus

OPEN = {"name": "answers", "oracle": "cms", "epsilon": 2.0, "max_length": 16}


def test_an_open_domain_config_has_max_length_and_no_domain_in_its_json() -> None:
    config = CampaignConfig.from_dict(OPEN).as_created()

    data = config.to_dict()
    assert data["max_length"] == 16 and "domain" not in data
    assert CampaignConfig.from_dict(data).config_id == config.config_id
    # Categorical configs are unchanged: no max_length member, so the same ids as before.
    colors = {"name": "c", "oracle": "de", "epsilon": 1.0, "domain": ["a", "b"]}
    assert "max_length" not in CampaignConfig.from_dict(colors).to_dict()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"oracle": "oue"}, "oracle"),
        ({"domain": ["a", "b"]}, "domain"),
        ({"other_label": "a"}, "other_label"),
        ({"levels": {"high": 1.0}}, "levels"),
        ({"max_length": 0}, "max_length"),
        ({"max_length": 5000}, "max_length"),
    ],
)
def test_a_bad_open_domain_config_names_the_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ParameterError) as error:
        CampaignConfig.from_dict({**OPEN, **changes})
    assert error.value.field == field


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0, 8.0])
def test_auto_chooses_olh_of_lowest_variance_and_states_its_costs(epsilon: float) -> None:
    best = CampaignConfig.from_dict({**OPEN, "epsilon": epsilon, "oracle": "auto"})

    assert best.oracle == "olh" and best.oracle_choice is not None
    assert isinstance(best.build_open(), OpenDomainOLH)
    rows = {row["oracle"]: row for row in best.oracle_choice["candidates"]}
    # Per report: OLH's exact q(1 - q)/(p - q)^2 at its integer g, q = 1/g, below CMS's
    # e^(eps/2)/(e^(eps/2) - 1)^2 (m/(m - 1))^2 + 1/(m - 1) (docs/protocol.md, "cms").
    g = round(np.exp(epsilon) + 1)
    p, q, half, m = np.exp(epsilon) / (np.exp(epsilon) + g - 1), 1 / g, np.exp(epsilon / 2), 1024
    assert rows["olh"]["variance"] == pytest.approx(q * (1 - q) / (p - q) ** 2, rel=1e-12)
    cms = half / (half - 1) ** 2 * (m / (m - 1)) ** 2 + 1 / (m - 1)
    assert rows["cms"]["variance"] == pytest.approx(cms, rel=1e-9)
    assert rows["olh"]["variance"] < rows["cms"]["variance"] < rows["hcms"]["variance"]
    assert rows["olh"]["report_bytes"] == 8
    assert "6 bytes each" in best.oracle_choice["reason"]


def test_at_a_small_epsilon_the_three_tie_and_auto_chooses_the_cheapest() -> None:
    # g = round(e^0.1 + 1) = 2: OLH's variance is HCMS's c^2, CMS's within 0.1% of both.
    tied = CampaignConfig.from_dict({**OPEN, "epsilon": 0.1, "oracle": "auto"})

    assert tied.oracle == "hcms" and tied.oracle_choice is not None
    assert tied.oracle_choice["reason"].startswith("cheapest")
    assert "olh" in tied.oracle_choice["reason"]


def test_auto_chooses_the_sketch_that_fits_a_size_limit_and_says_why() -> None:
    bigger = CampaignConfig.from_dict({**OPEN, "oracle": "auto", "params": {"max_report_bytes": 8}})
    small = CampaignConfig.from_dict({**OPEN, "oracle": "auto", "params": {"max_report_bytes": 7}})

    assert bigger.oracle == "olh" and small.oracle == "hcms"
    assert small.oracle_choice is not None
    rows = {row["oracle"]: row for row in small.oracle_choice["candidates"]}
    assert rows["hcms"]["report_bytes"] == 5 and rows["cms"]["report_bytes"] == 130
    assert "at most 7 bytes" in small.oracle_choice["reason"]
    assert "6 bytes each" not in small.oracle_choice["reason"]


def test_a_value_is_reported_as_its_nfc_form_within_max_length() -> None:
    config = CampaignConfig.from_dict(OPEN)
    decomposed = unicodedata.normalize("NFD", "bleu café")

    assert config.open_value(decomposed) == "bleu café"
    assert config.open_value("x" * 16) == "x" * 16
    for bad in ("x" * 17, "é" * 9, "", "tab\there"):  # é is 2 UTF-8 bytes
        with pytest.raises(InvalidValueError):
            config.open_value(bad)
    assert check_candidates(["red", decomposed, "bleu café"]) == ["red", "bleu café"]
    with pytest.raises(ParameterError, match="entry 2"):
        check_candidates(["red", "a\x00b"])


def test_the_control_character_check_is_unicode_category_cc_at_every_code_point() -> None:
    # check_label's one regex search stands for unicodedata.category(c) == "Cc".
    points = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    regex = [c for c in points if CONTROL_CHARACTER.search(c)]
    assert regex == [c for c in points if unicodedata.category(c) == "Cc"]
    config = CampaignConfig.from_dict(OPEN)
    for control in ("\x00", "\x1f", "\x7f", "\x85", "\x9f"):
        with pytest.raises(InvalidValueError, match="control character"):
            config.open_value(f"a{control}b")
    assert config.open_value("a\xa0b") == "a\xa0b"  # U+00A0 is Zs, not a control


@pytest.mark.parametrize(
    ("oracle_name", "fields"), [("cms", {"j", "bits"}), ("olh", {"seed", "y"})]
)
def test_the_sdk_reports_free_text_and_never_raises(
    collector: Any,
    redis_client: Any,
    open_reporter: Any,
    state_dir: Path,
    oracle_name: str,
    fields: set[str],
) -> None:
    data = {**OPEN, "oracle": oracle_name, "max_length": 24, "lifetime_epsilon": 1e6}
    data["reports_per_window"] = 10
    collector.api.create_campaign({**data, "memoization": "exact_discloses_changes"})
    config = CampaignConfig.from_dict({**data, "memoization": "exact_discloses_changes"})
    config = config.as_created()
    reporter = open_reporter(strict=False)

    nfc, nfd = "crème brûlée", unicodedata.normalize("NFD", "crème brûlée")
    assert reporter.report("answers", nfc) is ReportStatus.SPOOLED
    assert reporter.report("answers", nfd) is ReportStatus.SPOOLED
    assert reporter.report("answers", "zebra-unicorn-4471") is ReportStatus.SPOOLED
    assert reporter.report("answers", "far too long for this campaign") is (
        ReportStatus.INVALID_VALUE
    )
    assert reporter.report("answers", 42) is ReportStatus.INVALID_VALUE  # type: ignore[arg-type]
    assert reporter.flush(timeout=20)

    first, second, third = stored_reports(redis_client, config)
    assert first == second != third  # one text, two spellings: one item key, one memo
    assert set(first) == fields
    wire = b"".join(seen.body for seen in collector.faults.posted())
    assert b"zebra" not in wire and b"cr\xc3\xa8me" not in wire
    assert sent_reports(collector.faults.posted())
    on_disk = b"".join(p.read_bytes() for p in state_dir.rglob("*") if p.is_file())
    assert b"zebra" not in on_disk and "crème".encode() not in on_disk


def test_the_open_domain_vectors_hold() -> None:
    vectors = json.loads((Path(__file__).parents[1] / "vectors/open_domain.json").read_text())
    config = CampaignConfig.from_dict(vectors["config"], stored=True)
    assert config.canonical_json() == vectors["config_json"]
    assert config.config_id == vectors["config_id"]
    oracle = config.build_open()
    assert isinstance(oracle, KeySketch)
    for case in vectors["values"]:
        if not case["accepted"]:
            with pytest.raises(InvalidValueError):
                config.open_value(case["input"])
            continue
        text = config.open_value(case["input"])
        assert text == case["nfc"]
        key = item_keys([text])
        assert key.tolist() == [int(case["item_key"])]
        rows = np.arange(config.params["k"])
        assert oracle.key_buckets(np.repeat(key, rows.size), rows).tolist() == case["hashes"]


@pytest.mark.parametrize(
    ("oracle_name", "params"),
    [("cms", {"k": 8, "m": 16}), ("hcms", {"k": 8, "m": 16}), ("olh", {})],
)
def test_any_two_free_texts_are_epsilon_apart_by_the_exact_audit(
    oracle_name: str, params: dict[str, int]
) -> None:
    # A report depends on a text only through its item key (perturb_keys, the SDK's path),
    # so auditing the oracle with free texts as its labels audits the open-domain law: any
    # two texts, worst pair included; canonically equivalent spellings are one text.
    config = CampaignConfig.from_dict({**OPEN, "oracle": oracle_name, "params": params})
    texts = [config.open_value(t) for t in ("blue", "bleu", "crème", "🙂 sky", "x" * 16)]
    oracle = make_oracle(oracle_name, epsilon=config.epsilon, domain_size=len(texts),
                         labels=texts, **config.params)  # fmt: skip

    result = audit(oracle, np.random.default_rng(1), samples=4000, sampled_pairs=2)

    assert not result.violated, result
    assert result.exact_epsilon == pytest.approx(oracle.epsilon, rel=1e-9)  # tight: reached
    assert oracle.epsilon == pytest.approx(config.epsilon)
    nfd = unicodedata.normalize("NFD", "crème")
    assert item_keys([config.open_value(nfd)]).tolist() == item_keys(["crème"]).tolist()


def test_an_open_domain_olh_config_serves_g_and_p_and_reports_a_text_by_its_item_key() -> None:
    config = CampaignConfig.from_dict({**OPEN, "oracle": "olh"}).as_created()
    oracle = config.build_open()

    assert config.params["g"] == round(np.exp(2.0) + 1) == 8
    assert isinstance(oracle, OpenDomainOLH) and oracle.g == 8
    assert oracle.p == config.params["p"]
    report = oracle.perturb_string("bleu café", np.random.default_rng(3))
    assert set(report) == {"seed", "y"} and 0 <= report["y"] < 8
    # The draws of perturb_keys are those of the categorical OLH's perturb_batch for a label
    # with the same text: one law, reached by the item key.
    labelled = make_oracle("olh", epsilon=2.0, domain_size=2, labels=["x", "bleu café"])
    batch = labelled.perturb_batch(np.array([1]), np.random.default_rng(3))
    assert labelled.encode(batch) == [report]


@pytest.mark.parametrize(("epsilon", "g", "record"), [(4.0, 56, 6), (12.0, 162_756, 8)])
def test_an_olh_log_record_holds_a_report_in_6_bytes_or_8_past_g_2_16(
    epsilon: float, g: int, record: int
) -> None:
    config = CampaignConfig.from_dict({**OPEN, "oracle": "olh", "epsilon": epsilon}).as_created()
    oracle = config.build_open()
    assert isinstance(oracle, OpenDomainOLH) and oracle.g == g
    batch = oracle.perturb_keys(item_keys(["a", "b", "c"] * 100), np.random.default_rng(5))

    data = oracle.log_bytes(batch)

    assert oracle.log_record.itemsize == record and len(data) == 300 * record
    back = oracle.log_batch(data)
    assert back["seed"].tolist() == batch["seed"].tolist()
    assert back["y"].tolist() == batch["y"].tolist()
    with pytest.raises(ReportError):  # y = g cannot be a report: a corrupt stored batch
        oracle.log_bytes({"seed": batch["seed"][:1], "y": np.array([g], dtype=np.uint32)})
    with pytest.raises(ReportError):  # not whole records
        oracle.log_batch(data[:-1])
