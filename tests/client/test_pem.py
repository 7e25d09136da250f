"""The Prefix Extending Method's client: how a value becomes the prefix a group reports,
which prefixes can exist, the report's wire form and law, and its privacy, audited exactly
on the real sketch oracle of every group (worst cases included)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from ldptel.analysis.audit import sampled_audit
from ldptel.analysis.heavy_hitters import exact_report_loss
from ldptel.client.discovery import PrefixExtendingMethod
from ldptel.client.discovery.pem import padded_bits, possible_prefix, prefix_value
from ldptel.client.errors import ParameterError, ReportError
from ldptel.client.hashing import item_keys
from ldptel.client.samplers import sample_uniform_below


def test_a_value_is_its_utf8_bytes_zero_padded_and_prefixes_are_cut_from_them() -> None:
    assert padded_bits("a", 2) == "01100001" + "0" * 8
    assert padded_bits("", 1) == "0" * 8
    assert padded_bits("é", 2) == "11000011" + "10101001"
    pem = PrefixExtendingMethod(epsilon=1.0, max_length=4, top_k=4, step_bits=8, k=16, m=64)
    # gamma = log2(top_k) = 2, then 8 bits a group: 10, 18, 26, and the whole 32 bits.
    assert pem.lengths == (10, 18, 26, 32) and pem.groups == 4
    assert [len(pem.prefix("ab", g)) for g in range(4)] == [10, 18, 26, 32]
    assert pem.prefix("ab", 3) == padded_bits("ab", 4)


@pytest.mark.parametrize(
    ("value", "field"),
    [("abcde", "value"), ("a\0b", "value"), (b"ab", "value")],
)
def test_values_too_long_with_nul_or_not_strings_are_refused(value: object, field: str) -> None:
    pem = PrefixExtendingMethod(epsilon=1.0, max_length=4, k=16, m=64)
    with pytest.raises(ParameterError) as error:
        pem.perturb(value)  # type: ignore[arg-type, dict-item]
    assert error.value.field == field


def test_parameters_are_checked_by_name() -> None:
    # The default sketch is the lower variance among those that take m (HCMS: powers of 2).
    assert PrefixExtendingMethod(epsilon=1.0, max_length=4, m=100).sketch == "cms"
    for params, field in [
        ({"max_length": 0}, "max_length"),
        ({"max_length": 4, "top_k": 0}, "top_k"),
        ({"max_length": 4, "top_k": 1 << 12, "step_bits": 8}, "top_k"),
        ({"max_length": 4, "sketch": "olh"}, "sketch"),
        ({"max_length": 4, "epsilon": -1.0}, "epsilon"),
    ]:
        with pytest.raises(ParameterError) as error:
            PrefixExtendingMethod(**{"epsilon": 1.0, **params})  # type: ignore[arg-type, dict-item]
        assert error.value.field == field


def test_only_prefixes_some_value_can_have_are_candidates() -> None:
    assert possible_prefix(padded_bits("héllo", 8)[:20])  # inside the two-byte é
    assert possible_prefix("01100001" + "00000000" + "000")  # "a", then padding
    assert not possible_prefix("01100001" + "00000000" + "001")  # a bit after the padding
    assert not possible_prefix("00000000" + "01100001")  # a NUL inside the value
    assert not possible_prefix("10000000")  # a UTF-8 continuation byte first
    assert prefix_value(padded_bits("héllo", 8)) == "héllo"
    assert prefix_value(padded_bits("héllo", 8)[:-3]) is None  # not whole bytes
    assert prefix_value("11000011" + "00000000") is None  # é cut short, then padding
    assert prefix_value("01100001" + "11000011") is None  # the last character cut short


def test_the_report_is_a_uniform_group_and_the_group_oracles_report_of_the_prefix() -> None:
    pem = PrefixExtendingMethod(epsilon=2.0, max_length=4, top_k=4, k=16, m=64)
    # Same seed, same draws: perturb is the group draw, then the sketch report of the prefix.
    first, second = np.random.default_rng(5), np.random.default_rng(5)
    report = pem.perturb("abc", first)
    group = int(sample_uniform_below(second, pem.groups, 1)[0])
    assert report == {"group": group, **pem.oracle.perturb_string(pem.prefix("abc", group), second)}
    assert set(report) == {"group", "j", "bits"}
    # The OS CSPRNG by default; groups uniform (chi-square, false failure 1e-3).
    groups = np.bincount([pem.perturb("abc")["group"] for _ in range(800)], minlength=4)
    assert stats.chisquare(groups).pvalue > 1e-3


def test_many_values_at_once_are_each_a_group_draw_then_the_sketch_report_of_its_prefix() -> None:
    # perturb_values (demo, load generators): all the groups first, then the group oracle's
    # vectorized report of every user's prefix; one value draws exactly as perturb does.
    pem = PrefixExtendingMethod(epsilon=2.0, max_length=4, top_k=4, k=16, m=64)
    values = ["abc", "", "é", "abcd", "z"] * 40
    first, second = np.random.default_rng(9), np.random.default_rng(9)
    batch = pem.perturb_values(values, first)
    groups = sample_uniform_below(second, pem.groups, len(values))
    prefixes = [pem.prefix(value, g) for value, g in zip(values, groups.tolist(), strict=True)]
    sketch = pem.oracle.perturb_keys(item_keys(prefixes), second)
    assert batch["group"].tolist() == groups.tolist() and set(batch) == {"group", "j", "bits"}
    for name, column in sketch.items():
        np.testing.assert_array_equal(batch[name], column)
    assert (
        pem.perturb("ab", np.random.default_rng(4))
        == pem.encode(pem.perturb_values(["ab"], np.random.default_rng(4)))[0]
    )
    with pytest.raises(ParameterError) as error:  # every value is checked, as by perturb
        pem.perturb_values(["ok", "abcde"], np.random.default_rng(1))
    assert error.value.field == "value"


@pytest.mark.parametrize("sketch", ["cms", "hcms"])
@pytest.mark.parametrize(
    ("value", "other"),
    [
        ("ab", "ac"),  # differ only in the last bit: every group but the last agrees
        ("", "\U0010ffff"),  # empty vs the largest code point (4 bytes)
        ("abcd", "b"),  # differ in the first bit: every group differs
        ("same", "same"),  # no loss at all
    ],
)
def test_one_report_is_epsilon_ldp_for_any_two_values_exactly(
    sketch: str, value: str, other: str
) -> None:
    epsilon = 1.5
    pem = PrefixExtendingMethod(epsilon=epsilon, max_length=4, top_k=4, sketch=sketch, k=16, m=64)
    loss = exact_report_loss(pem, value, other)
    assert pem.epsilon == pytest.approx(epsilon, rel=1e-12)
    assert loss <= epsilon * (1 + 1e-9)
    if value != other:  # the bound is reached: the claim is tight, not loose
        assert loss == pytest.approx(epsilon, rel=1e-9)
    else:
        assert loss == 0.0


def test_the_worst_pair_of_prefixes_reaches_epsilon_in_sampled_reports_too() -> None:
    # The sampled audit draws the last group's reports through the real perturb code.
    pem = PrefixExtendingMethod(epsilon=1.0, max_length=2, top_k=4, k=16, m=64)
    oracle = pem.group_oracle([pem.prefix("ab", pem.groups - 1), pem.prefix("ac", pem.groups - 1)])
    result = sampled_audit(oracle, np.random.default_rng(2), samples=20_000, pairs=[(0, 1)])
    # Violated only if even the 99.9% lower bound exceeds epsilon (false failure <= 1e-3).
    assert result.lower_bound <= pem.epsilon
    assert math.isfinite(result.epsilon)


@pytest.mark.parametrize("sketch", ["cms", "hcms"])
def test_reports_over_the_wire_sum_to_a_window_support_that_discovers_the_frequent_strings(
    sketch: str,
) -> None:
    # Two groups (9 and 16 bits); 1200 users: "ab" x 500, "cd" x 400, 300 one-user strings.
    pem = PrefixExtendingMethod(
        epsilon=4.0, max_length=2, top_k=2, step_bits=8, sketch=sketch, k=256, m=64
    )
    singles = [chr(0x100 + i) for i in range(300)]  # two UTF-8 bytes each, all distinct
    values = ["ab"] * 500 + ["cd"] * 400 + singles
    rng = np.random.default_rng(16)
    wire = [pem.perturb(value, rng) for value in values]
    support = np.zeros(pem.support_size, dtype=np.int64)
    for batch in (wire[:700], wire[700:]):  # batches add, through the stored (packed) form
        decoded = pem.decode(json.loads(json.dumps(batch)))
        support += pem.support(pem.unpack(pem.pack(decoded), len(batch)))
    sketches, sizes = pem.split_support(support)
    assert sum(sizes) == len(values) and len(sketches) == pem.groups
    found = pem.discover(sketches, sizes)
    # Frequent strings found; one-user strings never listed (each is listed with probability
    # at most expected_false_discoveries / candidates under the stated threshold).
    assert set(found.values) == {"ab", "cd"}
    assert found.threshold > 0 and found.expected_false_discoveries <= 0.05


@pytest.mark.parametrize(
    ("report", "field"),
    [
        ({"j": 0, "bits": "AAAAAAAAAAA="}, "reports[0].group"),
        ({"group": 2, "j": 0, "bits": "AAAAAAAAAAA="}, "reports[0].group"),
        ({"group": True, "j": 0, "bits": "AAAAAAAAAAA="}, "reports[0].group"),
        ({"group": 1, "j": 64, "bits": "AAAAAAAAAAA="}, "reports[0].j"),
    ],
)
def test_bad_reports_are_refused_naming_the_field(report: dict[str, object], field: str) -> None:
    pem = PrefixExtendingMethod(epsilon=4.0, max_length=2, top_k=2, sketch="cms", k=64, m=64)
    with pytest.raises(ReportError) as error:
        pem.decode([report])
    assert error.value.field == field
