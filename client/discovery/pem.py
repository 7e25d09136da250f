"""Heavy hitters of an open domain of strings, with no candidate list: the Prefix Extending
Method (PEM; Wang, Li, Jha, "Locally Differentially Private Heavy Hitter Identification",
IEEE TDSC 2019, arXiv:1708.06674, Sec. 5) with Apple's count mean sketch as the frequency
oracle of each group ("Learning with Privacy at Scale", 2017), so that each group's state is
the sketch's integer counts, which add across shards and batches.

Values: a value is a string whose UTF-8 has at most `max_length` bytes and no NUL; it is
read as the bit string of its UTF-8 bytes, zero-padded to 8 max_length bits. Its prefix of s
bits is written as the s characters '0'/'1' (the prefix's *label*); a sketch hashes a label
like any other string (item_key, docs/protocol.md).

Client: draw a group g uniformly from [0, G) (independent of the value) and report the
prefix of s_g bits through the group's sketch oracle: s_g = min(8 max_length,
gamma + (g + 1) eta), gamma = ceil(log2 top_k), eta = `step_bits` (paper, Sec. 5: the
first group already extends the gamma bits that index the top_k candidates by eta bits).

Server (paper, Algorithm of PEM): group 0 estimates every s_0-bit prefix; each later group
estimates the top_k prefixes of the group before it, each extended by every (s_g - s_{g-1})
bit string; the last group's candidates are whole padded values. Prefixes no value can have
(a NUL byte followed by a non-zero bit; bytes that are not a UTF-8 prefix) are skipped: this
uses only public facts about the encoding and the estimates, so it is post-processing.

Release: the last group's candidates whose estimate clears T are listed, T the threshold a
candidate no user of the group holds exceeds with probability at most alpha / C
(client/discovery/threshold.py: over the reports' randomness and a random hash family, for
any counts of the strings held up to the largest candidate's), alpha the expected number of
false discoveries asked for and C the candidates tested. Given the candidates (chosen from
the other groups, whose users are disjoint), the expected number of listed strings nobody
holds is at most alpha. Listing is post-processing of LDP output: it costs no privacy.
"""

from __future__ import annotations

import codecs
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ldptel.client.discovery.threshold import candidates_threshold
from ldptel.client.errors import ParameterError
from ldptel.client.hashing import item_key, item_keys
from ldptel.client.oracles.base import (
    Field,
    ReportBatch,
    ReportMechanism,
    WireReport,
    check_epsilon,
    check_int,
)
from ldptel.client.oracles.batch_decode import decode_int_field
from ldptel.client.oracles.cms import CountMeanSketch, OpenDomainCMS
from ldptel.client.oracles.hcms import HadamardCountMeanSketch, OpenDomainHCMS
from ldptel.client.oracles.sketch import KeySketch, SketchOracle
from ldptel.client.randomness import Rng, SecureRandom
from ldptel.client.samplers import sample_uniform_below, uniform_below_one

#: The groups' sketch of item keys (a key mechanism: prefixes have no domain list), and the
#: same sketch over a list of prefix labels (`group_oracle`: simulation and the audit).
KEY_SKETCHES: dict[str, type[KeySketch]] = {"cms": OpenDomainCMS, "hcms": OpenDomainHCMS}
SKETCHES: dict[str, type[SketchOracle]] = {
    "cms": CountMeanSketch,
    "hcms": HadamardCountMeanSketch,
}
#: The parameters a config serves each sketch (its derived_params).
SERVED = {"cms": ("p", "q"), "hcms": ("f",)}
#: Defaults: 32 candidates kept per step and one byte per step (16 groups for 16-byte
#: values); a sketch of k = 1024 rows (the fixed hash family's term is then small, see
#: KeySketch.family_variance) by m = 256 columns (the collision term (n - n_v)/(m - 1)
#: adds 1/255 per report to a variance of about 1 at epsilon 2). A campaign's window state
#: is G (k m + 1) cells of 8 bytes per shard (32 MiB at 16-byte values), linear in k; fewer
#: rows raise the release threshold (its family offset grows as k shrinks): measured at
#: n = 10^6 with 10 groups, k = 512 / 256 / 128 raised it by 3% / 9% / 24% at epsilon 2 and
#: by 13% / 38% / 85% at epsilon 4 (benchmarks/README.md, "Choosing k for a PEM campaign").
#: No smaller k was free at epsilon 4, so 1024 stays; 256 is the proposal where the state
#: matters (docs/protocol.md, "pem").
DEFAULT_TOP_K = 32
DEFAULT_STEP_BITS = 8
DEFAULT_ROWS = 1024
DEFAULT_WIDTH = 256
DEFAULT_FALSE_DISCOVERIES = 0.05
MAX_LENGTH = 1024
#: Candidates estimated in one step (top_k 2^step_bits), to bound the server's work.
MAX_CANDIDATES = 1 << 18


def value_bytes(value: str, max_length: int) -> bytes:
    """The UTF-8 bytes of a value, checked: at most max_length of them, no NUL."""
    if not isinstance(value, str):
        raise ParameterError("value", f"must be a string, got {type(value).__name__}")
    data = value.encode("utf-8")
    if len(data) > max_length:
        raise ParameterError(
            "value", f"has {len(data)} bytes of UTF-8, more than max_length = {max_length}"
        )
    if b"\0" in data:
        raise ParameterError("value", "must not contain NUL (it pads values)")
    return data


def padded_bits(value: str, max_length: int) -> str:
    """The value as 8 max_length characters '0'/'1': its UTF-8 bytes, zero-padded."""
    data = value_bytes(value, max_length)
    return "".join(f"{byte:08b}" for byte in data.ljust(max_length, b"\0"))


def prefix_label(data: bytes, bits: int) -> str:
    """padded_bits(value)[:bits] from the value's checked bytes (`value_bytes`), reading only
    the bytes the prefix covers."""
    size = -(-bits // 8)
    number = int.from_bytes(data[:size].ljust(size, b"\0"), "big")
    return format(number, f"0{8 * size}b")[:bits]


def prefix_bytes(label: str) -> tuple[bytes, str]:
    """The whole bytes of a prefix label and its remaining (fewer than 8) bits."""
    whole = len(label) // 8 * 8
    return int(label[:whole] or "0", 2).to_bytes(whole // 8, "big"), label[whole:]


def possible_prefix(label: str) -> bool:
    """Whether some value's padded bits start with this prefix: after the first NUL byte
    only zeros, and the bytes before it valid UTF-8 (a last character may be cut)."""
    data, rest = prefix_bytes(label)
    text = data.rstrip(b"\0")
    padded = len(text) < len(data)
    if b"\0" in text or (padded and "1" in rest):
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(text, final=padded)
    except UnicodeDecodeError:
        return False
    return True


def prefix_value(label: str) -> str | None:
    """The value whose whole padded bits are this label (None if no value has them)."""
    if not possible_prefix(label) or len(label) % 8:
        return None
    try:  # whole: a last character cut short is no value
        return prefix_bytes(label)[0].rstrip(b"\0").decode("utf-8")
    except UnicodeDecodeError:
        return None


def default_sketch(epsilon: float, m: int) -> str:
    """The sketch with the lower per-report variance for an item no user holds (among those
    that take this m: HCMS needs a power of two)."""
    variances = {}
    for name, cls in KEY_SKETCHES.items():
        try:
            variances[name] = cls(epsilon=epsilon, k=1, m=m).other_variance
        except ParameterError:
            continue
    if not variances:  # no sketch takes m: the first one names the fault
        return next(iter(KEY_SKETCHES))
    return min(variances, key=lambda name: variances[name])


@dataclass(frozen=True)
class Discovery:
    """The released heavy hitters: estimated counts among all n users, their standard
    errors, and the threshold they cleared (in counts among all n users)."""

    values: tuple[str, ...]
    estimate: NDArray[np.float64]
    stderr: NDArray[np.float64]
    threshold: float
    #: Expected number of listed strings that no user holds (at most; see the module doc).
    expected_false_discoveries: float
    #: Strings tested against the threshold (the last group's candidates).
    candidates: int
    n: int


class PrefixExtendingMethod(ReportMechanism):
    """PEM over a count mean sketch: the client's report, its wire and storage form, the
    window support (every group's sketch counts, then every group's report count) and the
    server's discovery.

    Privacy (Wang et al. 2019, Sec. 5, with the sketch's theorem, Apple 2017): one report
    (g, r) is epsilon-LDP against whoever sees it (collector, aggregator, network), for any
    two values v, v' of one user (strings of at most max_length bytes of UTF-8): g is drawn
    independently of the value, and given g, r is the group oracle's epsilon-LDP report of
    the s_g-bit prefix, so P[(g, r) | v] / P[(g, r) | v'] = P[r | prefix(v)] /
    P[r | prefix(v')] <= e^epsilon (= 1 when the prefixes agree). Each user reports once.
    """

    def __init__(
        self,
        *,
        epsilon: float,
        max_length: int,
        top_k: int = DEFAULT_TOP_K,
        step_bits: int = DEFAULT_STEP_BITS,
        sketch: str | None = None,
        k: int = DEFAULT_ROWS,
        m: int = DEFAULT_WIDTH,
        **served: float,
    ) -> None:
        epsilon = check_epsilon(epsilon)
        self.max_length = check_int(max_length, "max_length", 1, MAX_LENGTH)
        self.top_k = check_int(top_k, "top_k", 1)
        self.step_bits = check_int(step_bits, "step_bits", 1, 16)
        if self.top_k << self.step_bits > MAX_CANDIDATES:
            raise ParameterError(
                "top_k", f"top_k * 2^step_bits must be <= {MAX_CANDIDATES} (candidates per step)"
            )
        self.sketch = default_sketch(epsilon, m) if sketch is None else sketch
        if self.sketch not in KEY_SKETCHES:
            raise ParameterError("sketch", f"must be one of {', '.join(KEY_SKETCHES)}")
        # The sketch's probabilities as the config serves them (cms: p, q; hcms: f), else
        # derived from epsilon by the sketch; any other name is refused as the sketch over
        # labels refused it (SKETCHES: the error configs have always given).
        for name in sorted(set(served) - set(SERVED[self.sketch])):
            cls = SKETCHES[self.sketch].__name__
            raise TypeError(f"{cls}.__init__() got an unexpected keyword argument {name!r}")
        self.params: dict[str, Any] = {"epsilon": epsilon, "k": k, "m": m, **served}
        #: The sketch of every group, over the prefixes' item keys (one hash family; the
        #: groups' sketches are separate, so prefixes of different lengths never share one).
        self.oracle: KeySketch = KEY_SKETCHES[self.sketch](**self.params)
        total = 8 * self.max_length
        start = math.ceil(math.log2(self.top_k)) + self.step_bits
        #: s_g: the prefix length (bits) each group reports.
        self.lengths: tuple[int, ...] = (*range(start, total, self.step_bits), total)
        self.requested_epsilon = epsilon
        self.fields = (Field("group", "<u2"), *self.oracle.fields)

    name = "pem"

    @property
    def epsilon(self) -> float:
        """The epsilon one report guarantees (the group oracle's)."""
        return self.oracle.epsilon

    def fixed_params(self) -> dict[str, Any]:
        return {
            "top_k": self.top_k,
            "step_bits": self.step_bits,
            "sketch": self.sketch,
            "k": self.params["k"],
            "m": self.params["m"],
        }

    def derived_params(self) -> dict[str, Any]:
        """The group sketch's probabilities (cms: p, q; hcms: f), served with the config."""
        return self.oracle.derived_params()

    @property
    def groups(self) -> int:
        return len(self.lengths)

    def group_oracle(self, labels: Sequence[str]) -> SketchOracle:
        """The groups' sketch oracle with these prefix labels as its domain (simulation and
        the privacy audit); its hashes depend on a label only, so any instance estimates any
        label."""
        return SKETCHES[self.sketch](domain_size=len(labels), labels=labels, **self.params)

    def prefix(self, value: str, group: int) -> str:
        """The label group `group` reports for `value`."""
        return padded_bits(value, self.max_length)[: self.lengths[group]]

    # -- client ----------------------------------------------------------------------------
    def perturb(self, value: str, rng: Rng | None = None) -> WireReport:
        """One user's report {"group": g, ...the sketch report}. From the client's CSPRNG by
        default, with scalar draws of `perturb_values`' law (the SDK's path): the group, then
        the sketch's report of the prefix (`perturb_key`); another source goes through
        `perturb_values`."""
        if rng is not None and not isinstance(rng, SecureRandom):
            return self.encode(self.perturb_values([value], rng))[0]
        data = value_bytes(value, self.max_length)
        group = uniform_below_one(self.groups)
        label = prefix_label(data, self.lengths[group])
        return {"group": group, **self.oracle.perturb_key(item_key(label))}

    def perturb_values(self, values: Sequence[str], rng: Rng) -> ReportBatch:
        """Many users' reports at once (simulations, load generators): each user's group,
        drawn independently of the value, then the group oracle's report of the value's
        prefix of s_g bits; for one value, the draws of `perturb` in the same order."""
        bits = [padded_bits(value, self.max_length) for value in values]
        groups = sample_uniform_below(rng, self.groups, len(bits))
        lengths = np.asarray(self.lengths)[groups].tolist()
        prefixes = item_keys(b[:s] for b, s in zip(bits, lengths, strict=True))
        return {"group": groups.astype(np.uint16), **self.oracle.perturb_keys(prefixes, rng)}

    # -- wire and storage --------------------------------------------------------------------
    def encode(self, batch: ReportBatch) -> list[WireReport]:
        sketch = {name: column for name, column in batch.items() if name != "group"}
        groups = batch["group"].tolist()
        reports = self.oracle.encode(sketch)
        return [{"group": g, **r} for g, r in zip(groups, reports, strict=True)]

    def decode(self, reports: object) -> ReportBatch:
        """Validate untrusted reports {"group": int in [0, G), ...the sketch report}."""
        groups = decode_int_field(reports, "group", self.groups, np.uint16)
        return {"group": groups, **self.oracle.decode(reports)}

    # -- window support ----------------------------------------------------------------------
    @property
    def support_size(self) -> int:
        """G sketches of k m counts, then G report counts."""
        return self.groups * (self.oracle.support_size + 1)

    @property
    def support_work(self) -> int:
        return self.oracle.support_work

    def support(self, batch: ReportBatch) -> NDArray[np.int64]:
        """Group g's sketch counts at [g C, (g + 1) C) (C = k m), its reports at G C + g."""
        groups = np.asarray(batch["group"], dtype=np.int64)
        cells = self.oracle.support_size
        support = np.zeros(self.support_size, dtype=np.int64)
        for group in np.unique(groups).tolist():
            mine = groups == group
            sketch = {name: column[mine] for name, column in batch.items() if name != "group"}
            support[group * cells : (group + 1) * cells] = self.oracle.support(sketch)
        support[self.groups * cells :] = np.bincount(groups, minlength=self.groups)
        return support

    def split_support(
        self, support: NDArray[np.int64]
    ) -> tuple[list[NDArray[np.int64]], list[int]]:
        """Each group's sketch counts and report count from a window support."""
        if support.size != self.support_size:
            raise ParameterError("support", f"must have {self.support_size} cells")
        cells = self.oracle.support_size
        sketches = [support[g * cells : (g + 1) * cells] for g in range(self.groups)]
        return sketches, [int(c) for c in support[self.groups * cells :]]

    # -- server ----------------------------------------------------------------------------
    @functools.cached_property
    def first_candidates(self) -> tuple[str, ...]:
        """Every possible prefix of group 0's length (the same for every discovery)."""
        width = self.lengths[0]
        return tuple(label for i in range(1 << width) if possible_prefix(label := f"{i:0{width}b}"))

    def extend(self, kept: Sequence[str], group: int) -> list[str]:
        """Every possible extension of the kept prefixes to group `group`'s length."""
        width = self.lengths[group] - self.lengths[group - 1]
        tails = [f"{i:0{width}b}" for i in range(1 << width)]
        return [label for head in kept for tail in tails if possible_prefix(label := head + tail)]

    def discover(
        self,
        supports: Sequence[NDArray[np.int64]],
        group_counts: Sequence[int],
        false_discoveries: float = DEFAULT_FALSE_DISCOVERIES,
    ) -> Discovery:
        """The heavy hitters from each group's summed sketch support and report count."""
        false_discoveries = check_epsilon(false_discoveries, "false_discoveries")
        if len(supports) != self.groups or len(group_counts) != self.groups:
            raise ParameterError("supports", f"must have one entry per group ({self.groups})")
        if min(group_counts) < 1:
            raise ParameterError("group_counts", "every group needs at least one report")
        candidates: Sequence[str] = self.first_candidates
        estimate = np.zeros(0)
        for group, (support, size) in enumerate(zip(supports, group_counts, strict=True)):
            if group:
                # Ranked on estimates rounded to 6 decimals, ties in candidate order: an
                # exact tie (estimates are affine in integer counts) must not hinge on the
                # rounding of float sums (docs/protocol.md, `pem`, "Discovery").
                order = np.argsort(-np.round(estimate, 6), kind="stable")[: self.top_k]
                candidates = self.extend([candidates[i] for i in order], group)
            estimate = self.oracle.estimate_keys(support, size, item_keys(candidates))
        n = int(sum(group_counts))
        return self.release(candidates, estimate, int(group_counts[-1]), n, false_discoveries)

    def release(
        self,
        candidates: Sequence[str],
        estimate: NDArray[np.float64],
        size: int,
        n: int,
        false_discoveries: float,
    ) -> Discovery:
        """The last group's candidates (size reports of n) that clear the threshold, as
        estimated counts among all n users."""
        # The family term of the stated stderr: KeySketch.family_variance needs the counts
        # of all strings held; the candidates' estimates stand in for them (plug-in: the
        # heaviest strings are candidates, and Zipf-like tails add little to sum n_w^2).
        # Per candidate v the sum over the other strings w != v (docs/protocol.md, "pem").
        held = np.rint(np.clip(estimate, 0.0, None)).astype(np.int64)
        family_of = self.oracle.family_variance(held)
        # P(listed | nobody holds it) <= tail = false_discoveries / C (at most 1/2), whatever
        # the held strings' counts below the largest (client/discovery/threshold.py).
        tail = min(0.5, false_discoveries / max(1, len(candidates)))
        cut = candidates_threshold(self.oracle, size, estimate, tail)
        chosen = [
            (text, float(e), float(family))
            for label, e, family in zip(
                candidates, estimate.tolist(), family_of.tolist(), strict=True
            )
            if e > cut and (text := prefix_value(label)) is not None
        ]
        chosen.sort(key=lambda row: -row[1])
        group_estimate = np.array([e for _, e, _ in chosen], dtype=np.float64)
        family = np.array([term for _, _, term in chosen], dtype=np.float64)
        # The group is a uniform sample of size users of the n: scaled by n / size, its
        # estimate is unbiased for the count among all n, with the oracle's variance and the
        # sample's (hypergeometric) one, at the plug-in frequency.
        scale = n / size
        f = np.clip(group_estimate / size, 0.0, 1.0)
        sampling = size * f * (1 - f) * (n - size) / max(1, n - 1)
        variance = scale**2 * (self.oracle.key_variance(size, f) + family + sampling)
        return Discovery(
            values=tuple(text for text, _, _ in chosen),
            estimate=scale * group_estimate,
            stderr=np.sqrt(variance),
            threshold=scale * cut,
            expected_false_discoveries=tail * len(candidates),
            candidates=len(candidates),
            n=n,
        )
