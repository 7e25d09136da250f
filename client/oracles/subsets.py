"""Exact uniform random subsets, packed as bit vectors, for many reports at once: the
fixed-up Bernoulli sampler shared by SS (a subset of k items) and unary encoding (the flipped
bits of OUE, a uniform subset of Binomial size).

Positions [0, d-1) stand for the d - 1 items other than a report's value v (position v for
item d-1, as in Floyd's sampler); the value's own bit is set last.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.randomness import Rng

#: Reports perturbed at once: 4M bits of them (Floyd's unpacked bits ~4 MB; measured best
#: at d = 1024 for both samplers).
BITS_PER_CHUNK = 1 << 22
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
OS_BYTE_COST = 3.0
#: The start probability is a / 2^b with b <= 8 (b random planes per report).
_MAX_PLANES = 8
#: Fix-up draws per round: slack * expected + extra, so that most rows finish in one round.
_DRAW_SLACK = 1.25
_DRAW_EXTRA = 3


def start_probability(
    d: int, k: int, p: float, byte_cost: float, fixed_up_only: bool = False
) -> tuple[int, int] | None:
    """(a, b) of the cheapest Bernoulli(a / 2^b) start, or None when Floyd is cheaper (never
    if fixed_up_only), given the cost of a random byte on top of numpy's (Floyd: 8 per
    step, as SecureRandom draws)."""
    words = -(-d // 64)
    floyd = _FLOYD_ITEM_COST * d + k * (
        _FLOYD_STEP_COST + _FLOYD_CALLS_COST * d / BITS_PER_CHUNK + 8 * byte_cost
    )
    draw_bytes = 2 if d <= 1 << 16 else 4
    best: tuple[float, tuple[int, int] | None] = (math.inf if fixed_up_only else floyd, None)
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


def fixed_up_subsets(
    values: NDArray[np.int64],
    include: NDArray[np.bool_],
    rng: Rng,
    d: int,
    k: int | NDArray[np.int64],
    start: tuple[int, int],
) -> NDArray[np.uint8]:
    """Packed k-subsets (k one size for all rows, or one per row): a Bernoulli start on the
    other items, fixed up to the right size.

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
    return packed.reshape(n, row_bytes)[:, : -(-d // 8)]


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
