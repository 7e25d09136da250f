"""Regenerate pem.json (run: .venv/bin/python THIS_FILE).

The Prefix Extending Method (docs/protocol.md, `pem`), one case per sketch: the config as
POSTed and as created, its canonical JSON and id; values -> NFC -> padded bits -> each
group's prefix label (with its item key and sketch hashes); reports made from GIVEN draws
(group g, row j, and the sketch's randomness: CMS's flipped entries, HCMS's column l and
sign flip); the window support of those reports; malformed reports the collector refuses;
and a discovery: from the support of many users' reports (drawn by our oracle, seeded, as
make_open_domain.py does; only the support is written), every step's candidates (possible
prefixes only), their estimates and the top_k kept. Everything but the seeded reports is
computed here in plain Python (xxhash, hashlib, math) from the words of docs/protocol.md,
not by ldptel's vectorized code, so the vectors check it.

The release: the last group's threshold, computed exactly (make_open_domain.release_threshold),
and the listed values with their estimates and standard errors among all n users.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import re
import unicodedata
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import xxhash
from make_open_domain import release_threshold

from ldptel.client.campaign import CampaignConfig

HERE = Path(__file__).parent
#: What creation adds to a pem config (the campaign defaults).
DEFAULTS: dict[str, Any] = {"reports_per_window": 1, "retention_seconds": 604800, "shards": 1}
DEFAULTS |= {"window_seconds": 86400, "lifetime_epsilon": None}

# -- the protocol's words, in plain Python ---------------------------------------------------


def item_key(text: str) -> int:
    return xxhash.xxh64_intdigest(text.encode("utf-8"), seed=0)


def sketch_hash(text: str, j: int, m: int) -> int:
    return xxhash.xxh32_intdigest(item_key(text).to_bytes(8, "little"), seed=j) % m


def hadamard(row: int, column: int) -> int:
    return -1 if bin(row & column).count("1") % 2 else 1


def prefix_lengths(max_length: int, top_k: int, step_bits: int) -> list[int]:
    """s_g = min(8 max_length, gamma + (g + 1) step_bits), gamma = ceil(log2 top_k)."""
    total, gamma = 8 * max_length, math.ceil(math.log2(top_k))
    lengths: list[int] = []
    while not lengths or lengths[-1] < total:
        lengths.append(min(total, gamma + (len(lengths) + 1) * step_bits))
    return lengths


def padded_bits(text: str, max_length: int) -> str:
    data = text.encode("utf-8")
    return "".join(f"{byte:08b}" for byte in data + bytes(max_length - len(data)))


def accepted(text: str, max_length: int) -> bool:
    """An open-domain value: non-empty, no control character, at most max_length bytes."""
    control = any(unicodedata.category(c) == "Cc" for c in text)
    return bool(text) and not control and len(text.encode("utf-8")) <= max_length


# Unicode 15, Table 3-7 (well-formed UTF-8): first byte -> allowed second bytes, length.
def sequence_rule(first: int) -> tuple[range, int] | None:
    if first < 0x80:
        return range(0), 1
    rules = [
        (range(0xC2, 0xE0), range(0x80, 0xC0), 2),
        (range(0xE0, 0xE1), range(0xA0, 0xC0), 3),
        (range(0xE1, 0xED), range(0x80, 0xC0), 3),
        (range(0xED, 0xEE), range(0x80, 0xA0), 3),
        (range(0xEE, 0xF0), range(0x80, 0xC0), 3),
        (range(0xF0, 0xF1), range(0x90, 0xC0), 4),
        (range(0xF1, 0xF4), range(0x80, 0xC0), 4),
        (range(0xF4, 0xF5), range(0x80, 0x90), 4),
    ]
    return next(((second, size) for lead, second, size in rules if first in lead), None)


def utf8_ok(data: bytes, cut: bool) -> bool:
    """Well-formed UTF-8; with `cut`, the last character may stop short. As in ldptel's
    decoder, a cut ED is checked only against 80..BF (docs/protocol.md, `pem`)."""
    i = 0
    while i < len(data):
        rule = sequence_rule(data[i])
        if rule is None:
            return False
        second, size = rule
        tail = data[i + 1 : i + size]
        if len(tail) < size - 1 and not cut:
            return False
        cut_ed = data[i] == 0xED and len(tail) == 1
        for n, byte in enumerate(tail):
            allowed = second if n == 0 and not cut_ed else range(0x80, 0xC0)
            if byte not in allowed:
                return False
        i += size
    return True


def possible(label: str) -> bool:
    """The pruning rule of docs/protocol.md: whole bytes B, remaining bits r; t = B without
    its trailing zero bytes; no zero byte in t; if B had trailing zeros, r is all zeros and
    t is whole UTF-8, else t is UTF-8 whose last character may be cut."""
    whole = len(label) // 8
    data = bytes(int(label[8 * i : 8 * i + 8], 2) for i in range(whole))
    rest, text = label[8 * whole :], data.rstrip(b"\0")
    if b"\0" in text:
        return False
    if len(text) < len(data):
        return "1" not in rest and utf8_ok(text, cut=False)
    return utf8_ok(text, cut=True)


def cms_probabilities(epsilon: float) -> dict[str, float]:
    s = math.exp(-epsilon / 2)
    return {"p": 1 / (1 + s), "q": s / (1 + s)}


def hcms_probabilities(epsilon: float) -> dict[str, float]:
    s = math.exp(-epsilon)
    return {"f": s / (1 + s)}


def bits_text(bits: list[int]) -> str:
    padded = bits + [0] * (-len(bits) % 8)
    data = bytes(int("".join(map(str, padded[i : i + 8])), 2) for i in range(0, len(padded), 8))
    return base64.b64encode(data).decode("ascii")


def text_bits(text: str, m: int) -> list[int]:
    raw = base64.b64decode(text)
    return [raw[i // 8] >> (7 - i % 8) & 1 for i in range(m)]


# -- one case --------------------------------------------------------------------------------


class Case:
    """A pem config and what follows from it by the protocol's words."""

    def __init__(self, name: str, epsilon: float, max_length: int, **params: Any) -> None:
        self.name, self.epsilon, self.max_length = name, epsilon, max_length
        self.params = params
        self.sketch, self.k, self.m = params["sketch"], params["k"], params["m"]
        self.top_k = params["top_k"]
        self.lengths = prefix_lengths(max_length, self.top_k, params["step_bits"])
        self.groups = len(self.lengths)
        self.cells = self.k * self.m * (2 if self.sketch == "hcms" else 1)
        self.probabilities = (
            cms_probabilities(epsilon) if self.sketch == "cms" else hcms_probabilities(epsilon)
        )

    # -- config ------------------------------------------------------------------------------
    def posted(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "oracle": "pem",
            "epsilon": self.epsilon,
            "max_length": self.max_length,
            "params": self.params,
        }

    def created(self) -> dict[str, Any]:
        """As stored and served: the given parameters (all of pem's fixed ones), the sketch's
        probabilities (derived from epsilon, served so that no client derives them) and the
        defaults."""
        posted = self.posted()
        return {**posted, "params": {**self.params, **self.probabilities}, **DEFAULTS}

    def canonical_json(self) -> str:
        """JCS by hand: ASCII member names sorted, no whitespace, integral numbers as
        integers (epsilon 4.0 is written 4), others in their shortest round-trip digits."""

        def write(value: Any) -> str:
            if isinstance(value, dict):
                members = (f"{json.dumps(k)}:{write(value[k])}" for k in sorted(value))
                return "{" + ",".join(members) + "}"
            if isinstance(value, float) and value.is_integer():
                return str(int(value))
            if isinstance(value, float):  # JCS: Python's repr has the same shortest digits
                assert "e" not in repr(value), value  # where both write plain decimals
                return repr(value)
            return json.dumps(value, ensure_ascii=False)

        return write(self.created())

    # -- values ------------------------------------------------------------------------------
    def value_case(self, text: str) -> dict[str, Any]:
        nfc = unicodedata.normalize("NFC", text)
        case: dict[str, Any] = {
            "input": text,
            "nfc": nfc,
            "utf8_bytes": len(nfc.encode("utf-8")),
            "accepted": accepted(nfc, self.max_length),
        }
        if case["accepted"]:
            bits = padded_bits(nfc, self.max_length)
            case["bits"] = bits
            case["labels"] = [bits[:s] for s in self.lengths]
        return case

    def label_case(self, label: str) -> dict[str, Any]:
        return {
            "label": label,
            "item_key": str(item_key(label)),  # a string: JSON numbers lose 64-bit precision
            "hashes": [sketch_hash(label, j, self.m) for j in range(self.k)],
        }

    # -- reports from given draws ------------------------------------------------------------
    def report_case(self, value: str, rnd: random.Random) -> dict[str, Any]:
        """Draws by a plain PRNG (their law is the protocol's; only their values matter)."""
        group = rnd.randrange(self.groups)
        label = padded_bits(value, self.max_length)[: self.lengths[group]]
        j = rnd.randrange(self.k)
        bucket = sketch_hash(label, j, self.m)
        row: dict[str, Any] = {"value": value, "group": group, "label": label, "j": j}
        row["bucket"] = bucket
        if self.sketch == "cms":
            # Entries +1 at the bucket, -1 elsewhere, each flipped with probability q.
            q = self.probabilities["q"]
            flipped = [i for i in range(self.m) if rnd.random() < q]
            bits = [int((i == bucket) != (i in flipped)) for i in range(self.m)]
            row["flipped"] = flipped
            row["report"] = {"group": group, "j": j, "bits": bits_text(bits)}
        else:
            # Sign H[l, bucket], flipped with probability f; bit 1 for a sent sign +1.
            column = rnd.randrange(self.m)
            flip = rnd.random() < self.probabilities["f"]
            sign = hadamard(column, bucket)
            row |= {"l": column, "sign": sign, "flipped": flip}
            row["report"] = {"group": group, "j": j, "l": column, "bit": int((sign > 0) != flip)}
        return row

    # -- support -----------------------------------------------------------------------------
    def support(self, reports: list[dict[str, Any]]) -> list[int]:
        """Group g's sketch counts at [g C, (g + 1) C), then the G report counts. CMS cell
        j m + i: reports of row j with bit i set; HCMS cell 2 (j m + l) + bit."""
        support = [0] * (self.groups * (self.cells + 1))
        for report in reports:
            base = report["group"] * self.cells
            if self.sketch == "cms":
                for i, bit in enumerate(text_bits(report["bits"], self.m)):
                    support[base + report["j"] * self.m + i] += bit
            else:
                support[base + 2 * (report["j"] * self.m + report["l"]) + report["bit"]] += 1
            support[self.groups * self.cells + report["group"]] += 1
        return support

    # -- discovery ---------------------------------------------------------------------------
    def estimate(self, sketch: list[int], n: int, label: str) -> float:
        """c~(v) = m/(m-1) ((1/k) sum_j M[j, h_j(v)] - n/m) from the group's support."""
        k, m = self.k, self.m
        buckets = [sketch_hash(label, j, m) for j in range(k)]
        if self.sketch == "cms":
            p, q = self.probabilities["p"], self.probabilities["q"]
            mean_row = (sum(sketch[j * m + buckets[j]] for j in range(k)) - n * q) / (p - q)
        else:  # c sum_j (T H)[j, h_j(v)], T[j, l] = count(bit 1) - count(bit 0)
            c = 1 / (1 - 2 * self.probabilities["f"])
            mean_row = c * sum(
                (sketch[2 * (j * m + col) + 1] - sketch[2 * (j * m + col)])
                * hadamard(col, buckets[j])
                for j in range(k)
                for col in range(m)
            )
        return float(m / (m - 1) * (mean_row - n / m))

    def discovery(self, support: list[int]) -> list[dict[str, Any]]:
        """Each step: candidates in order (group 0: every s_0-bit label in increasing binary
        order; then each kept prefix, best first, followed by every tail in increasing
        order), possible ones only; their estimates; the top_k kept (ties: earlier first)."""
        counts = support[self.groups * self.cells :]
        steps: list[dict[str, Any]] = []
        kept: list[str] = []
        for group, length in enumerate(self.lengths):
            if group == 0:
                labels = [f"{i:0{length}b}" for i in range(1 << length)]
            else:
                width = length - self.lengths[group - 1]
                labels = [head + f"{i:0{width}b}" for head in kept for i in range(1 << width)]
            candidates = [label for label in labels if possible(label)]
            sketch = support[group * self.cells : (group + 1) * self.cells]
            estimates = [self.estimate(sketch, counts[group], label) for label in candidates]
            step = {
                "group": group,
                "prefix_bits": length,
                "reports": counts[group],
                "candidates": candidates,
                "estimate": estimates,
            }
            if group < self.groups - 1:
                order = sorted(range(len(candidates)), key=lambda i: -round(estimates[i], 6))
                kept = [candidates[i] for i in order[: self.top_k]]
                step["kept"] = kept
            steps.append(step)
        return steps


def release_case(case: Case, last_step: dict[str, Any], n: int) -> dict[str, Any]:
    """The release (docs/protocol.md, "Candidates" and `pem`): in the last group (n_G of the
    n users), T at tail = 0.05 / C; listed: the candidates whose estimate exceeds T and whose
    label is a whole value, by estimate; estimates, stderr and T scaled by n / n_G."""
    k, m = case.params["k"], case.params["m"]
    size, estimates = last_step["reports"], last_step["estimate"]
    if case.sketch == "cms":
        p, q = case.probabilities["p"], case.probabilities["q"]
        pi = q + (p - q) / m
        own, other = p * (1 - p) / (p - q) ** 2, pi * (1 - pi) / (p - q) ** 2
    else:
        c = 1 / (1 - 2 * case.probabilities["f"])
        own, other = c * c - 1, c * c - 1 / m**2

    def variance(f: float) -> float:
        return (m / (m - 1)) ** 2 * size * (f * own + (1 - f) * other)

    tail = min(0.5, 0.05 / len(estimates))
    z = NormalDist().inv_cdf(1 - tail)
    top = max(estimates)
    largest = min(size, top + z * math.sqrt(variance(min(1, max(0, top / size)))) + size / (m - 1))
    threshold = release_threshold(size, largest, variance(0), tail, k, m)
    # The stderr's family term of candidate v: sum_{w != v} c_w (c_w - 1) / (k (m - 1)), c_w
    # the estimates rounded (half to even) and clipped at 0; plus the group's sampling term.
    pairs = [c * (c - 1) for c in (max(0, round(e)) for e in estimates)]
    scale = n / size
    listed = []
    for label, estimate, pair in sorted(
        zip(last_step["candidates"], estimates, pairs, strict=True), key=lambda x: -x[1]
    ):
        family = (sum(pairs) - pair) / (k * (m - 1))
        data = bytes(int(label[i : i + 8], 2) for i in range(0, len(label), 8)).rstrip(b"\0")
        if estimate <= threshold or not possible(label):
            continue
        try:  # a last character cut short is no value
            value = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        f = min(1.0, max(0.0, estimate / size))
        sampling = size * f * (1 - f) * (n - size) / (n - 1)
        stderr = scale * math.sqrt(variance(f) + family + sampling)
        listed.append({"value": value, "estimate": scale * estimate, "stderr": stderr})
    return {
        "tail": tail, "z": z, "count_bound": largest, "group_threshold": threshold,
        "threshold": scale * threshold, "listed": listed,
    }  # fmt: skip


# -- the two cases ---------------------------------------------------------------------------

CMS_CASE = Case("pem-cms", 4.0, 2, top_k=3, step_bits=4, sketch="cms", k=8, m=16)
HCMS_CASE = Case("pem-hcms", 4.0, 3, top_k=2, step_bits=4, sketch="hcms", k=8, m=16)
INPUTS = {
    "pem-cms": ["ab", unicodedata.normalize("NFD", "é"), "z", "abc", "日", "\tb", ""],
    "pem-hcms": ["tea", "te", "日", unicodedata.normalize("NFD", "né"), "tea!", "\x7f"],
}
REPORTED = {
    "pem-cms": ["ab", "é", "z", "ab", "é", "ab", "hi"],
    "pem-hcms": ["tea", "te", "日", "tea", "ok", "日", "né", "te"],
}
USERS: dict[str, dict[str, Any]] = {
    # Heavy hitters and one-user strings (Cyrillic letters; two-letter ASCII words).
    "pem-cms": {
        "heavy": {"ab": 1400, "é": 1000, "hi": 700},
        "singles": [chr(0x400 + i) for i in range(256)]
        + [a + b for a in "pqrstuvwxyz" for b in "abcdefghijklmnopqrstuvwxyz"],
        "seed": 11,
    },
    # "te" shares its first 17 bits with "tea"; at 21 bits they part and top_k = 2 drops it.
    "pem-hcms": {
        "heavy": {"日": 1200, "tea": 900, "te": 250},
        "singles": [chr(0x4E00 + i) for i in range(300)],
        "seed": 11,
    },
}
MALFORMED: dict[str, list[tuple[Any, str, str]]] = {
    "pem-cms": [
        ({"j": 0, "bits": "AAA="}, "group", "is required"),
        ({"group": 4, "j": 0, "bits": "AAA="}, "group", "must be in [0, 4)"),
        ({"group": -1, "j": 0, "bits": "AAA="}, "group", "must be in [0, 4)"),
        ({"group": True, "j": 0, "bits": "AAA="}, "group", "must be an integer"),
        ({"group": 1.0, "j": 0, "bits": "AAA="}, "group", "must be an integer"),
        ({"group": "1", "j": 0, "bits": "AAA="}, "group", "must be an integer"),
        ({"group": 0, "j": 8, "bits": "AAA="}, "j", "must be in [0, 8)"),
        ({"group": 0, "bits": "AAA="}, "j", "is required"),
        ({"group": 0, "j": 0, "bits": "AAAA"}, "bits", "must hold 2 bytes (16 bits), got 3"),
        ({"group": 0, "j": 0}, "bits", "is required"),
        (["group", 0], "report", "must be an object"),
    ],
    "pem-hcms": [
        ({"j": 0, "l": 0, "bit": 1}, "group", "is required"),
        ({"group": 6, "j": 0, "l": 0, "bit": 1}, "group", "must be in [0, 6)"),
        ({"group": 0, "j": 0, "l": 16, "bit": 1}, "l", "must be in [0, 16)"),
        ({"group": 0, "j": 0, "l": 0, "bit": 2}, "bit", "must be in [0, 2)"),
        ({"group": 2, "j": 0, "l": 0}, "bit", "is required"),
    ],
}


# Labels for the pruning rule (bytes written in hex, then the remaining bits).
PREFIXES = [
    ("0110000", "7 bits: no whole byte, nothing to check"),
    ("10000000", "80: a continuation byte cannot start a value"),
    ("11000000", "C0: never in UTF-8 (overlong)"),
    ("11110101", "F5: never in UTF-8 (beyond U+10FFFF)"),
    ("11000011", "C3: a character cut short"),
    ("110000110", "C3, then 0: the remaining bits are not checked"),
    ("1100001110101001", "C3 A9: é"),
    ("1100001100000000", "C3 00: a cut character, then padding"),
    ("0110000100000000", "61 00: a, then padding"),
    ("01100001000000000", "61 00, then 0: padding continues"),
    ("01100001000000001", "61 00, then 1: a bit after the padding"),
    ("0000000001100001", "00 61: NUL inside a value"),
    ("1110000010000000", "E0 80: overlong"),
    ("1110000010100000", "E0 A0: a cut U+0800"),
    ("1110110110100000", "ED A0: a cut surrogate, kept (its third byte is refused)"),
    ("111011011010000010000000", "ED A0 80: a surrogate"),
    ("1111010010010000", "F4 90: beyond U+10FFFF"),
    ("11110100100011111011111110111111", "F4 8F BF BF: U+10FFFF"),
]


def seeded_reports(case: Case, values: list[str], seed: int) -> list[dict[str, Any]]:
    """Many users' reports, drawn by ldptel's oracle (the only use of its code here)."""
    mechanism = CampaignConfig.from_dict(case.posted()).build_discovery()
    rng = np.random.default_rng(seed)
    return [mechanism.perturb(value, rng) for value in values]


def build(case: Case, seed: int) -> dict[str, Any]:
    rnd = random.Random(seed)
    rows = [case.report_case(value, rnd) for value in REPORTED[case.name]]
    assert {row["group"] for row in rows} == set(range(case.groups)), "reseed: every group"
    if case.sketch == "cms":  # the true entry both kept and flipped
        assert {row["bucket"] in row["flipped"] for row in rows} == {True, False}, "reseed"
    else:  # both signs, and a flipped one
        assert {row["sign"] for row in rows} == {-1, 1}, "reseed"
        assert any(row["flipped"] for row in rows), "reseed"
    users = USERS[case.name]
    values = [v for v, count in users["heavy"].items() for _ in range(count)] + users["singles"]
    support = case.support(seeded_reports(case, values, users["seed"]))
    steps = case.discovery(support)
    document = {
        "name": case.name,
        "config_input": case.posted(),
        "config": case.created(),
        "config_json": case.canonical_json(),
        "config_id": hashlib.sha256(case.canonical_json().encode("utf-8")).hexdigest()[:16],
        "sketch_probabilities": case.probabilities,
        "prefix_lengths": case.lengths,
        "values": [case.value_case(text) for text in INPUTS[case.name]],
        "labels": [case.label_case(label) for label in sorted({row["label"] for row in rows})],
        "reports": rows,
        "support": case.support([row["report"] for row in rows]),
        "malformed": [
            {"report": report, "field": field, "reason": reason}
            for report, field, reason in MALFORMED[case.name]
        ],
        "discovery": {
            "users": {"heavy": users["heavy"], "singles": len(users["singles"])},
            "seed": users["seed"],
            "support": support,
            "steps": steps,
            "release": release_case(case, steps[-1], len(values)),
        },
    }
    return document


def main() -> None:
    document = {
        "oracle": "pem",
        "description": (
            "pem (docs/protocol.md): s_g = min(8 max_length, ceil(log2 top_k) + (g+1) "
            "step_bits); a value's NFC UTF-8 bytes zero-padded to 8 max_length bits, MSB "
            "first; group g's label = its first s_g bits as '0'/'1' characters, hashed as a "
            "string (item_key = xxh64(utf8(label)), h_j = xxh32(le64(item_key), j) mod m). "
            "reports: given draws (group uniform below G, j below k; cms: the flipped "
            "entries, each flipped with probability q; hcms: l below m, the sign H[l, "
            "h_j] flipped with probability f) -> the wire report {group, ...sketch report}. "
            "support: group g's sketch support at [g C, (g+1) C), then the G report counts. "
            "discovery: from a support of seeded reports, each step's possible candidates "
            "in order, their sketch estimates (n = the group's reports) and the top_k kept; "
            "release: the last group's threshold (exact expected shortfall, docs/protocol.md "
            "'Candidates'; ldptel's grid puts it at most 2 cells above) and the listed values "
            "with estimate and stderr among all n users. "
            "prefixes: labels a discovery keeps as candidates (possible) or skips"
        ),
        "prefixes": [
            {"label": label, "possible": possible(label), "why": why} for label, why in PREFIXES
        ],
        "cases": [build(CMS_CASE, seed=2), build(HCMS_CASE, seed=28)],
    }
    text = json.dumps(document, indent=1, ensure_ascii=False)
    # Lists of numbers and of labels on one line each, not one element per line.
    text = re.sub(
        r"\[[-\d.e,\s]+\]|\[\s*\"[01]*\"(?:,\s*\"[01]*\")*\s*\]",
        lambda match: json.dumps(json.loads(match.group())),
        text,
    )
    (HERE / "pem.json").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
