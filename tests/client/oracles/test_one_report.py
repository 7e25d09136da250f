"""The SDK's one-report paths (scalar draws from the client's CSPRNG: `perturb_key` of the
key mechanisms, `perturb_one` of unary encoding, PEM's `perturb`) have exactly the law of the
batch paths the audits and the vectors check: each law below is tested on reports of the
scalar path alone (the batch path switched off), with a broken variant each test rejects."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest
from scipy import stats

from ldptel.client.discovery import PrefixExtendingMethod
from ldptel.client.discovery.pem import padded_bits, prefix_label, value_bytes
from ldptel.client.hashing import item_key
from ldptel.client.oracles.cms import CountMeanSketch, OpenDomainCMS
from ldptel.client.oracles.hcms import HadamardCountMeanSketch, OpenDomainHCMS
from ldptel.client.oracles.keys import KeyMechanism
from ldptel.client.oracles.olh import OpenDomainOLH
from ldptel.client.oracles.oue import OptimizedUnaryEncoding
from ldptel.client.oracles.sue import SymmetricUnaryEncoding
from ldptel.client.randomness import SecureRandom

#: OS randomness is not seeded: a very small per-test false-alarm rate.
ALPHA = 1e-6
LIMIT = float(stats.norm.isf(ALPHA / 4))


def scalar_only(oracle: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch paths off: a report that went through them fails."""
    for name in ("perturb_keys", "perturb_batch", "perturb_values"):
        if hasattr(oracle, name):
            monkeypatch.setattr(oracle, name, None)


def bit_rates_z(bits: np.ndarray, own: np.ndarray, p: float, q: float) -> tuple[float, float]:
    """z of the own bits' count against p and of all other bits' count against q."""
    n, width = bits.shape
    at_own = bits[np.arange(n), own]
    others = int(bits.sum()) - int(at_own.sum())
    z_own = (at_own.sum() - n * p) / math.sqrt(n * p * (1 - p))
    m = n * (width - 1)
    return float(z_own), (others - m * q) / math.sqrt(m * q * (1 - q))


def cms_reports(oracle: OpenDomainCMS, text: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    reports = [oracle.perturb_string(text, SecureRandom()) for _ in range(n)]
    decoded = oracle.decode(reports)
    bits = np.unpackbits(decoded["bits"], axis=1, count=oracle.m).astype(bool)
    return decoded["j"].astype(np.int64), bits


def test_cms_one_report_has_the_exact_law(monkeypatch: pytest.MonkeyPatch) -> None:
    oracle = OpenDomainCMS(epsilon=1.0, k=8, m=32)
    scalar_only(oracle, monkeypatch)
    rows, bits = cms_reports(oracle, "not a label", 20_000)
    own = oracle.key_buckets(np.full(rows.size, item_key("not a label"), np.uint64), rows)
    z_own, z_other = bit_rates_z(bits, own, oracle.p, oracle.q)
    assert abs(z_own) < LIMIT and abs(z_other) < LIMIT, (z_own, z_other)
    assert stats.chisquare(np.bincount(rows, minlength=8)).pvalue > ALPHA
    # The own cell with q (the p-coin forgotten) is far outside: the check can fail.
    broken, _ = bit_rates_z(bits, (own + 1) % oracle.m, oracle.p, oracle.q)
    assert abs(broken) > LIMIT


def test_hcms_one_report_has_the_exact_law(monkeypatch: pytest.MonkeyPatch) -> None:
    # P[j, l, bit] = 1/(k m) times 1 - f if bit is the sign H[l, h_j(v)], else f.
    oracle = OpenDomainHCMS(epsilon=1.0, k=4, m=8)
    scalar_only(oracle, monkeypatch)
    n, key = 40_000, item_key("free text")
    reports = [oracle.perturb_string("free text", SecureRandom()) for _ in range(n)]
    j, col, bit = (np.array([r[name] for r in reports]) for name in ("j", "l", "bit"))
    cells = oracle.key_buckets(np.full(4, key, np.uint64), np.arange(4))
    sign = oracle.signs(cells[:, None], np.arange(8)[None, :]).astype(np.int64)  # (k, m)
    keep = 1.0 - oracle.flip
    expected = np.stack([np.where(sign == 0, keep, oracle.flip), np.where(sign, keep, oracle.flip)])
    counts = np.zeros((2, 4, 8))
    np.add.at(counts, (bit, j, col), 1)
    assert stats.chisquare(counts.ravel(), expected.ravel() * n / 32).pvalue > ALPHA
    flipped = expected[::-1]  # the sign's sense reversed: rejected
    assert stats.chisquare(counts.ravel(), flipped.ravel() * n / 32).pvalue < ALPHA


def test_open_domain_olh_one_report_has_the_exact_law(monkeypatch: pytest.MonkeyPatch) -> None:
    oracle = OpenDomainOLH(epsilon=1.0)
    scalar_only(oracle, monkeypatch)
    n, key = 40_000, item_key("anything")
    reports = [oracle.perturb_string("anything", SecureRandom()) for _ in range(n)]
    seeds = np.array([r["seed"] for r in reports], dtype=np.uint32)
    truth = oracle.key_buckets(np.full(n, key, np.uint64), seeds)
    offset = (np.array([r["y"] for r in reports]) - truth.astype(np.int64)) % oracle.g
    expected = np.array([oracle.p] + [oracle.q_other] * (oracle.g - 1)) * n
    assert stats.chisquare(np.bincount(offset, minlength=oracle.g), expected).pvalue > ALPHA
    assert stats.chisquare(np.bincount(seeds >> 28, minlength=16)).pvalue > ALPHA


@pytest.mark.parametrize("cls", [OptimizedUnaryEncoding, SymmetricUnaryEncoding])
def test_unary_one_report_has_the_exact_law(cls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    oracle = cls(epsilon=1.0, domain_size=16)
    scalar_only(oracle, monkeypatch)
    n = 20_000
    reports = [oracle.perturb(5, SecureRandom()) for _ in range(n)]
    bits = np.unpackbits(oracle.decode(reports)["bits"], axis=1, count=16).astype(bool)
    z_own, z_other = bit_rates_z(bits, np.full(n, 5), oracle.p, oracle.q)
    assert abs(z_own) < LIMIT and abs(z_other) < LIMIT, (z_own, z_other)
    broken, _ = bit_rates_z(bits, np.full(n, 6), oracle.p, oracle.q)
    assert abs(broken) > LIMIT


def test_a_pem_prefix_label_is_the_padded_bits_cut_at_its_length() -> None:
    chars = "ab\x7f\u00e9\u20ac\U0001f600z"
    rng = random.Random(3)
    for _ in range(200):
        value = "".join(rng.choice(chars) for _ in range(rng.randrange(0, 5)))
        if len(value.encode()) > 16:
            continue
        data = value_bytes(value, 16)
        for bits in range(1, 8 * 16 + 1):
            assert prefix_label(data, bits) == padded_bits(value, 16)[:bits], (value, bits)


@pytest.mark.parametrize("sketch", ["cms", "hcms"])
def test_pem_one_report_is_a_uniform_group_and_the_sketch_law_of_its_prefix(
    sketch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pem = PrefixExtendingMethod(epsilon=2.0, max_length=4, top_k=4, k=4, m=8, sketch=sketch)
    oracle = pem.oracle
    scalar_only(pem, monkeypatch)
    scalar_only(oracle, monkeypatch)
    n = 40_000
    reports = [pem.perturb("é!", SecureRandom()) for _ in range(n)]
    groups = np.array([r["group"] for r in reports])
    assert stats.chisquare(np.bincount(groups, minlength=pem.groups)).pvalue > ALPHA
    rows = np.array([r["j"] for r in reports])
    if isinstance(oracle, OpenDomainCMS):
        sketch_reports = [{"j": r["j"], "bits": r["bits"]} for r in reports]
        bits = np.unpackbits(oracle.decode(sketch_reports)["bits"], axis=1, count=8)
        rate = oracle.p
    else:
        assert isinstance(oracle, OpenDomainHCMS)
        columns, sent = np.array([r["l"] for r in reports]), np.array([r["bit"] for r in reports])
        rate = 1 - oracle.flip

    def support_z(value: str) -> float:
        """z of how often a report supports `value`'s prefix of its group, against `rate`."""
        keys = np.array([item_key(pem.prefix(value, g)) for g in groups.tolist()], np.uint64)
        cells = oracle.key_buckets(keys, rows)
        if isinstance(oracle, OpenDomainCMS):
            supports = bits[np.arange(n), cells].astype(bool)
        else:
            supports = oracle.signs(cells, columns) == sent.astype(bool)
        return float((supports.sum() - n * rate) / math.sqrt(n * rate * (1 - rate)))

    assert abs(support_z("é!")) < LIMIT
    assert abs(support_z("zz")) > LIMIT  # another value's prefixes: the check can fail


def test_every_key_mechanism_has_a_one_report_path() -> None:
    # perturb_key's default goes through perturb_keys (numpy's per-call overhead); the open
    # domains' key mechanisms, and the categorical sketches built on them, all override it.
    for cls in (OpenDomainCMS, OpenDomainHCMS, OpenDomainOLH, CountMeanSketch):
        assert cls.perturb_key is not KeyMechanism.perturb_key, cls
    assert HadamardCountMeanSketch.perturb_key is OpenDomainHCMS.perturb_key
