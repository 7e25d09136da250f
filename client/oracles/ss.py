"""Subset Selection (Ye & Barg, IEEE Trans. IT 2018; Wang et al., arXiv:1602.07387, 2016).

A report is a subset of k of the d items that contains the true value with probability
p = k e^eps / (k e^eps + d - k); the rest of the subset is uniform among the other items.
Wire form: {"bits": base64(packbits(d bits))}, bit i set iff item i is in the subset, exactly
k bits set (docs/protocol.md). A fixed d-bit vector beats a list of k indices in JSON unless
e^eps > ~25, and makes validation and support a vectorized popcount / column sum.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.errors import ReportError
from ldptel.client.oracles.base import (
    Field,
    PureOracle,
    ReportBatch,
    WireReport,
    check_int,
)
from ldptel.client.oracles.unary import (
    BYTE_BITS,
    bit_counts,
    decode_bit_vectors,
    encode_bit_vectors,
    pack_bits,
    packed_width,
)
from ldptel.client.randomness import Rng, SecureRandom

#: Reports perturbed at once: 4M bits of them (Floyd's unpacked bits ~4 MB; measured best
#: at d = 1024 for both samplers).
_BITS_PER_CHUNK = 1 << 22
#: Floyd's draws are 32-bit words (numpy draws them at half the cost of a double).
_WORD = 1 << 32
#: Sampler cost model, ns per report (numpy's generator on the dev machine, d = 16..16384):
#: a Floyd step (+ ~6 us of numpy calls per step and chunk), an item (Floyd's zeroing and
#: packing), a start word per random plane, a start word, a fix-up draw, and the fixed part
#: of the Bernoulli sampler.
_FLOYD_STEP_COST = 12.0
_FLOYD_CALLS_COST = 6000.0
_FLOYD_ITEM_COST = 0.15
_PLANE_WORD_COST = 6.0
_WORD_COST = 3.0
_DRAW_COST = 15.0
_START_COST = 150.0
#: A byte of os.urandom (SecureRandom), ns.
_OS_BYTE_COST = 3.0
#: The start probability is a / 2^b with b <= 8 (b random planes per report).
_MAX_PLANES = 8
#: Fix-up draws per round: slack * expected + extra, so that most rows finish in one round.
_DRAW_SLACK = 1.25
_DRAW_EXTRA = 3


def default_subset_size(domain_size: int, epsilon: float) -> int:
    """k = max(1, round(d / (e^eps + 1))), the size minimizing the variance (Wang et al. 2016)."""
    return max(1, min(domain_size - 1, round(domain_size / (math.exp(epsilon) + 1))))


def item_bits(packed: NDArray[np.uint8], item: int) -> NDArray[np.int64]:
    """Bit `item` of each packed row (MSB-first packing)."""
    column = packed[:, item >> 3].astype(np.int64)
    return (column >> (7 - (item & 7))) & 1


class SubsetSelection(PureOracle):
    """k-subset mechanism: P[subset S | v] is p / C(d-1, k-1) if v in S else
    (1-p) / C(d-1, k), whose ratio over two inputs is at most e^eps."""

    name = "ss"
    audit_event_count = 4

    def __init__(self, *, epsilon: float, domain_size: int, k: int | None = None) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        d = self.domain_size
        self.k = (
            default_subset_size(d, self.requested_epsilon)
            if k is None
            else check_int(k, "k", 1, d - 1)
        )
        e = math.exp(self.requested_epsilon)
        self.p = self.k * e / (self.k * e + d - self.k)
        self.fields = (Field("bits", "u1", packed_width(d)),)

    # Bernoulli(a / 2^b) start of the fixed-up sampler, or None for Floyd's: with numpy's
    # generator, and with the OS's (random bytes cost more than numpy's arithmetic).
    # Computed on first use (~0.5 ms each).
    @functools.cached_property
    def _start(self) -> tuple[int, int] | None:
        return _start_probability(self.domain_size, self.k, self.p, 0.0)

    @functools.cached_property
    def _secure_start(self) -> tuple[int, int] | None:
        return _start_probability(self.domain_size, self.k, self.p, _OS_BYTE_COST)

    @property
    def epsilon(self) -> float:
        # Ratio of the two subset probabilities above: p/(1-p) * C(d-1,k)/C(d-1,k-1)
        # = p/(1-p) * (d-k)/k, which is e^eps for the p chosen.
        d, k, p = self.domain_size, self.k, self.p
        return math.log(p / (1 - p) * (d - k) / k)

    @property
    def p_star(self) -> float:
        return self.p

    @property
    def q_star(self) -> float:
        # An item other than the true one is in S with probability
        # p (k-1)/(d-1) (true value in S, k-1 others) + (1-p) k/(d-1) (true value not in S).
        d, k, p = self.domain_size, self.k, self.p
        return (p * (k - 1) + (1 - p) * k) / (d - 1)

    def perturb_batch(self, values: NDArray[np.integer[Any]], rng: Rng) -> ReportBatch:
        items = np.asarray(values, dtype=np.int64)
        d, width = self.domain_size, self.fields[0].width
        rows = max(1, _BITS_PER_CHUNK // d)
        start = self._secure_start if isinstance(rng, SecureRandom) else self._start
        if start is None:
            chunks = [
                self._floyd_chunk(items[first : first + rows], rng)
                for first in range(0, items.size, rows)
            ]
            packed = np.concatenate(chunks) if chunks else np.empty((0, width))
            return {"bits": packed.astype(np.uint8)}
        # Written in place: joining copies faults in fresh pages (measured up to 1.4x slower).
        packed = np.empty((items.size, width), dtype=np.uint8)
        for first in range(0, items.size, rows):
            chunk = items[first : first + rows]
            include = rng.random(chunk.size) < self.p
            packed[first : first + chunk.size] = _fixed_up_subsets(
                chunk, include, rng, d, self.k, start
            )
        return {"bits": packed}

    def _floyd_chunk(self, values: NDArray[np.int64], rng: Rng) -> NDArray[np.uint8]:
        n, d, k = values.size, self.domain_size, self.k
        others = d - 1
        include = rng.random(n) < self.p
        # Floyd's algorithm (Bentley & Floyd, CACM 1987) draws a uniform m-subset of
        # [0, N), N = d-1, in m steps: for j = N-m .. N-1, add a uniform t in [0, j], or j
        # itself if t is already in. Rows needing k others start one step before the rows
        # whose k-th slot is the true value. Any bijection from [0, N) onto the items other
        # than v keeps the subset uniform: i -> i, except v -> d-1 (fixed up at the end),
        # which saves the per-step order-preserving map i -> i + (i >= v).
        # One block of words for all steps (one CSPRNG call per report on the client).
        first = others - k
        words, per_value = _draw_words(np.arange(first + 1, others + 1), n, rng)
        bits = np.zeros(n * d, dtype=np.uint8)
        # Row r's bits are bits[r d : (r+1) d]: flat indices make every step 1-d gathers
        # and scatters (2-d fancy indexing costs several times more).
        starts = np.arange(n, dtype=np.intp) * d
        member = np.empty(n, dtype=np.intp)
        t = np.empty(n, dtype=np.intp)
        excluded = np.flatnonzero(~include)
        bits[words[0, excluded] // per_value[0] + starts[excluded]] = 1
        cursor = starts + first
        for step in range(1, k):
            cursor += 1
            np.floor_divide(words[step], per_value[step], out=t)
            t += starts
            # t <= cursor = row start + j, so max(t, cursor * [t already in]) is Floyd's pick.
            np.multiply(bits[t], cursor, out=member)
            np.maximum(t, member, out=t)
            bits[t] = 1
        # Other-item index v stands for item d-1; then the true value's own bit.
        value_bits = starts + values
        bits[starts + others] = bits[value_bits]
        bits[value_bits] = include
        return pack_bits(bits.reshape(n, d))

    def encode(self, batch: ReportBatch) -> list[WireReport]:
        return [{"bits": text} for text in encode_bit_vectors(batch["bits"])]

    def decode(self, reports: object) -> ReportBatch:
        packed = decode_bit_vectors(reports, self.domain_size, "bits")
        set_bits = BYTE_BITS.sum(axis=1)[packed].sum(axis=1)
        wrong = np.flatnonzero(set_bits != self.k)
        if wrong.size:
            raise ReportError("bits", f"must have exactly k = {self.k} bits set", int(wrong[0]))
        return {"bits": packed}

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        return bit_counts(batch["bits"], self.domain_size)

    def audit_events(self, batch: ReportBatch, value: int, other: int) -> NDArray[np.int64]:
        # Events: (lower item in S, higher item in S); the likelihood ratio of a subset
        # depends only on these two memberships.
        low, high = min(value, other), max(value, other)
        packed = batch["bits"]
        return 2 * item_bits(packed, low) + item_bits(packed, high)

    def audit_probabilities(self, value: int, other: int) -> NDArray[np.float64]:
        d, k, p = self.domain_size, self.k, self.p
        both = p * (k - 1) / (d - 1)
        only_value = p * (d - k) / (d - 1)
        only_other = (1 - p) * k / (d - 1)
        neither = (1 - p) * (d - 1 - k) / (d - 1)
        only_low, only_high = (
            (only_value, only_other) if value < other else (only_other, only_value)
        )
        return np.array([neither, only_high, only_low, both])


def _draw_words(
    bounds: NDArray[np.int64], n: int, rng: Rng
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """32-bit words for n uniform draws on [0, m) per bound m, and each m's bucket width q.

    floor(w / q) with q = floor(2^32 / m) is exactly uniform on [0, m) for a uniform word
    w < q m; the rare words above (probability < m / 2^32) are redrawn.
    """
    words = rng.integers(0, _WORD, (bounds.size, n))
    per_value = _WORD // bounds
    limit = (per_value * bounds)[:, None]
    while (words >= limit).any():
        rejected = np.nonzero(words >= limit)
        words[rejected] = rng.integers(0, _WORD, rejected[0].size)
    return words, per_value


def _start_probability(d: int, k: int, p: float, byte_cost: float) -> tuple[int, int] | None:
    """(a, b) of the cheapest Bernoulli(a / 2^b) start, or None when Floyd is cheaper, given
    the cost of a random byte on top of numpy's (Floyd: 8 per step, as SecureRandom draws)."""
    words = -(-d // 64)
    floyd = _FLOYD_ITEM_COST * d + k * (
        _FLOYD_STEP_COST + _FLOYD_CALLS_COST * d / _BITS_PER_CHUNK + 8 * byte_cost
    )
    draw_bytes = 2 if d <= 1 << 16 else 4
    best: tuple[float, tuple[int, int] | None] = (floyd, None)
    target = k / (d - 1)
    for b in range(_MAX_PLANES + 1):
        scale = 1 << b
        for a in sorted({math.floor(target * scale), math.ceil(target * scale)}):
            if (b and a % 2 == 0) or not 0 <= a <= scale:
                continue
            draws = _expected_draws(d, k, p, a / scale)
            cost = (
                _START_COST
                + (_WORD_COST + (_PLANE_WORD_COST + 8 * byte_cost) * b) * words
                + (_DRAW_COST + draw_bytes * _DRAW_SLACK * byte_cost) * draws
            )
            if cost < best[0]:
                best = (cost, (a, b))
    return best[1]


def _expected_draws(d: int, k: int, p: float, start: float) -> float:
    """Expected fix-up draws per report from a Bernoulli(start) start: the start count is
    about normal, and j flips among e eligible of m candidates take ~ m ln(e / (e - j))."""
    others = d - 1
    m = 1 << others.bit_length()
    z = np.linspace(-6.0, 6.0, 241)
    weight = np.exp(-z * z / 2)
    selected = np.clip(others * start + math.sqrt(others * start * (1 - start)) * z, 0, others)
    total = 0.0
    for target, share in ((k, 1 - p), (k - 1, p)):
        eligible = np.where(target > selected, others - selected, selected)
        flips = np.abs(target - selected)
        draws = m * np.log((eligible + 0.5) / (eligible - flips + 0.5))
        total += share * float(weight @ draws) / float(weight.sum())
    return total


def _fixed_up_subsets(
    values: NDArray[np.int64],
    include: NDArray[np.bool_],
    rng: Rng,
    d: int,
    k: int,
    start: tuple[int, int],
) -> NDArray[np.uint8]:
    """Packed k-subsets: a Bernoulli start on the other items, fixed up to the right size.

    As in Floyd, positions [0, d-1) are the other items (position v stands for item d-1).
    Exact: the start law is invariant under permutations of those d-1 positions, each fix-up
    round is equivariant (uniform draws; which flip depends on bits and counts, not on
    labels), and every row ends with k - include of them: a uniform (k - include)-subset.
    """
    n, others = values.size, d - 1
    width = -(-d // 64)
    row_bytes = 8 * width
    words = _bernoulli_words(rng, *start, n * width).reshape(n, width)
    in_range = np.zeros(64 * width, dtype=bool)
    in_range[:others] = True
    words &= np.packbits(in_range).view(np.uint64)
    packed = words.view(np.uint8).reshape(-1)
    selected = np.bitwise_count(words).sum(axis=1, dtype=np.int64)
    need = k - include - selected
    base = np.arange(n, dtype=np.intp) * row_bytes
    sentinel = base + (others >> 3)
    sentinel_mask = np.uint8(128 >> (others & 7))
    rows = np.flatnonzero(need > 0)
    if rows.size:
        # Item d-1 set while adding: never eligible (the draws on [d, m) land on it too).
        packed[sentinel] |= sentinel_mask
        _fix_up(packed, words, rows, need[rows], others - selected[rows], True, rng, d)
        packed[sentinel] &= ~sentinel_mask
    rows = np.flatnonzero(need < 0)
    if rows.size:
        _fix_up(packed, words, rows, -need[rows], selected[rows], False, rng, d)
    # Position v's bit goes to item d-1; then v's own bit.
    value_byte = base + (values >> 3)
    value_mask = _bit_masks(values)
    packed[sentinel] |= sentinel_mask * ((packed[value_byte] & value_mask) != 0)
    packed[value_byte] = (packed[value_byte] & ~value_mask) | (value_mask * include)
    return packed.reshape(n, row_bytes)[:, : packed_width(d)]


def _bernoulli_words(rng: Rng, a: int, b: int, size: int) -> NDArray[np.uint64]:
    """size words of independent Bernoulli(a / 2^b) bits (a odd, or b = 0)."""
    if b == 0:
        return np.full(size, 0 if a == 0 else (1 << 64) - 1, dtype=np.uint64)
    planes = rng.integers(0, 1 << 64, (b, size), dtype=np.uint64)
    # Bit i of a from the lowest up: P = 1/2, then P <- (a_i + P) / 2 (OR with a fresh
    # uniform bit if a_i = 1, AND if 0), which ends at a / 2^b.
    bits: NDArray[np.uint64] = planes[b - 1]
    for i in range(1, b):
        combine = np.bitwise_or if (a >> i) & 1 else np.bitwise_and
        combine(bits, planes[b - 1 - i], out=bits)
    return bits


def _bit_masks(items: NDArray[np.integer[Any]]) -> NDArray[np.uint8]:
    """The mask of each item's bit in its byte (MSB-first packing)."""
    return np.right_shift(np.uint8(128), (items & 7).astype(np.uint8))


def _fix_up(
    packed: NDArray[np.uint8],
    words: NDArray[np.uint64],
    rows: NDArray[np.intp],
    flips: NDArray[np.int64],
    eligible: NDArray[np.int64],
    add: bool,
    rng: Rng,
    d: int,
) -> None:
    """Set (add) or clear `flips` of the `eligible` draw targets in each row of `rows`: the
    unset bits (add; the sentinel d-1 is set meanwhile) or the set bits (clear).

    Each round draws positions uniform on [0, m), m = 2^ceil(log2 d), those >= d mapped to
    d-1, a few more per row than expected to be needed, and flips the row's eligible ones in
    draw order up to its count (repeated positions leave it short: another round).
    """
    row_bytes = 8 * words.shape[1]
    m_bits = (d - 1).bit_length()
    m = 1 << m_bits
    per_word = 4 if m_bits <= 16 else 2  # draws per 64-bit word
    while rows.size:
        draws = np.ceil(flips * (m * _DRAW_SLACK) / eligible).astype(np.intp) + _DRAW_EXTRA
        ends = np.cumsum(draws)
        total = int(ends[-1])
        words_drawn = rng.integers(0, 1 << 64, -(-total // per_word), dtype=np.uint64)
        t = (words_drawn.view(np.uint16) if per_word == 4 else words_drawn.view(np.uint32))[:total]
        np.bitwise_and(t, m - 1, out=t)
        if m > d:
            np.minimum(t, d - 1, out=t)
        mask = _bit_masks(t)
        byte = np.repeat(rows * row_bytes, draws)
        byte += t >> 3
        hit = packed[byte] & mask
        ok = hit == 0 if add else hit != 0
        # The first min(found, flips) eligible draws of each row, among all eligible ones.
        found = np.add.reduceat(ok, ends - draws, dtype=np.intp)
        cut = np.minimum(found, flips)
        taken = np.cumsum(cut)
        shift = np.repeat(np.cumsum(found) - found - taken + cut, cut)
        chosen = np.flatnonzero(ok)[np.arange(int(taken[-1])) + shift]
        byte, mask = byte.take(chosen), mask.take(chosen)
        # A buffered write keeps one of several writes to a byte: redo the lost ones.
        while byte.size:
            if add:
                packed[byte] |= mask
                lost = np.flatnonzero((packed[byte] & mask) == 0)
            else:
                packed[byte] &= ~mask
                lost = np.flatnonzero(packed[byte] & mask)
            byte, mask = byte.take(lost), mask.take(lost)
        selected = np.bitwise_count(words[rows]).sum(axis=1, dtype=np.int64)
        done = selected - (d - eligible) if add else eligible - selected
        flips -= done
        eligible -= done
        left = flips > 0
        rows, flips, eligible = rows[left], flips[left], eligible[left]
