"""Open-domain OLH (window state: a report log) against the sketches (cms, hcms) on the same
free-text reports: accuracy of candidate estimates, state size, report CPU, aggregation rate.

n reports of Zipf(1.1)-distributed strings over 20,000 distinct ones, epsilon in {2, 4},
default parameters (sketches k = m = 1024; OLH g = round(e^eps + 1)); reports drawn by each
oracle's own code, stored as the collector stores them (1000-report entries) in a private
redis-server, drained by one worker pass, and a window report built for 1,000 candidates
(the 900 most frequent strings and 100 nobody holds). Per row:

- RMSE of the candidates' estimates against the true counts (one run: over the candidates,
  so the sketches' fixed-family offsets are in it), and as a ratio to CMS's;
- the exact stderr of a candidate nobody holds (sqrt of `key_variance` at f = 0; the sketches'
  family term is not in it) as a ratio to CMS's;
- state: MEMORY USAGE of the window state's keys (hash, packed cells or report log);
- aggregation: reports/s of the worker pass (wall; worker CPU);
- report: CPU and wall seconds of build_window with the 1,000 candidates (OLH: n x 1,000
  hash evaluations over the log; a sketch: 1,000 x k cells).

    .venv/bin/python benchmarks/olh_open_domain.py [--quick]

Writes results/olh_open_domain.json and the README section (not with --quick).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import redis
from aggregate import register
from numpy.typing import NDArray
from report import update_readme

from ldptel.aggregator.reports import Candidates, build_window
from ldptel.aggregator.state import StateKey
from ldptel.aggregator.worker import Worker
from ldptel.client.campaign import CampaignConfig
from ldptel.client.hashing import item_keys
from ldptel.store import keys
from ldptel.store.redis_server import RedisServer
from ldptel.store.registry import Registry

HERE = Path(__file__).resolve().parent
SECTION = "## Open-domain OLH vs the sketches (`olh_open_domain.py`)"
ORACLES = ("olh", "cms", "hcms")
EPSILONS = (2.0, 4.0)
DISTINCT = 20_000
HELD, ABSENT = 900, 100
BATCH = 1000
WINDOW = 1_700_006_400
SEED = 20240601
LEASE_MS = 600_000


def strings(n: int) -> tuple[list[str], NDArray[np.int64]]:
    """The distinct strings and each one's count among n Zipf(1.1) draws (fixed seed)."""
    ranks = np.random.default_rng(SEED).zipf(1.1, n * 2)
    ranks = ranks[ranks <= DISTINCT][:n] - 1
    counts = np.bincount(ranks, minlength=DISTINCT).astype(np.int64)
    return [f"answer {i}" for i in range(DISTINCT)], counts


def fill(client: redis.Redis, config: CampaignConfig, values: NDArray[np.uint64]) -> None:
    """The reports of `values` (item keys, in a shuffled order) as 1000-report entries."""
    oracle = config.build_open()
    rng = np.random.default_rng(SEED + 1)
    stream = keys.stream(config.name, 0)
    for start in range(0, values.size, 50 * BATCH):
        with client.pipeline(transaction=False) as pipe:
            for low in range(start, min(values.size, start + 50 * BATCH), BATCH):
                batch = oracle.perturb_keys(values[low : low + BATCH], rng)
                n = len(batch[oracle.fields[0].name])
                fields = {"c": config.config_id, "w": WINDOW, "n": n, "l": ""}
                pipe.xadd(stream, {**fields, "p": oracle.pack(batch)})
            pipe.execute()


def measure(url: str, name: str, epsilon: float, n: int) -> dict[str, Any]:
    client = redis.Redis.from_url(url)
    client.flushdb()
    config = CampaignConfig.from_dict(
        {"name": f"bench-{name}", "oracle": name, "epsilon": epsilon, "max_length": 64}
    ).as_created()
    register(client, config)
    labels, counts = strings(n)
    values = item_keys(labels)[np.repeat(np.arange(DISTINCT), counts)]
    np.random.default_rng(SEED + 2).shuffle(values)
    fill(client, config, values)

    cpu, started = time.process_time(), time.perf_counter()
    stats = Worker(client, build_reports=False, lease_ms=LEASE_MS).run_pass()
    pass_seconds, pass_cpu = time.perf_counter() - started, time.process_time() - cpu
    if stats.reports != n:
        raise RuntimeError(f"{stats.reports} of {n} reports counted")
    client.delete(keys.stream(config.name, 0))  # only the window state is left
    state = StateKey(WINDOW, config.config_id)
    state_keys = (
        state.redis_key(config.name, 0),
        state.cells_key(config.name, 0),
        state.log_key(config.name, 0),
    )
    state_bytes = sum(int(client.memory_usage(key, samples=0) or 0) for key in state_keys)

    order = np.argsort(-counts, kind="stable")
    held = [labels[i] for i in order[:HELD]]
    candidates = Candidates((*held, *(f"never said {i}" for i in range(ABSENT))), "bench")
    truth = np.concatenate([counts[order[:HELD]], np.zeros(ABSENT)])
    cpu, started = time.process_time(), time.perf_counter()
    document = build_window(client, Registry(client), config.name, WINDOW, None, None, candidates)
    report_seconds, report_cpu = time.perf_counter() - started, time.process_time() - cpu
    (report,) = document["reports"]
    # Listed items only are in the report: the estimates of all candidates come from the
    # same statistics the report used, recomputed here (not timed).
    estimates = candidate_estimates(client, config, candidates.values)
    oracle = config.build_open()
    client.flushdb()
    client.close()
    return {
        "oracle": name,
        "epsilon": epsilon,
        "n": n,
        "rmse": float(np.sqrt(np.mean((estimates - truth) ** 2))),
        "null_stderr": math.sqrt(float(oracle.key_variance(n, np.zeros(1))[0])),
        "listed": len(report["items"]),
        "threshold": report["discovery"]["threshold"],
        "state_bytes": state_bytes,
        "pass_seconds": pass_seconds,
        "pass_cpu": pass_cpu,
        "reports_per_second": n / pass_seconds,
        "report_seconds": report_seconds,
        "report_cpu": report_cpu,
    }


def candidate_estimates(
    client: redis.Redis, config: CampaignConfig, candidates: tuple[str, ...]
) -> NDArray[np.float64]:
    """Every candidate's estimate (listed or not), by the report's own statistics."""
    from ldptel.aggregator.reports import ReportOptions
    from ldptel.aggregator.reports.statistics import (
        log_candidate_support,
        log_statistics,
        open_domain_statistics,
    )
    from ldptel.aggregator.state import read_log, read_state
    from ldptel.client.oracles.olh import OpenDomainOLH
    from ldptel.client.oracles.sketch import KeySketch

    oracle = config.build_open()
    state = StateKey(WINDOW, config.config_id)
    if isinstance(oracle, OpenDomainOLH):
        log = read_log(client, config.name, [0], state, oracle.log_record.itemsize)
        support = log_candidate_support(oracle, log, candidates)
        return log_statistics(oracle, support, log.n, ReportOptions())[0]["estimate"]
    assert isinstance(oracle, KeySketch)
    n, support = read_state(client, config.name, [0], state, oracle.support_size)
    return open_domain_statistics(oracle, support, n, candidates, ReportOptions())[0]["estimate"]


def markdown(results: dict[str, Any]) -> str:
    rows = results["rows"]
    cms = {row["epsilon"]: row for row in rows if row["oracle"] == "cms"}
    lines = [
        f"Generated on {results['generated']} (load average {results['load']:.2f}, 2 cores "
        f"shared with other jobs); n = {results['n']:,} reports of Zipf(1.1) strings over "
        f"{DISTINCT:,} distinct ones, one run per row, default parameters (k = m = 1024; OLH "
        f"g = round(e^ε + 1)); {HELD + ABSENT:,} candidates ({HELD} most frequent, {ABSENT} "
        "nobody holds). RMSE over the candidates against the true counts (the sketches' "
        "fixed-family offsets included); null stderr: exact, at f = 0, without the sketches' "
        "family term. State: MEMORY USAGE of the window state's keys. Aggregation: one worker "
        "pass (wall). Report: build_window with the candidates (CPU over all threads, wall).",
        "",
        "| ε | oracle | RMSE | RMSE / cms | null stderr / cms | listed | state | "
        "aggregation reports/s | report CPU s | report wall s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        base = cms[row["epsilon"]]
        lines.append(
            f"| {row['epsilon']:g} | {row['oracle']} | {row['rmse']:,.0f} | "
            f"{row['rmse'] / base['rmse']:.2f} | {row['null_stderr'] / base['null_stderr']:.2f} "
            f"| {row['listed']} | {row['state_bytes'] / 2**20:.1f} MiB | "
            f"{row['reports_per_second']:,.0f} | {row['report_cpu']:.1f} | "
            f"{row['report_seconds']:.1f} |"
        )
    lines += [
        "",
        "- Accuracy: OLH's RMSE and null stderr are the lowest at both ε (its per-report "
        "variance 4e^ε/(e^ε − 1)² against CMS's e^(ε/2)/(e^(ε/2) − 1)²), and the sketches' "
        "RMSE sits above their null stderr by the fixed family's offsets, which OLH has not; "
        "with a lower, exact threshold it lists more of the held strings.",
        "- State: OLH's log is 6 bytes a report (MEMORY USAGE rounds the string up to its "
        "allocation); a default sketch is a fixed 8 MiB (CMS) or 16 MiB (HCMS) of cells "
        "whatever n, so the log is the larger one past about 1.4 million reports per window "
        "and shard.",
        "- Cost moves from aggregation to the report: a pass only appends OLH's reports (no "
        "hashing), while its report hashes all n reports for each of the 1,000 candidates "
        "(10^9 xxh32 evaluations at n = 10^6), against 1,000 × k cell reads for a sketch.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 50,000 (a smoke run)")
    args = parser.parse_args()
    n = 50_000 if args.quick else 1_000_000
    rows = []
    with RedisServer(appendonly=False) as server:
        for epsilon in EPSILONS:
            for name in ORACLES:
                row = measure(server.url, name, epsilon, n)
                print(json.dumps(row), flush=True)
                rows.append(row)
    results = {
        "generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "load": os.getloadavg()[0],
        "n": n,
        "rows": rows,
    }
    print(markdown(results))
    if args.quick:
        return
    (HERE / "results" / "olh_open_domain.json").write_text(json.dumps(results, indent=1) + "\n")
    update_readme(HERE / "README.md", SECTION, markdown(results))


if __name__ == "__main__":
    main()
