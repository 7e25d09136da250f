"""Regenerate config_ids.json (run: .venv/bin/python THIS_FILE).

Each case: a config as POSTed (`input`), the canonical JSON of the config as created (written
out here by hand, following RFC 8785 and docs/protocol.md, "Config ids"; not produced by
ldptel's code, so the vectors check it), its config id (SHA-256 of the UTF-8 bytes, first 16
hex digits) and the legacy id the same config had before ids hashed RFC 8785 JSON.
Cases: Unicode labels (escaping, non-BMP), numbers with exponents, integral floats, and the
derived parameters a created config carries (OLH's g and SS's k at exact ties, per level).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent

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
        '"lifetime_epsilon":null,"name":"unicode","oracle":"de","params":{},' + DEFAULTS,
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
        '{"domain":["a","b"],"epsilon":0.00001,"level_strategy":"optimal",'
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
        '"name":"olh-tie","oracle":"olh","params":{"g":2},' + DEFAULTS,
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
        '"params":{"k":2},' + DEFAULTS,
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
        '{"domain":["x","y","z"],"epsilon":2,"level_params":{"high":{"g":3},"low":{"g":8}},'
        '"level_strategy":"optimal","level_threshold":null,"levels":{"high":0.5,"low":2},'
        '"lifetime_epsilon":null,"name":"olh-levels","oracle":"olh","params":{},' + DEFAULTS,
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
