"""Regenerate ledger.json (run: .venv/bin/python THIS_FILE): behaviour vectors of the privacy
ledger and the memo, for every client (docs/client.md, "The privacy ledger"; the Python
client checks them in tests/client/test_ledger_vectors.py, the TypeScript client in
client-js/test/ledger.test.ts).

Each case is a served config (created by the collector's rules, with its config_id) and a
sequence of report() calls: the collector's clock reading `now`, the level, the value (a
label); and what must happen: the status, the budget field that refused it, the window it
is charged to and the epsilon charged. The expected outcomes are computed here from the
rules as docs/client.md states them, in plain Python, not by the client's code:

- the window is the collector's `floor(now / W) W`, or the next one when the current ends
  within the margin (`timeout + 2` seconds, timeout = TIMEOUT here);
- a report costs its level's reporting epsilon (memoization "none"); under
  "exact_discloses_changes" the first report of a (level, value) costs it and a resend costs
  nothing (RAPPOR: the r-th report of a value costs min(r e1, einf) - min((r-1) e1, einf));
- it is refused if the window would hold more than `reports_per_window` reports, or (for a
  charge > 0) more than `scale epsilon reports_per_window` epsilon, or the install more than
  `scale lifetime_epsilon` (default 10 epsilon) for life, `scale` = level epsilon / epsilon,
  each limit with a relative slack of 1e-9, checked in that order; a refused report charges
  and memoizes nothing.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
TIMEOUT = 10.0
MARGIN = TIMEOUT + 2.0
DAY = 86_400
SLACK = 1 + 1e-9
DOMAIN = ["red", "green", "blue", "cyan"]


def created(config: dict[str, Any]) -> dict[str, Any]:
    """The config as the collector stores and serves it (derived parameters written)."""
    from ldptel.client.campaign import CampaignConfig

    stored = CampaignConfig.from_dict(config).as_created()
    return {**stored.to_dict(), "config_id": stored.config_id}


def reporting_epsilon(config: dict[str, Any], level: str) -> float | None:
    levels = config.get("levels") or {}
    if not levels:
        return float(config["epsilon"])
    strategy = config.get("level_strategy", "optimal")
    if strategy == "minimum":
        return float(min(levels.values()))
    if strategy == "threshold":
        t = float(config["level_threshold"])
        return t if levels[level] >= t else None
    return float(levels[level])


def rappor_epsilons(params: dict[str, Any]) -> tuple[float, float]:
    # Erlingsson et al. 2014, Sec. 3.2: one report's e1 and the bound of all reports einf.
    h, f, p, q = params["h"], params["f"], params["p"], params["q"]
    p_star, q_star = (f / 2) * q + (1 - f / 2) * p, (1 - f / 2) * q + (f / 2) * p
    e1 = h * math.log(q_star * (1 - p_star) / (p_star * (1 - q_star)))
    return e1, 2 * h * math.log((1 - f / 2) / (f / 2))


def run(config: dict[str, Any], calls: list[tuple[float, str, str]]) -> list[dict[str, Any]]:
    """The expected outcome of each call (now, level, value)."""
    window_seconds = config.get("window_seconds", DAY)
    per_window = config.get("reports_per_window", 1)
    epsilon = float(config["epsilon"])
    lifetime = config.get("lifetime_epsilon") or 10 * epsilon
    exact = config.get("memoization") == "exact_discloses_changes"
    windows: dict[int, list[float]] = defaultdict(lambda: [0, 0.0])
    spent_for_life = 0.0
    memo: dict[tuple[str, str], float] = {}
    steps = []
    for now, level, value in calls:
        step: dict[str, Any] = {"now": now, "level": level, "value": value}
        steps.append(step)
        eps = reporting_epsilon(config, level)
        if eps is None:
            step.update(status="level_not_collected", field=None, window=None, charged=0.0)
            continue
        window = math.floor(now / window_seconds) * window_seconds
        if window + window_seconds - now <= MARGIN:
            window += window_seconds
        if config["oracle"] == "rappor" and exact:
            e1, einf = rappor_epsilons(config["params"])
            before = memo.get((level, value), 0.0)
            cost = max(min(before + e1, einf) - before, 0.0)
        elif exact:
            cost = 0.0 if (level, value) in memo else eps
        else:
            cost = rappor_epsilons(config["params"])[0] if config["oracle"] == "rappor" else eps
        scale = eps / epsilon
        reports, in_window = windows[window]
        field = None
        if reports + 1 > per_window:
            field = "window_reports"
        elif cost > 0 and in_window + cost > scale * epsilon * per_window * SLACK:
            field = "window_epsilon"
        elif cost > 0 and spent_for_life + cost > scale * lifetime * SLACK:
            field = "lifetime_epsilon"
        if field:
            step.update(status="budget_exhausted", field=field, window=window, charged=0.0)
            continue
        windows[window] = [reports + 1, in_window + cost]
        spent_for_life += cost
        memo[(level, value)] = memo.get((level, value), 0.0) + cost
        step.update(status="spooled", field=None, window=window, charged=cost)
    return steps


def de(**changes: Any) -> dict[str, Any]:
    return {"name": "colors", "oracle": "de", "epsilon": 1.0, "domain": DOMAIN, **changes}


def daily(days: int, at: float = 3600.0) -> list[tuple[float, str, str]]:
    return [(day * DAY + at, "", "red") for day in range(days)]


CASES: list[tuple[str, dict[str, Any], list[tuple[float, str, str]]]] = [
    (
        "one report per window; the default lifetime budget, 10 epsilon, is ten reports",
        de(),
        [(100.0, "", "red"), (200.0, "", "blue"), *daily(12, at=7200.0)[1:]],
    ),
    (
        "a report in the last timeout + 2 s of a window is charged to the next one",
        de(reports_per_window=2),
        [(DAY - 13.0, "", "red"), (DAY - 12.0, "", "red"), (DAY - 1.0, "", "blue"),
         (DAY + 5.0, "", "cyan"), (2 * DAY - 100.0, "", "red")],
    ),
    (
        "a lifetime budget smaller than the window's: lifetime_epsilon refuses first",
        de(reports_per_window=3, lifetime_epsilon=2.5),
        [(10.0, "", "red"), (20.0, "", "red"), (30.0, "", "red"), (DAY + 10.0, "", "red")],
    ),
    (
        "levels (optimal): each report costs its level's epsilon, budgets scaled to it, "
        "totals per campaign across levels",
        de(epsilon=2.0, reports_per_window=2, levels={"high": 0.5, "low": 2.0}),
        [(10.0, "high", "red"), (20.0, "high", "red"), (30.0, "high", "blue"),
         (DAY + 10.0, "low", "red"), (DAY + 20.0, "low", "red"),
         (2 * DAY + 10.0, "high", "red"), (2 * DAY + 20.0, "low", "red"),
         (3 * DAY + 10.0, "high", "red"), (3 * DAY + 20.0, "low", "cyan")],
    ),
    (
        "levels (threshold): a level below the threshold does not report, nothing charged",
        de(epsilon=2.0, reports_per_window=3, levels={"high": 0.5, "low": 2.0},
           level_strategy="threshold", level_threshold=1.0),
        [(10.0, "high", "red"), (20.0, "low", "red"), (30.0, "high", "red"),
         (40.0, "low", "blue")],
    ),
    (
        "exact memoization: a resent memo costs nothing but counts as a report of its window",
        de(reports_per_window=10, lifetime_epsilon=3.0, memoization="exact_discloses_changes"),
        [(10.0, "", "red"), (20.0, "", "red"), (30.0, "", "blue"), (40.0, "", "red"),
         (50.0, "", "cyan"), (60.0, "", "green"), (70.0, "", "blue"),
         (DAY + 10.0, "", "green"), (DAY + 20.0, "", "cyan")],
    ),
    (
        "RAPPOR, exact memoization: the r-th report of a value costs min(r e1, einf) - "
        "min((r-1) e1, einf)",
        {"name": "colors", "oracle": "rappor", "epsilon": 1.0, "domain": DOMAIN,
         "reports_per_window": 20, "lifetime_epsilon": 12.0,
         "memoization": "exact_discloses_changes"},
        [(10.0 * i, "", "red") for i in range(1, 13)] + [(200.0, "", "blue")],
    ),
    (
        "RAPPOR, no memoization: every report costs its one-report epsilon",
        {"name": "colors", "oracle": "rappor", "epsilon": 1.0, "domain": DOMAIN,
         "reports_per_window": 3},
        [(10.0, "", "red"), (20.0, "", "red"), (30.0, "", "blue"), (40.0, "", "red")],
    ),
]  # fmt: skip


def build() -> dict[str, Any]:
    cases = []
    for title, config, calls in CASES:
        served = created(config)
        cases.append({"title": title, "config": served, "steps": run(served, calls)})
    return {
        "description": __doc__.split("\n\n", 1)[1].strip(),
        "timeout_seconds": TIMEOUT,
        "cases": cases,
    }


if __name__ == "__main__":
    (HERE / "ledger.json").write_text(json.dumps(build(), indent=1, ensure_ascii=False) + "\n")
