"""Exact samplers: every random draw of the oracles, in one small vocabulary.

In the style of OpenDP's samplers (github.com/opendp/opendp, rust/src/traits/samplers): each
sampler turns uniform random words from the source (randomness.py: the OS CSPRNG on the
client, a seeded numpy Generator in simulation) into its law by integer arithmetic alone, and
its docstring states that law exactly. No floating-point value is ever sampled, so no
low-order bits can depend on a secret (Mironov, CCS 2012).

- `uniform_words` / `uniform_bytes`: the uniform bits every sampler starts from.
- `sample_uniform_below`: uniform integers in [0, upper).
- `sample_uniform_bits`: one uniform integer in [0, 2^bits), of any size.
- `sample_bernoulli`: bits that are 1 with probability exactly a float's value;
  `sample_bernoulli_words`: 64 bits per word, each 1 with probability a / 2^b.
- `TableSampler`: values of a law given by exact integer weights (the histogram grids).
- `sample_subsets`: uniform subsets of given sizes.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.randomness import Rng, secure_bytes

#: Blocks of TableSampler's guide: one 16-bit uniform picks a block.
GUIDE_BLOCKS = 1 << 16
#: Subsets of at most this many items are drawn by Floyd's algorithm (one draw per item),
#: larger ones by the fixed-up sampler (measured on SS, d = 8..256: Floyd 1.6-7x faster in
#: batches for 2 <= k <= 16; the fix-up ~2x faster per report from k ~ 30, in batches from
#: k ~ 60, and at d = 65,536, k = 17,625 one report takes 0.7 ms against Floyd's 198).
FLOYD_MAX_SIZE = 16
#: bernoulli_bits_one finds the bytes equal to the first digit with bytes.find up to this
#: many bits (16 of them expected), with numpy above.
BITS_ONE_MAX = 4096
#: bernoulli_bits_one reads size / SPARE_PER_BYTE + SPARE_BYTES bytes beyond its first
#: digits for the continuations (size / 256 expected, each mostly one byte).
SPARE_PER_BYTE = 64
SPARE_BYTES = 16
#: The start of a subset: Bernoulli(a / 2^b) bits with b at most this (b random words per 64).
MAX_START_BITS = 8
#: Costs of the start's random words, of a fix-up draw and of a flip, ns (measured with the
#: OS CSPRNG, ~3 ns a random byte; with numpy's generator the chosen start was at most
#: ~1.5x slower than the best one in a sweep of SS at d = 16..65,536).
_PLANE_WORD_COST = 27.0
_DRAW_COST = 21.0
_FLIP_COST = 40.0
#: Fix-up draws per round: slack * expected + extra, so that most rows finish in one round.
_DRAW_SLACK = 1.25
_DRAW_EXTRA = 3


# -- uniform bits ---------------------------------------------------------------------------


def uniform_words(rng: Rng, size: int) -> NDArray[np.uint64]:
    """`size` independent uniform 64-bit words."""
    return rng.integers(0, 1 << 64, size, dtype=np.uint64)


def uniform_bytes(rng: Rng, size: int) -> NDArray[np.uint8]:
    """`size` independent uniform bytes."""
    return uniform_words(rng, -(-size // 8)).view(np.uint8)[:size]


def sample_uniform_below(rng: Rng, upper: int, size: int) -> NDArray[np.int64]:
    """`size` independent integers, each uniform on [0, upper) (1 <= upper <= 2^63).

    Both sources reject the words above the largest multiple of `upper` (numpy: Lemire,
    ACM TOMACS 2019; SecureRandom: plain rejection), so every value has probability exactly
    1 / upper."""
    return rng.integers(0, upper, size)


def sample_uniform_bits(rng: Rng, bits: int) -> int:
    """One integer uniform on [0, 2^bits), of any size: the leading bits of the number whose
    64-bit digits, least significant first, are fresh uniform words."""
    if bits <= 0:
        return 0
    words = uniform_words(rng, -(-bits // 64))
    value = sum(int(w) << (64 * i) for i, w in enumerate(words))
    return value >> (64 * words.size - bits)


# -- Bernoulli --------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def base256_digits(prob: float) -> tuple[int, ...]:
    """The base-256 digits after the point of prob in [0, 1), exactly: a float is a dyadic
    rational, so there are finitely many (at most 135)."""
    numerator, denominator = prob.as_integer_ratio()
    digits = []
    while numerator:
        numerator *= 256
        digits.append(numerator // denominator)
        numerator %= denominator
    return tuple(digits)


def sample_bernoulli(rng: Rng, prob: float, size: int) -> NDArray[np.bool_]:
    """`size` independent bits, each 1 with probability exactly `prob` (the float's value),
    from about 1.02 uniform bytes per bit.

    A bit is [U < prob] for a uniform U = 0.B1 B2 ... in base 256, compared one digit at a
    time with prob = 0.D1 D2 ... DL: B_j < D_j gives 1, B_j > D_j gives 0, B_j = D_j
    (probability 1/256) defers to the next byte, and equality through D_L means U >= prob.
    So P(bit = 1) = prob exactly, and for 0 < prob < 1 every pattern of bits is possible
    (a float uniform on the 2^-53 grid gives neither)."""
    if prob >= 1.0:
        return np.ones(size, dtype=bool)
    digits = base256_digits(max(prob, 0.0))
    if not digits:
        return np.zeros(size, dtype=bool)
    # Spare bytes for the later digits (~size/256 needed, 4x that is drawn), so that a small
    # batch (one report) makes one call to the source; each byte is used once.
    pool = uniform_bytes(rng, size + size // 64 + 64)
    draws, spare = pool[:size], pool[size:]
    bits = draws < digits[0]
    undecided = np.flatnonzero(draws == digits[0])
    for digit in digits[1:]:
        if not undecided.size:
            break
        if spare.size >= undecided.size:
            draws, spare = spare[: undecided.size], spare[undecided.size :]
        else:
            draws = uniform_bytes(rng, undecided.size)
        bits[undecided[draws < digit]] = True
        undecided = undecided[draws == digit]
    return bits


def bernoulli_one(prob: float) -> bool:
    """One bit from the OS CSPRNG, 1 with probability exactly `prob`: sample_bernoulli's
    digit-by-digit comparison for a single draw, in Python integers (the SDK's per-report
    path, where numpy's per-call overhead is most of the cost)."""
    if prob >= 1.0:
        return True
    return _below_digits(base256_digits(max(prob, 0.0)))


def _below_digits(digits: tuple[int, ...]) -> bool:
    """[U < 0.D1 D2 ... DL] for a fresh uniform U, one OS CSPRNG byte per digit compared."""
    for digit in digits:
        byte = os.urandom(1)[0]
        if byte != digit:
            return byte < digit
    return False


def bernoulli_bits_one(prob: float, size: int) -> NDArray[np.bool_]:
    """`size` independent bits, each 1 with probability exactly `prob`, from the client's
    CSPRNG: sample_bernoulli's comparison (a byte below the first digit gives 1, above it
    0, equal continues from the second digit) with one read of `size` bytes and spare
    ones, from which the continuations take theirs in turn (each byte used once, more read
    if they run out): one report's bit vector without numpy's per-call overhead of a
    batch. The ~size / 256 bytes equal to the first digit are found by bytes.find up to
    BITS_ONE_MAX bits; above it their second digits are compared at once in numpy."""
    if prob >= 1.0:
        return np.ones(size, dtype=bool)
    digits = base256_digits(max(prob, 0.0))
    if not digits:
        return np.zeros(size, dtype=bool)
    raw = secure_bytes(size + size // SPARE_PER_BYTE + SPARE_BYTES)
    draws = np.frombuffer(raw, dtype=np.uint8, count=size)
    bits = draws < digits[0]
    if len(digits) == 1:  # equal through the last digit: U >= prob
        return bits
    spare = raw[size:]
    positions: Iterable[int]
    if size > BITS_ONE_MAX:
        undecided = np.flatnonzero(draws == digits[0])
        if len(spare) < undecided.size:
            spare = secure_bytes(undecided.size + SPARE_BYTES)
        second = np.frombuffer(spare, dtype=np.uint8, count=undecided.size)
        bits[undecided[second < digits[1]]] = True
        positions = undecided[second == digits[1]].tolist()  # ~size / 65,536
        spare, digits = spare[undecided.size :], digits[1:]
    else:
        positions = _positions(raw, digits[0], size)
    _continue_each(bits, positions, digits[1:], spare)
    return bits


def _positions(data: bytes, byte: int, end: int) -> Iterator[int]:
    """The positions of `byte` in data[:end] (bytes.find: for a few, cheaper than numpy)."""
    index = data.find(byte, 0, end)
    while index >= 0:
        yield index
        index = data.find(byte, index + 1, end)


def _continue_each(
    bits: NDArray[np.bool_], positions: Iterable[int], digits: tuple[int, ...], spare: bytes
) -> None:
    """Decide each undecided bit at `positions` from the next digit on: the next unused
    byte of `spare` (read afresh when used up) below the digit gives 1, above it 0, equal
    goes on to the following digit (equal through the last: 0, as the bit already is)."""
    used = 0
    for index in positions:
        for digit in digits:
            if used == len(spare):
                spare, used = secure_bytes(SPARE_BYTES), 0
            byte = spare[used]
            used += 1
            if byte != digit:
                bits[index] = byte < digit
                break


def uniform_below_one(upper: int) -> int:
    """One integer uniform on [0, upper) (upper >= 1) from the OS CSPRNG, exactly: the
    leading b = bit_length(upper - 1) bits of fresh bytes, rejected while >= upper (as
    secrets.randbelow, without its extra bit at a power of two, nor its Python layers)."""
    bits = (upper - 1).bit_length()
    size = (bits + 7) >> 3
    while True:
        value = int.from_bytes(os.urandom(size), "little") >> (8 * size - bits)
        if value < upper:
            return value


def sample_bernoulli_words(rng: Rng, a: int, b: int, size: int) -> NDArray[np.uint64]:
    """`size` words of independent bits, each 1 with probability a / 2^b (a odd, or b = 0)."""
    if b == 0:
        return np.full(size, 0 if a == 0 else (1 << 64) - 1, dtype=np.uint64)
    planes = uniform_words(rng, b * size).reshape(b, size)
    # Bit i of a from the lowest up: P = 1/2, then P <- (a_i + P) / 2 (OR with a fresh
    # uniform bit if a_i = 1, AND if 0), which ends at a / 2^b.
    bits: NDArray[np.uint64] = planes[b - 1]
    for i in range(1, b):
        combine = np.bitwise_or if (a >> i) & 1 else np.bitwise_and
        combine(bits, planes[b - 1 - i], out=bits)
    return bits


# -- a law of integer weights -----------------------------------------------------------------


class TableSampler:
    """Exact draws of values[c] with probability (cdf[c] - cdf[c-1]) / total, cdf the
    cumulative integer cell weights (2^32 <= total < 2^62): the value of the cell holding
    one uniform integer u in [0, 2^16 B), B = 2^s the smallest power of two with 2^16 B >=
    total, where u >= total is rejected and drawn afresh (so u is uniform on [0, total)).

    u is drawn lazily: its top 16 bits h pick one of 2^16 equal blocks [h B, h B + B). Most
    blocks lie in cells of one value, looked up in a 64K-entry guide table (cache-resident).
    Only for the others is the low part drawn and the cell found by binary search.
    `values` must lie above their dtype's minimum, which marks those blocks.
    """

    def __init__(self, cdf: NDArray[np.int64], values: NDArray[np.integer[Any]]) -> None:
        self.cdf = cdf
        self.total = int(cdf[-1])
        if not 1 << 32 <= self.total < 1 << 62:
            raise ValueError("TableSampler needs 2^32 <= total < 2^62")
        self.shift = (self.total - 1).bit_length() - 16
        self.block = 1 << self.shift
        self.values = _read_only(np.array(values))
        self.dtype = self.values.dtype
        self.unresolved = int(np.iinfo(self.dtype).min)
        if self.values.min() <= self.unresolved:
            raise ValueError("TableSampler values must lie above their dtype's minimum")
        starts = np.arange(GUIDE_BLOCKS, dtype=np.int64) * self.block
        ends = starts + (self.block - 1)
        # A block reaching past the total is unresolved: its draws may be rejected.
        inside = ends < self.total
        first = self.values[np.searchsorted(cdf, np.where(inside, starts, 0), side="right")]
        last = self.values[np.searchsorted(cdf, np.where(inside, ends, 0), side="right")]
        guide = np.where(inside & (first == last), first, self.unresolved)
        self.guide = _read_only(guide.astype(self.dtype))

    def sample(self, rng: Rng, out: NDArray[np.integer[Any]]) -> None:
        """Fill the contiguous array `out` (of dtype `self.dtype`) with independent draws."""
        if not out.flags.c_contiguous or out.dtype != self.dtype:
            raise ValueError(f"TableSampler.sample fills a contiguous {self.dtype} array")
        flat = out.reshape(-1)
        # Each word is 4 block indices.
        tops = uniform_words(rng, -(-flat.size // 4)).view(np.uint16)[: flat.size]
        # mode="clip" skips the bounds check: a 16-bit index is always in the 2^16 table.
        np.take(self.guide, tops, out=flat, mode="clip")
        unresolved = np.flatnonzero(flat == self.unresolved)
        if unresolved.size:
            flat[unresolved] = self._finish(rng, tops[unresolved].astype(np.int64))

    def _finish(self, rng: Rng, top: NDArray[np.int64]) -> NDArray[np.integer[Any]]:
        """Values for draws whose top bits lie in an unresolved block: draw the low bits."""
        low = uniform_words(rng, top.size) >> np.uint64(64 - self.shift)
        u = (top << self.shift) + low.astype(np.int64)
        kept = u < self.total
        result = np.empty(top.size, dtype=self.dtype)
        result[kept] = self.values[np.searchsorted(self.cdf, u[kept], side="right")]
        if not kept.all():
            # Fresh draws replace the rejected ones: u is uniform on [0, total) when kept.
            fresh = np.empty(top.size - int(kept.sum()), dtype=self.dtype)
            self.sample(rng, fresh)
            result[~kept] = fresh
        return result


def _read_only(array: NDArray[Any]) -> NDArray[Any]:
    array.flags.writeable = False
    return array


# -- uniform subsets ------------------------------------------------------------------------


def subset_words(n: int) -> int:
    """64-bit words per row of `sample_subsets(rng, n, ...)`: room for bits 0..n."""
    return n // 64 + 1


def sample_subsets(rng: Rng, n: int, sizes: NDArray[np.int64]) -> NDArray[np.uint8]:
    """One uniform random subset of [0, n) of each size in `sizes` (0 <= size <= n), as
    rows of bits packed like np.packbits (item i: byte i // 8, mask 128 >> i % 8) in
    `subset_words(n)` words; bit n and the ones after it are 0."""
    if sizes.size and int(sizes.max()) <= FLOYD_MAX_SIZE:
        return _floyd_subsets(rng, n, sizes)
    return _fixed_up_subsets(rng, n, sizes)


def _floyd_subsets(rng: Rng, n: int, sizes: NDArray[np.int64]) -> NDArray[np.uint8]:
    """Floyd's algorithm (Bentley & Floyd, CACM 1987): a uniform s-subset of [0, n) in s
    steps, for j = n-s .. n-1 add a uniform t in [0, j], or j itself if t is already in.
    A row of size s takes the last s of the max(sizes) steps."""
    rows, most = sizes.size, int(sizes.max())
    bits = np.zeros((rows, 64 * subset_words(n)), dtype=bool)
    flat = bits.reshape(-1)
    starts = np.arange(rows, dtype=np.int64) * bits.shape[1]
    for j in range(n - most, n):
        active = np.flatnonzero(sizes >= n - j)
        t = sample_uniform_below(rng, j + 1, active.size) + starts[active]
        # t <= row start + j, so max(t, (row start + j) * [t already in]) is Floyd's pick.
        flat[np.maximum(t, (starts[active] + j) * flat[t])] = True
    return np.packbits(bits, axis=1)


def _fixed_up_subsets(rng: Rng, n: int, sizes: NDArray[np.int64]) -> NDArray[np.uint8]:
    """Each row starts as independent Bernoulli(a / 2^b) bits on [0, n) (a / 2^b near the
    mean size / n), then is fixed up to its size by setting unset bits (or clearing set
    ones) drawn uniformly. Exact: the start's law is invariant under permutations of
    [0, n), each fix-up round is equivariant (its draws are uniform; which ones flip depends
    on bits and counts, not on labels), so the final subset's law is too: uniform among
    subsets of its size."""
    rows = sizes.size
    width = subset_words(n)
    a, b = _start_probability(n, int(sizes.sum()) / (rows * n) if rows else 0.0)
    words = sample_bernoulli_words(rng, a, b, rows * width).reshape(rows, width)
    words &= _in_range(n)
    packed = words.view(np.uint8).reshape(-1)
    selected = np.bitwise_count(words).sum(axis=1, dtype=np.int64)
    need = sizes - selected
    sentinel = np.arange(rows, dtype=np.intp) * (8 * width) + (n >> 3)
    sentinel_mask = np.uint8(128 >> (n & 7))
    adding = np.flatnonzero(need > 0)
    if adding.size:
        # Bit n is set while adding, so never eligible (draws on [n + 1, m) land on it too).
        packed[sentinel] |= sentinel_mask
        _fix_up(packed, words, adding, need[adding], n - selected[adding], True, rng, n)
        packed[sentinel] &= ~sentinel_mask
    clearing = np.flatnonzero(need < 0)
    if clearing.size:
        _fix_up(packed, words, clearing, -need[clearing], selected[clearing], False, rng, n)
    return packed.reshape(rows, 8 * width)


@functools.lru_cache(maxsize=16)
def _in_range(n: int) -> NDArray[np.uint64]:
    """The words of a row with bits 0..n-1 set."""
    bits = np.zeros(64 * subset_words(n), dtype=bool)
    bits[:n] = True
    return _read_only(np.packbits(bits).view(np.uint64))


@functools.lru_cache(maxsize=64)
def _start_probability(n: int, target: float) -> tuple[int, int]:
    """(a, b), a odd or b = 0: the start a / 2^b near `target` of least expected cost: b
    random words per 64 items, and the fix-up's flips, j of them among e eligible items
    taking ~ m ln(e / (e - j)) draws. Any start keeps the law exact; this only saves time."""
    words, m = subset_words(n), 1 << n.bit_length()
    best: tuple[float, tuple[int, int]] = (math.inf, (0, 0))
    for b in range(MAX_START_BITS + 1):
        for a in {math.floor(target * (1 << b)), math.ceil(target * (1 << b))}:
            if (b and a % 2 == 0) or not 0 <= a <= 1 << b:
                continue
            start = a / (1 << b)
            # Flips: the rounding, plus the start count's mean deviation sqrt(2/pi) sd.
            flips = n * abs(start - target) + 0.8 * math.sqrt(n * start * (1 - start))
            eligible = n * (1 - start) if start <= target else n * start
            draws = m * math.log((eligible + 0.5) / max(eligible - flips + 0.5, 0.5))
            cost = _PLANE_WORD_COST * b * words + _DRAW_COST * draws + _FLIP_COST * flips
            if cost < best[0]:
                best = (cost, (a, b) if b else (min(a, 1), 0))
    return best[1]


def _bit_masks(items: NDArray[np.integer[Any]]) -> NDArray[np.uint8]:
    """The mask of each item's bit in its byte (np.packbits' order)."""
    return np.right_shift(np.uint8(128), (items & 7).astype(np.uint8))


def _fix_up(
    packed: NDArray[np.uint8],
    words: NDArray[np.uint64],
    rows: NDArray[np.intp],
    flips: NDArray[np.int64],
    eligible: NDArray[np.int64],
    add: bool,
    rng: Rng,
    n: int,
) -> None:
    """Set (add) or clear `flips` of the `eligible` draw targets in each row of `rows`: the
    unset bits (add; the sentinel bit n is set meanwhile) or the set bits (clear).

    Each round draws positions uniform on [0, m), m = 2^ceil(log2 (n + 1)), those > n mapped
    to n, a few more per row than expected to be needed, and flips the row's eligible ones in
    draw order up to its count (repeated positions leave it short: another round).
    """
    row_bytes = 8 * words.shape[1]
    m_bits = n.bit_length()
    m = 1 << m_bits
    per_word = 4 if m_bits <= 16 else 2  # draws per 64-bit word
    while rows.size:
        draws = np.ceil(flips * (m * _DRAW_SLACK) / eligible).astype(np.intp) + _DRAW_EXTRA
        ends = np.cumsum(draws)
        total = int(ends[-1])
        drawn = uniform_words(rng, -(-total // per_word))
        t = (drawn.view(np.uint16) if per_word == 4 else drawn.view(np.uint32))[:total]
        np.bitwise_and(t, m - 1, out=t)
        np.minimum(t, n, out=t)
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
        done = selected - (n + 1 - eligible) if add else eligible - selected
        flips -= done
        eligible -= done
        left = flips > 0
        rows, flips, eligible = rows[left], flips[left], eligible[left]
