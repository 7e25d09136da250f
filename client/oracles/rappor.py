"""Full RAPPOR (Erlingsson, Pihur, Korolova, CCS 2014), with Google's reference defaults.

A client belongs to one cohort c in [0, m) for good. Its value's Bloom filter has k bits, set
at h positions: bit_j(c, value) = xxh32(le64(item_key(value)), seed = c*h + j) mod k, the
local hash of docs/protocol.md. The permanent randomized response (PRR) keeps each Bloom bit
with probability 1 - f, else sets it to 1 or 0 with probability f/2 each; it is derived from
HMAC-SHA256(client secret, value), so it is the same every time without being stored. Each
report then applies a fresh instantaneous randomized response (IRR): a PRR bit 1 is sent as 1
with probability q, a 0 with probability p.

Wire form: {"cohort": int, "bits": base64(packbits(k IRR bits))}.
The analyst decodes against the campaign's candidate labels (`fit`): per-bit unbiased counts
per cohort, a least-squares fit of the candidates' counts (non-negative, after a non-negative
LASSO selection, when the candidates are too many to identify), standard errors and a
Bonferroni-corrected significance test.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ParameterError
from ldptel.client.hashing import item_keys, lh_hash
from ldptel.client.oracles.base import (
    Field,
    FrequencyOracle,
    ReportBatch,
    WireReport,
    check_int,
    check_labels,
)
from ldptel.client.oracles.batch_decode import decode_int_field
from ldptel.client.oracles.rappor_decode import RapporFit, design_variance, fit_candidates
from ldptel.client.oracles.unary import (
    decode_bit_vectors,
    encode_bit_vectors,
    pack_bits,
    packed_width,
    unpack_bits,
)
from ldptel.client.randomness import Rng, SecureRandom, default_rng
from ldptel.client.samplers import sample_bernoulli, uniform_bytes

#: The PRR coin of bit i is a 32-bit uniform u_i; u_i < t gives 1, t <= u_i < 2t gives 0, and
#: otherwise the Bloom bit is kept, with t = round(f * 2^31): so f is used as 2t / 2^32 exactly.
_PRR_SCALE = 2**31
#: The smallest f chosen from epsilon (its permanent bound, 2h ln(63), is already weak).
MIN_DEFAULT_F = 1 / 32
#: Rows of reports unpacked at once when counting.
_CHUNK_ROWS = 1 << 18


def _probability(value: object, name: str, upper_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
        raise ParameterError(name, f"must be a number, got {type(value).__name__}")
    number = float(value)
    top = "1)" if upper_open else "1]"
    if not (0.0 <= number <= 1.0) or (upper_open and number >= 1.0):
        raise ParameterError(name, f"must be in [0, {top}, got {number!r}")
    return number


def binomial_pmf(trials: int, p: float) -> NDArray[np.float64]:
    """pmf[s, a] = P[Binomial(s, p) = a] = C(s, a) p^a (1-p)^(s-a) for 0 <= s, a <= trials
    (0 where a > s), from exact binomial coefficients."""
    s = np.arange(trials + 1)[:, None]
    a = np.arange(trials + 1)[None, :]
    comb = np.array([[math.comb(i, j) for j in range(trials + 1)] for i in range(trials + 1)])
    pmf = comb * np.power(p, a) * np.power(1.0 - p, np.maximum(s - a, 0))
    return np.asarray(np.where(a <= s, pmf, 0.0), dtype=np.float64)


def irr_probabilities(f: float, p: float, q: float) -> tuple[float, float]:
    """(p*, q*) = P[reported bit is 1 | Bloom bit 0], P[... | Bloom bit 1] over PRR and IRR.

    Erlingsson et al. 2014, Sec. 3.1: the PRR bit is 1 w.p. f/2 if B = 0 and 1 - f/2 if
    B = 1, then the IRR sends 1 w.p. q (PRR 1) or p (PRR 0).
    """
    return (f / 2) * q + (1 - f / 2) * p, (1 - f / 2) * q + (f / 2) * p


def one_report_epsilon(h: int, f: float, p: float, q: float) -> float:
    """eps_1 = h ln(q*(1-p*) / (p*(1-q*))) (Erlingsson et al. 2014, Sec. 3.2): two values'
    Bloom filters differ in at most 2h bits, each worth half of the log-odds ratio."""
    p_star, q_star = irr_probabilities(f, p, q)
    if p_star <= 0.0 or q_star >= 1.0:
        return math.inf
    return h * math.log(q_star * (1 - p_star) / (p_star * (1 - q_star)))


def permanent_epsilon(h: int, f: float) -> float:
    """eps_inf = 2h ln((1 - f/2) / (f/2)): the bound for any number of reports of one value
    (Erlingsson et al. 2014, Sec. 3.2), since they all share one PRR."""
    return math.inf if f <= 0 else 2 * h * math.log((1 - f / 2) / (f / 2))


class Rappor(FrequencyOracle):
    """Full RAPPOR over a campaign's labels (see the module docstring).

    `epsilon` is the guarantee of one report; `permanent_epsilon` the bound over all reports of
    one value by one client. If f is not given it is set from the requested epsilon: the f
    (>= 1/32) whose one-report epsilon is the request, with the given h, p, q. Google's
    defaults (h=2, p=0.5, q=0.75, f=0.5) are what epsilon = 1.0743 gives (or pass f=0.5).
    An explicit f whose one-report epsilon exceeds the request is rejected.
    """

    name = "rappor"
    takes_labels = True
    exact_estimator = False

    def __init__(
        self,
        *,
        epsilon: float,
        domain_size: int,
        labels: Sequence[str] | None = None,
        k: int = 16,
        h: int = 2,
        m: int = 64,
        f: float | None = None,
        p: float = 0.5,
        q: float = 0.75,
    ) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        self.labels = check_labels(labels, self.domain_size)
        self.k = check_int(k, "k", 1, 4096)
        self.h = check_int(h, "h", 1, self.k)
        self.m = check_int(m, "m", 1, 2**16)
        self.p = _probability(p, "p")
        self.q = _probability(q, "q")
        if not self.p < self.q:
            raise ParameterError("q", f"must exceed p = {self.p}, got {self.q}")
        if f is None:
            self.f = self._default_f()
        else:
            self.f = self._quantized_f(_probability(f, "f", upper_open=True))
            if self.epsilon > self.requested_epsilon * (1 + 1e-12):
                raise ParameterError(
                    "epsilon",
                    f"RAPPOR with h={self.h}, f={self.f}, p={self.p}, q={self.q} gives "
                    f"{self.epsilon:.6g} per report, more than the requested "
                    f"{self.requested_epsilon:.6g}; raise f or lower h",
                )
        self.p_star, self.q_star = irr_probabilities(self.f, self.p, self.q)
        self.fields = (Field("cohort", "<u4"), Field("bits", "u1", packed_width(self.k)))
        self.audit_event_count = (self.h + 1) ** 4
        self._bloom: NDArray[np.int64] | None = None
        #: The last fit and its inputs: `estimate` and a caller wanting the standard errors
        #: and significance of the same support then decode once.
        self._last_fit: tuple[tuple[bytes, float, bool | None], RapporFit] | None = None

    # -- parameters and privacy --------------------------------------------------------------
    def fixed_params(self) -> dict[str, Any]:
        # f is derived from each level's epsilon unless the config fixes it.
        return {"k": self.k, "h": self.h, "m": self.m, "p": self.p, "q": self.q}

    def derived_params(self) -> dict[str, Any]:
        return {"f": self.f}  # a multiple of 2^-31 (prr_threshold / 2^31): exact in JSON

    @staticmethod
    def _quantized_f(f: float, up: bool = False) -> float:
        threshold = math.ceil(f * _PRR_SCALE) if up else round(f * _PRR_SCALE)
        return min(threshold, _PRR_SCALE - 1) / _PRR_SCALE

    def _default_f(self) -> float:
        # eps_1 decreases in f (more PRR noise): bisect for eps_1(f) = requested on
        # [MIN_DEFAULT_F, 1), rounding f up so that eps_1 never exceeds the request.
        if math.isclose(one_report_epsilon(self.h, 0.5, self.p, self.q), self.requested_epsilon):
            return 0.5  # Google's default, exactly
        if one_report_epsilon(self.h, MIN_DEFAULT_F, self.p, self.q) <= self.requested_epsilon:
            return MIN_DEFAULT_F
        low, high = MIN_DEFAULT_F, 1.0
        for _ in range(80):
            mid = (low + high) / 2
            if one_report_epsilon(self.h, mid, self.p, self.q) > self.requested_epsilon:
                low = mid
            else:
                high = mid
        return self._quantized_f(high, up=True)

    @property
    def epsilon(self) -> float:
        """One report's epsilon, from the actual h, f, p, q."""
        return one_report_epsilon(self.h, self.f, self.p, self.q)

    @property
    def permanent_epsilon(self) -> float:
        """The bound over any number of reports of one value by one client."""
        return permanent_epsilon(self.h, self.f)

    @property
    def prr_threshold(self) -> int:
        """t: a PRR coin u (uniform 32 bits) gives 1 if u < t, 0 if t <= u < 2t, else B."""
        return round(self.f * _PRR_SCALE)

    # -- Bloom filters -------------------------------------------------------------------------
    def bloom_indices(self, labels: Sequence[str] | None = None) -> NDArray[np.int64]:
        """(m, len(labels), h) Bloom bit positions of each label in each cohort."""
        keys = item_keys(self.labels if labels is None else labels)
        seeds = np.arange(self.m * self.h, dtype=np.uint32).reshape(self.m, 1, self.h)
        hashes = lh_hash(keys[None, :, None], seeds)
        return (hashes % np.uint32(self.k)).astype(np.int64)

    @property
    def bloom(self) -> NDArray[np.int64]:
        """bloom_indices of the campaign's labels (computed once)."""
        if self._bloom is None:
            self._bloom = self.bloom_indices()
        return self._bloom

    def bloom_bits(self, cohorts: NDArray[np.int64], values: NDArray[np.int64]) -> NDArray[Any]:
        """(n, k) 0/1 Bloom filters of values[i] in cohorts[i]."""
        bits = np.zeros((values.size, self.k), dtype=np.uint8)
        bits[np.arange(values.size)[:, None], self.bloom[cohorts, values]] = 1
        return bits

    def design(self) -> NDArray[np.float64]:
        """(m * k, d) 0/1 matrix: row c * k + j is 1 where candidate v sets bit j in cohort c."""
        out = np.zeros((self.m, self.domain_size, self.k))
        cohort = np.arange(self.m)[:, None, None]
        item = np.arange(self.domain_size)[None, :, None]
        out[cohort, item, self.bloom] = 1.0
        return out.transpose(0, 2, 1).reshape(self.m * self.k, self.domain_size)

    # -- client --------------------------------------------------------------------------------
    def irr(self, prr: NDArray[Any], rng: Rng) -> NDArray[np.uint8]:
        """Instantaneous randomized response of (n, k) PRR bits: 1 w.p. q if set, else p,
        each an exact Bernoulli draw of the float's value (no float is sampled)."""
        set_bits = prr.astype(bool)
        out = np.empty(prr.shape, dtype=np.uint8)
        out[set_bits] = sample_bernoulli(rng, self.q, int(set_bits.sum()))
        out[~set_bits] = sample_bernoulli(rng, self.p, int(set_bits.size - set_bits.sum()))
        return out

    def perturb_cohorts(
        self, values: NDArray[np.integer[Any]], cohorts: NDArray[np.integer[Any]], rng: Rng
    ) -> ReportBatch:
        """Reports of values[i] from clients of cohorts[i], each with a fresh PRR drawn from
        rng: the law of one report per client (simulation; real clients use RapporClient)."""
        bloom = self.bloom_bits(
            np.asarray(cohorts, dtype=np.int64), np.asarray(values, dtype=np.int64)
        )
        # The PRR coins of RapporClient.prr, drawn fresh: uniform 32-bit words against t, 2t.
        coins = uniform_bytes(rng, 4 * bloom.size).view("<u4").reshape(bloom.shape)
        t = self.prr_threshold
        prr = np.where(coins < t, 1, np.where(coins < 2 * t, 0, bloom))
        cohort_column = np.asarray(cohorts, dtype=np.uint32)
        return {"cohort": cohort_column, "bits": pack_bits(self.irr(prr, rng))}

    def perturb_batch(self, values: NDArray[np.integer[Any]], rng: Rng) -> ReportBatch:
        """One report per simulated client: a uniform cohort and a fresh PRR each."""
        values = np.asarray(values, dtype=np.int64)
        return self.perturb_cohorts(values, rng.integers(0, self.m, values.shape), rng)

    def client(self, secret: bytes, cohort: int) -> RapporClient:
        """The stateful client of one user (its secret and cohort persist on the device)."""
        return RapporClient(self, secret, cohort)

    # -- wire ----------------------------------------------------------------------------------
    def encode(self, batch: ReportBatch) -> list[WireReport]:
        texts = encode_bit_vectors(batch["bits"])
        return [
            {"cohort": c, "bits": t} for c, t in zip(batch["cohort"].tolist(), texts, strict=True)
        ]

    def decode(self, reports: object) -> ReportBatch:
        packed = decode_bit_vectors(reports, self.k, "bits")  # also checks the report objects
        return {"cohort": decode_int_field(reports, "cohort", self.m), "bits": packed}

    # -- aggregator ----------------------------------------------------------------------------
    @property
    def support_size(self) -> int:
        # Per (cohort, bit) counts of set bits, then per-cohort report counts.
        return self.m * self.k + self.m

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        cohorts = batch["cohort"].astype(np.int64)
        bit_totals = np.zeros(self.m * self.k, dtype=np.int64)
        for start in range(0, cohorts.size, _CHUNK_ROWS):
            rows = slice(start, start + _CHUNK_ROWS)
            bits = unpack_bits(batch["bits"][rows], self.k).astype(bool)
            cells = cohorts[rows, None] * self.k + np.arange(self.k)
            bit_totals += np.bincount(cells[bits], minlength=self.m * self.k)
        return np.concatenate([bit_totals, np.bincount(cohorts, minlength=self.m)])

    def bit_estimates(
        self, support: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
        """Per (cohort, bit): the unbiased count of reports whose Bloom bit is set, its
        (plug-in) variance, and per cohort the number of reports N_c.

        E[Y] = t q* + (N - t) p*, so t~ = (Y - N p*) / (q* - p*) and
        Var[t~] = (t q*(1-q*) + (N-t) p*(1-p*)) / (q*-p*)^2, with t clipped to [0, N].
        """
        support = np.asarray(support, dtype=np.int64)
        ones = support[: self.m * self.k].reshape(self.m, self.k).astype(np.float64)
        reports = support[self.m * self.k :]
        n_c = reports[:, None].astype(np.float64)
        gap = self.q_star - self.p_star
        counts = (ones - n_c * self.p_star) / gap
        t = np.clip(counts, 0.0, n_c)
        spread = t * self.q_star * (1 - self.q_star) + (n_c - t) * self.p_star * (1 - self.p_star)
        return counts, spread / gap**2, reports

    def fit(
        self,
        support: NDArray[np.int64],
        alpha: float = 0.05,
        lasso: bool | None = None,
    ) -> RapporFit:
        """Decode the candidates' counts (see RapporFit), testing each at level alpha / d.
        `lasso` (select candidates first) defaults to True when there are more candidates
        than a quarter of the (cohort, bit) cells."""
        key = (np.asarray(support, dtype=np.int64).tobytes(), alpha, lasso)
        last = self._last_fit
        if last is not None and last[0] == key:
            return last[1]
        result = fit_candidates(self, support, alpha, lasso)
        self._last_fit = (key, result)
        return result

    def privacy_summary(self) -> dict[str, float]:
        """The parameters actually used and both guarantees, for the analyst."""
        return {
            "epsilon": self.epsilon,
            "permanent_epsilon": self.permanent_epsilon,
            **{name: getattr(self, name) for name in ("k", "h", "m", "f", "p", "q")},
        }

    def estimate(self, support: NDArray[np.int64], n: int) -> NDArray[np.float64]:
        # Least squares when every candidate is identifiable (unbiased given the cohort sizes);
        # else the non-negative fit, which shrinks rare candidates to 0: not exactly unbiased
        # either way (exact_estimator = False). Use `fit` for standard errors and significance.
        return self.fit(support).estimate.copy()  # the fit stays cached unchanged

    def variance(
        self, n: int, frequencies: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64]:
        """Approximate variance of the unconstrained least-squares fit on all candidates,
        with n/m reports per cohort; infinite when the design cannot separate them."""
        return design_variance(self, n, frequencies)

    # -- privacy audit -------------------------------------------------------------------------
    # The likelihood ratio of a report (c, bits) between inputs low and high depends only on
    # s_low = |B_c(low) \ B_c(high)|, s_high = |B_c(high) \ B_c(low)| and the numbers a, b of
    # reported ones on those two sets of positions; the event is (s_low, s_high, a, b).
    def _pair_masks(self, value: int, other: int) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        low, high = min(value, other), max(value, other)
        filters = np.zeros((self.m, 2, self.k), dtype=bool)
        cohorts = np.arange(self.m)[:, None]
        filters[cohorts, 0, self.bloom[:, low]] = True
        filters[cohorts, 1, self.bloom[:, high]] = True
        return filters[:, 0] & ~filters[:, 1], filters[:, 1] & ~filters[:, 0]

    def _event_index(
        self, s_low: NDArray[np.int64], s_high: NDArray[np.int64], a: Any, b: Any
    ) -> Any:
        base = self.h + 1
        return ((s_low * base + s_high) * base + a) * base + b

    def audit_events(self, batch: ReportBatch, value: int, other: int) -> NDArray[np.int64]:
        only_low, only_high = self._pair_masks(value, other)
        cohorts = batch["cohort"].astype(np.int64)
        bits = unpack_bits(batch["bits"], self.k).astype(bool)
        a = (bits & only_low[cohorts]).sum(axis=1)
        b = (bits & only_high[cohorts]).sum(axis=1)
        s_low, s_high = only_low.sum(axis=1)[cohorts], only_high.sum(axis=1)[cohorts]
        return np.asarray(self._event_index(s_low, s_high, a, b), dtype=np.int64)

    def audit_probabilities(self, value: int, other: int) -> NDArray[np.float64]:
        only_low, only_high = self._pair_masks(value, other)
        # The true value's own positions report 1 w.p. q*, the other value's w.p. p*.
        p_low, p_high = (self.q_star, self.p_star) if value < other else (self.p_star, self.q_star)
        base = self.h + 1
        # Cohorts with the same (s_low, s_high) have the same event law: weigh it by their share.
        pattern = only_low.sum(axis=1) * base + only_high.sum(axis=1)
        share = np.bincount(pattern, minlength=base * base).reshape(base, base) / self.m
        law_low, law_high = binomial_pmf(self.h, p_low), binomial_pmf(self.h, p_high)
        # Event (s_low, s_high, a, b), in _event_index order: share * P[a | s_low] * P[b | s_high].
        probabilities = (
            share[:, :, None, None] * law_low[:, None, :, None] * law_high[None, :, None, :]
        )
        return np.asarray(probabilities.reshape(-1), dtype=np.float64)


class RapporClient:
    """One user's RAPPOR state: a secret (>= 16 bytes, kept on the device) and a cohort.

    The PRR of a value is derived from HMAC-SHA256(secret, value), so repeated reports of one
    value share it (the permanent bound holds) although it is never stored; each report's IRR
    is fresh from the OS CSPRNG. Use one secret per user and campaign.
    """

    def __init__(self, oracle: Rappor, secret: bytes, cohort: int) -> None:
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise ParameterError("secret", "must be at least 16 bytes")
        self.oracle = oracle
        self.secret = secret
        self.cohort = check_int(cohort, "cohort", 0, oracle.m - 1)

    @classmethod
    def create(cls, oracle: Rappor) -> RapporClient:
        """A new user: a 32-byte secret and a uniform cohort, both from the OS CSPRNG."""
        cohort = int(SecureRandom().integers(0, oracle.m, 1)[0])
        return cls(oracle, os.urandom(32), cohort)

    def prr_coins(self, label: str) -> NDArray[np.uint32]:
        """k uniform 32-bit words: HMAC-SHA256(secret, be32(i) || utf8(label)) for blocks
        i = 0, 1, ..., concatenated and read as big-endian words."""
        message = label.encode("utf-8")
        blocks = -(-4 * self.oracle.k // 32)
        stream = b"".join(
            hmac.new(self.secret, i.to_bytes(4, "big") + message, hashlib.sha256).digest()
            for i in range(blocks)
        )
        return np.frombuffer(stream, dtype=">u4")[: self.oracle.k].astype(np.uint32)

    def prr(self, value: int) -> NDArray[np.uint8]:
        """The permanent randomized response of a value (the same on every call)."""
        oracle = self.oracle
        bloom = oracle.bloom_bits(np.array([self.cohort]), np.array([value]))[0]
        coins = self.prr_coins(oracle.labels[value]).astype(np.int64)
        t = oracle.prr_threshold
        return np.where(coins < t, 1, np.where(coins < 2 * t, 0, bloom)).astype(np.uint8)

    def report(self, value: int, rng: Rng | None = None) -> WireReport:
        """One report of the value (an index into the campaign's labels)."""
        oracle = self.oracle
        value = check_int(value, "value", 0, oracle.domain_size - 1)
        irr = oracle.irr(self.prr(value)[None, :], rng or default_rng())
        batch: ReportBatch = {
            "cohort": np.array([self.cohort], dtype=np.uint32),
            "bits": pack_bits(irr),
        }
        return oracle.encode(batch)[0]
