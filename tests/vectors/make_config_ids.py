"""Regenerate config_ids.json (run: .venv/bin/python THIS_FILE).

Each case: a config as POSTed (`input`), the canonical JSON of the config as created (written
out here by hand, following RFC 8785 and docs/protocol.md, "Config ids"; not produced by
ldptel's code, so the vectors check it), its config id (SHA-256 of the UTF-8 bytes, first 16
hex digits) and the legacy id the same config had before ids hashed RFC 8785 JSON.
Cases: Unicode labels (escaping, non-BMP), numbers with exponents, integral floats, and the
derived parameters a created config carries (OLH's g and SS's k at exact ties, per level; the
probabilities and the noise table, computed here from the derivations of docs/protocol.md,
"Derived parameters", with Python's math, not with ldptel's oracles).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def num(value: float) -> str:
    """A double as JCS writes it: Python's repr has the same shortest digits, and every value
    written here lies where both write plain decimals."""
    text = repr(value)
    assert "e" not in text and not text.endswith(".0"), text
    return text


def pq(p: float, q: float) -> str:
    return f'"p":{num(p)},"q":{num(q)}'


def sue(epsilon: float) -> str:
    s = math.exp(-epsilon / 2)
    return pq(1 / (1 + s), s / (1 + s))


def lh_p(epsilon: float, g: int) -> str:
    return num(1.0 / (1.0 + (g - 1) * math.exp(-epsilon)))


def noise_table(epsilon: float, resolution: int) -> str:
    """SHE's served table: a, W(0), M and S by the derivation in docs/protocol.md."""
    a = math.nextafter(math.exp(-epsilon / (2 * resolution)), 1.0)
    n, d = a.as_integer_ratio()
    center = max(1, math.floor(2.0**61 * (1 - 2.0**-20) * (1.0 - a) / (1.0 + a)))
    weights = [center]
    while len(weights) <= resolution + 1 or (weights[-1] >= 2**16 and len(weights) <= 2**18):
        weights.append(-(-weights[-1] * n // d))
    clamp = len(weights) - 1
    for _ in range(resolution - 1):
        weights.append(-(-weights[-1] * n // d))
    weights.append(-(-weights[-1] * n // (d - n)))
    total = 2 * sum(weights) - center
    return f'"noise":{{"a":{num(a)},"center":"{center}","clamp":{clamp},"total":"{total}"}}'


DEFAULTS = '"reports_per_window":1,"retention_seconds":604800,"shards":1,"window_seconds":86400}'

CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "unicode labels: literal UTF-8 (not \\u escapes), quotes and backslashes escaped",
        {
            "name": "unicode",
            "oracle": "de",
            "epsilon": 1.0,
            "domain": ["café", "日本語", "😀", 'say "hi" \\ ok'],
        },
        '{"domain":["café","日本語","😀","say \\"hi\\" \\\\ ok"],"epsilon":1,'
        '"lifetime_epsilon":null,"name":"unicode","oracle":"de","params":{'
        + pq(math.e / (math.e + 3), 1 / (math.e + 3))
        + "},"
        + DEFAULTS,
    ),
    (
        "exponents: ECMAScript number form (0.00001, 1e-7, 0.0025)",
        {
            "name": "exponents",
            "oracle": "sue",
            "epsilon": 0.00001,
            "domain": ["a", "b"],
            "lifetime_epsilon": 2.5e-3,
            "levels": {"small": 1e-05, "tiny": 1e-07},
        },
        '{"domain":["a","b"],"epsilon":0.00001,"level_params":{"small":{'
        + sue(1e-5)
        + '},"tiny":{'
        + sue(1e-7)
        + '}},"level_strategy":"optimal",'
        '"level_threshold":null,"levels":{"small":0.00001,"tiny":1e-7},'
        '"lifetime_epsilon":0.0025,"name":"exponents","oracle":"sue","params":{},' + DEFAULTS,
    ),
    (
        "integral floats: 2.0 is written 2 (as JavaScript writes it)",
        {
            "name": "integral",
            "oracle": "rappor",
            "epsilon": 2.0,
            "domain": ["a", "b", "c"],
            "window_seconds": 3600,
            "params": {"k": 8, "h": 2, "m": 4, "f": 0.5, "p": 0.5, "q": 0.75},
        },
        '{"domain":["a","b","c"],"epsilon":2,"lifetime_epsilon":null,"name":"integral",'
        '"oracle":"rappor","params":{"f":0.5,"h":2,"k":8,"m":4,"p":0.5,"q":0.75},'
        '"reports_per_window":1,"retention_seconds":604800,"shards":1,"window_seconds":3600}',
    ),
    (
        "OLH at e^eps = 1.5 exactly: g = round_half_even(2.5) = 2, written into params",
        {"name": "olh-tie", "oracle": "olh", "epsilon": 0.40546510810816433, "domain": ["x", "y"]},
        '{"domain":["x","y"],"epsilon":0.40546510810816433,"lifetime_epsilon":null,'
        '"name":"olh-tie","oracle":"olh","params":{"g":2,"p":'
        + lh_p(0.40546510810816433, 2)
        + "},"
        + DEFAULTS,
    ),
    (
        "SS with d = 40 at e^eps = 15 exactly: k = round_half_even(40 / 16 = 2.5) = 2",
        {
            "name": "ss-tie",
            "oracle": "ss",
            "epsilon": 2.70805020110221,
            "domain": [f"v{i}" for i in range(40)],
        },
        '{"domain":['
        + ",".join(f'"v{i}"' for i in range(40))
        + '],"epsilon":2.70805020110221,"lifetime_epsilon":null,"name":"ss-tie","oracle":"ss",'
        '"params":{"k":2,"p":'
        + num(2 * math.exp(2.70805020110221) / (2 * math.exp(2.70805020110221) + 38))
        + "},"
        + DEFAULTS,
    ),
    (
        "levels: g derived per level and written into level_params",
        {
            "name": "olh-levels",
            "oracle": "olh",
            "epsilon": 2.0,
            "domain": ["x", "y", "z"],
            "levels": {"high": 0.5, "low": 2.0},
        },
        '{"domain":["x","y","z"],"epsilon":2,"level_params":{"high":{"g":3,"p":'
        + lh_p(0.5, 3)
        + '},"low":{"g":8,"p":'
        + lh_p(2.0, 8)
        + "}},"
        '"level_strategy":"optimal","level_threshold":null,"levels":{"high":0.5,"low":2},'
        '"lifetime_epsilon":null,"name":"olh-levels","oracle":"olh","params":{},' + DEFAULTS,
    ),
    (
        "the noise table of SHE: a as a number, W(0) and S as decimal strings (above 2^53)",
        {"name": "she-table", "oracle": "she", "epsilon": 1.0, "domain": ["a", "b"]},
        '{"domain":["a","b"],"epsilon":1,"lifetime_epsilon":null,"name":"she-table",'
        '"oracle":"she","params":{' + noise_table(1.0, 1) + ',"resolution":1},' + DEFAULTS,
    ),
    (
        "HCMS: the fixed k and m, and the flip probability f = 1/(1 + e^eps)",
        {
            "name": "hcms-flip",
            "oracle": "hcms",
            "epsilon": 2.0,
            "domain": ["a", "b"],
            "params": {"k": 4, "m": 8},
        },
        '{"domain":["a","b"],"epsilon":2,"lifetime_epsilon":null,"name":"hcms-flip",'
        '"oracle":"hcms","params":{"f":'
        + num(math.exp(-2.0) / (1 + math.exp(-2.0)))
        + ',"k":4,"m":8},'
        + DEFAULTS,
    ),
    (
        'memoization "tree": its derived horizon (365 daily windows) and change cap (2) written',
        {
            "name": "tree-daily",
            "oracle": "de",
            "epsilon": 1.0,
            "domain": ["no", "yes"],
            "memoization": "tree",
        },
        '{"domain":["no","yes"],"epsilon":1,"horizon_windows":365,"lifetime_epsilon":null,'
        # No derived params: the tree's bits are randomized response at epsilon itself.
        '"max_changes":2,"memoization":"tree","name":"tree-daily","oracle":"de","params":{},'
        + DEFAULTS,
    ),
]


def with_python_floats(created: dict[str, Any]) -> dict[str, Any]:
    """The created config as ldptel holds it: epsilons and probabilities are floats, so that
    Python's json.dumps (the legacy form) writes 2.0 where JSON parsing gave the integer 2."""
    data = dict(created)
    for key in ("epsilon", "lifetime_epsilon", "level_threshold"):
        if data.get(key) is not None:
            data[key] = float(data[key])
    if "levels" in data:
        data["levels"] = {name: float(e) for name, e in data["levels"].items()}
    data["params"] = {
        name: float(v) if name in ("f", "p", "q") else v for name, v in data["params"].items()
    }
    return data


def identifier(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def main() -> None:
    cases = []
    for title, given, canonical in CASES:
        created = json.loads(canonical)
        # The legacy form: Python's json.dumps, sorted keys, no spaces, ensure_ascii=False.
        legacy = json.dumps(
            with_python_floats(created), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        cases.append(
            {
                "title": title,
                "input": given,
                "created": created,
                "canonical": canonical,
                "config_id": identifier(canonical),
                "legacy_config_id": identifier(legacy),
            }
        )
    text = json.dumps({"cases": cases}, indent=1, ensure_ascii=False) + "\n"
    (HERE / "config_ids.json").write_text(text, "utf-8")


if __name__ == "__main__":
    main()
