"""PEM as a campaign oracle end to end at scale, beside the candidate-list CMS campaign: how
fast the aggregator counts its reports, how much Redis one window's state takes, how long
the window report (the discovery) takes, and what it finds.

    .venv/bin/python benchmarks/pem_campaign.py [--n N] [--epsilons E ...] [--rows K ...]

Data: heavy_hitters.py's (a seeded vocabulary of 100,000 lowercase words of 4-10 letters,
n users drawn Zipf(1.1) over it; default n = 10^6). Two campaigns of one shard, values of at
most 10 bytes, at each epsilon:

- "pem" (`"oracle": "pem"`): top_k 32, 8 bits per step (10 groups), CMS groups of k rows
  (each of --rows; default the campaign default) by m = 256 columns; no candidates.
- "cms" (the reference): `"oracle": "cms"` at its campaign defaults (k = m = 1024), reported
  against the whole vocabulary as candidates: a dictionary that holds every value, the
  candidate method's best case.

Per campaign: every user's report through the real vectorized client code on a seeded
generator (`PrefixExtendingMethod.perturb_values`, `KeySketch.perturb_keys`), packed in
1000-report stream entries (the collector's format), then

- "support": the aggregator's counting alone, in this process: unpack every entry and
  count it in the aggregator's chunks (`shard.group_support`), CPU seconds -> reports/s;
- "pass": one `Worker` pass against a private redis-server (reports not built): wall,
  worker CPU and redis-server CPU; its longest step beside the 30 s lease a step must fit in;
- "state": `MEMORY USAGE` of the window state's keys (its hash and packed cells) beside
  8 bytes a cell of the support (`support_size`), and beside Redis's 512 MiB string limit;
- "report": `build_window` of the window (PEM: discovery; CMS: the candidates' estimates
  and the release threshold), median CPU and wall of --builds builds;
- what the report lists: "heavy" = strings whose true count is at least the report's own
  threshold T (the set recall is over), precision = listed heavy / listed, and how many
  listed strings nobody holds.

Ratios pem / cms are printed beside each figure. Nothing is asserted: the figures are
measured on whatever machine runs this. Writes results/pem_campaign.json.

`--repeats R` then measures what one run cannot (the choice of the default k): PEM's
discovery at each epsilon and each of --rows on R fresh data sets (a new vocabulary and
users each, seeded; the same data for every k and epsilon of a repeat, so the comparison is
paired), every user through the real client code (`analysis.heavy_hitters.group_supports`)
and the real discovery, no Redis: mean threshold, recall and precision, and the strings
listed that nobody holds, summed over the repeats, and how many of the 20 most frequent
strings are listed (a recall whose set does not move with T), beside the state's size (8
bytes a cell).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import redis
from aggregate import redis_cpu_seconds, register
from heavy_hitters import MAX_LENGTH, SEED, TOP_K, ZIPF_EXPONENT, users, vocabulary

from ldptel.aggregator.reports import Candidates, build_window
from ldptel.aggregator.shard import Parsed, group_support
from ldptel.aggregator.state import StateKey
from ldptel.aggregator.worker import Worker
from ldptel.analysis.heavy_hitters import HeavyHitterSimulation, group_supports
from ldptel.client.campaign import CampaignConfig
from ldptel.client.discovery import PrefixExtendingMethod
from ldptel.client.discovery.pem import DEFAULT_ROWS
from ldptel.client.hashing import item_keys
from ldptel.client.oracles.base import ReportMechanism
from ldptel.client.oracles.sketch import KeySketch
from ldptel.store import keys
from ldptel.store.redis_server import RedisServer
from ldptel.store.registry import Registry

HERE = Path(__file__).resolve().parent
BATCH = 1000
WINDOW = 1_700_006_400
#: The worker's default lease: a step that outlasts it loses the shard (and is retried).
LEASE_S = 30.0
#: Redis's largest string (proto-max-bulk-len): a packed state must fit in one.
REDIS_STRING_MIB = 512
PEM_WIDTH = 256
#: --repeats: recall over a set that does not depend on the threshold (which k moves): how
#: many of the TOP_STRINGS most frequent strings are listed.
TOP_STRINGS = 20


@dataclass(frozen=True)
class Campaign:
    """One benchmarked campaign: its config and the candidates its report estimates."""

    label: str
    config: CampaignConfig
    candidates: Candidates | None


def campaigns(epsilon: float, rows: list[int | None], words: list[str]) -> list[Campaign]:
    """The CMS reference, then one PEM campaign per row count (None: the campaign default)."""
    base = {"epsilon": epsilon, "max_length": MAX_LENGTH, "shards": 1}
    made = [
        Campaign(
            "cms",
            CampaignConfig.from_dict({**base, "name": "bench-cms", "oracle": "cms"}).as_created(),
            Candidates(tuple(words), "the vocabulary"),
        )
    ]
    for k in rows:
        params: dict[str, Any] = {"top_k": TOP_K, "step_bits": 8, "sketch": "cms"}
        params["m"] = PEM_WIDTH
        if k is not None:
            params["k"] = k
        data = {**base, "name": f"bench-pem-{k or 'default'}", "oracle": "pem", "params": params}
        made.append(Campaign("pem", CampaignConfig.from_dict(data).as_created(), None))
    return made


def payloads(config: CampaignConfig, values: list[str], seed: int) -> list[bytes]:
    """Every user's report, packed BATCH to an entry, through the vectorized client code."""
    mechanism = config.build_mechanism()
    rng = np.random.default_rng(seed)
    packed = []
    for start in range(0, len(values), BATCH):
        part = values[start : start + BATCH]
        if isinstance(mechanism, PrefixExtendingMethod):
            batch = mechanism.perturb_values(part, rng)
        else:
            assert isinstance(mechanism, KeySketch)
            batch = mechanism.perturb_keys(item_keys(part), rng)
        packed.append(mechanism.pack(batch))
    return packed


def support_rate(config: CampaignConfig, entries: list[bytes], n: int) -> dict[str, float]:
    """The aggregator's decoding and counting of every entry, in process (CPU seconds)."""
    mechanism: ReportMechanism = config.build_mechanism()
    state = StateKey(WINDOW, config.config_id)
    started = time.process_time()
    parsed = [
        (b"", Parsed(state, mechanism, BATCH, mechanism.unpack(data, BATCH))) for data in entries
    ]
    total, corrupt = group_support(mechanism, parsed)
    cpu = time.process_time() - started
    assert not corrupt and int(total.sum()) > 0
    return {"support_cpu_s": cpu, "support_reports_per_s": n / cpu}


def fill(client: redis.Redis, config: CampaignConfig, entries: list[bytes]) -> None:
    stream = keys.stream(config.name, 0)
    fields = {"c": config.config_id, "w": WINDOW, "n": BATCH, "l": ""}
    with client.pipeline(transaction=False) as pipe:
        for number, data in enumerate(entries):
            pipe.xadd(stream, {**fields, "p": data})
            if number % 100 == 99:
                pipe.execute()
        pipe.execute()


def aggregation_pass(client: redis.Redis, config: CampaignConfig, n: int) -> dict[str, float]:
    """One worker pass over the stream: wall, CPU of the worker and of redis-server, and the
    longest step (wall)."""
    steps: list[float] = []
    last = [time.perf_counter()]

    def stepped(_: Any) -> None:
        now = time.perf_counter()
        steps.append(now - last[0])
        last[0] = now

    worker = Worker(client, build_reports=False, on_step=stepped)
    redis_cpu, cpu = redis_cpu_seconds(client), time.process_time()
    started = last[0] = time.perf_counter()
    stats = worker.run_pass()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    if stats.reports != n:
        raise RuntimeError(f"{stats.reports} of {n} reports counted (a step lost its lease?)")
    return {
        "pass_wall_s": wall,
        "pass_cpu_s": cpu,
        "pass_redis_cpu_s": redis_cpu_seconds(client) - redis_cpu,
        "pass_reports_per_s": n / wall,
        "steps": len(steps),
        "longest_step_s": max(steps),
    }


def state_memory(client: redis.Redis, config: CampaignConfig) -> dict[str, float]:
    state = StateKey(WINDOW, config.config_id)
    used = sum(
        int(client.memory_usage(key, samples=0) or 0)
        for key in (state.redis_key(config.name, 0), state.cells_key(config.name, 0))
    )
    cells = config.build_mechanism().support_size
    return {"state_mib": used / 2**20, "cells": cells, "cells_mib": 8 * cells / 2**20}


def report(
    client: redis.Redis, campaign: Campaign, truth: dict[str, int], builds: int
) -> dict[str, Any]:
    """The window report, built `builds` times (median CPU and wall), and what it lists."""
    cpu, wall = [], []
    for _ in range(builds):
        started, clock = time.perf_counter(), time.process_time()
        document = build_window(
            client, Registry(client), campaign.config.name, WINDOW, candidates=campaign.candidates
        )
        cpu.append(time.process_time() - clock)
        wall.append(time.perf_counter() - started)
    (built,) = document["reports"]
    listed = [item["item"] for item in built["items"]]
    threshold = built["discovery"]["threshold"]
    heavy = {value for value, count in truth.items() if count >= threshold}
    found = heavy.intersection(listed)
    return {
        "report_cpu_s": statistics.median(cpu),
        "report_wall_s": statistics.median(wall),
        "candidates": built["discovery"]["candidates"],
        "threshold": threshold,
        "expected_false_discoveries": built["discovery"]["expected_false_discoveries"],
        "heavy": len(heavy),
        "listed": len(listed),
        "recall": len(found) / len(heavy) if heavy else None,
        "precision": len(found) / len(listed) if listed else None,
        "listed_nobody_holds": sum(1 for value in listed if value not in truth),
        "found": listed,
    }


def measure(
    url: str, campaign: Campaign, values: list[str], truth: dict[str, int], builds: int
) -> dict[str, Any]:
    config = campaign.config
    entries = payloads(config, values, SEED)
    row: dict[str, Any] = {
        "campaign": campaign.label,
        "epsilon": config.epsilon,
        "k": config.params["k"],
        "m": config.params["m"],
        "groups": getattr(config.build_mechanism(), "groups", None),
        "n": len(values),
        "payload_mib": sum(map(len, entries)) / 2**20,
        **support_rate(config, entries, len(values)),
    }
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
        register(client, config)
        fill(client, config, entries)
        del entries
        row.update(aggregation_pass(client, config, len(values)))
        row.update(state_memory(client, config))
        row.update(report(client, campaign, truth, builds))
    finally:
        client.flushdb()
        client.close()
    return row


def ratio(row: dict[str, Any], reference: dict[str, Any], key: str) -> str:
    """The figure, and beside a PEM row its ratio to the reference's."""
    if row is reference:
        return f"{row[key]:,.3g}"
    return f"{row[key]:,.3g} ({row[key] / reference[key]:.2f}x)"


def share(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_row(row: dict[str, Any], reference: dict[str, Any]) -> None:
    """A markdown row: each figure with its ratio to the CMS reference of its epsilon."""
    groups = row["groups"] or "-"
    print(
        f"| {row['epsilon']:g} | {row['campaign']} | {row['k']} x {row['m']} | {groups} "
        f"| {ratio(row, reference, 'support_reports_per_s')} "
        f"| {ratio(row, reference, 'pass_reports_per_s')} "
        f"| {row['pass_cpu_s']:.1f} / {row['pass_redis_cpu_s']:.2f} "
        f"| {row['longest_step_s']:.1f} ({row['longest_step_s'] / LEASE_S:.0%}) "
        f"| {ratio(row, reference, 'state_mib')} ({row['state_mib'] / REDIS_STRING_MIB:.1%}) "
        f"| {ratio(row, reference, 'report_cpu_s')} | {row['report_wall_s']:.1f} "
        f"| {row['candidates']:,} | {row['threshold']:,.0f} | {row['heavy']} | {row['listed']} "
        f"| {share(row['recall'])} | {share(row['precision'])} | {row['listed_nobody_holds']} |",
        flush=True,
    )


def campaign_rows(
    epsilons: list[float],
    rows: list[int | None],
    words: list[str],
    values: list[str],
    builds: int,
) -> list[dict[str, Any]]:
    """Every campaign end to end at each epsilon, printed as markdown rows."""
    truth = dict(Counter(values))
    print(
        "| ε | campaign | k x m | groups | support reports/s | pass reports/s "
        "| pass CPU s worker / redis | longest step s (of the lease) | state MiB (of 512) "
        "| report CPU s | report wall s | candidates | threshold T | heavy | listed "
        "| recall | precision | listed, nobody holds |"
    )
    print("|---" * 18 + "|")
    measured = []
    with RedisServer(appendonly=False) as server:
        for epsilon in epsilons:
            reference: dict[str, Any] | None = None
            for campaign in campaigns(epsilon, rows, words):
                row = measure(server.url, campaign, values, truth, builds)
                reference = reference or row
                print_row(row, reference)
                measured.append(row)
    return measured


def repeated(
    n: int, size: int, epsilons: list[float], rows: list[int], repeats: int
) -> list[dict[str, Any]]:
    """PEM's discovery on `repeats` fresh data sets at every (epsilon, k): see the module doc."""
    runs: dict[tuple[float, int], list[dict[str, Any]]] = {}
    for repeat in range(repeats):
        rng = np.random.default_rng([SEED, repeat])
        values = users(vocabulary(size, rng), n, rng)
        truth = dict(Counter(values))
        top = {value for value, _ in Counter(values).most_common(TOP_STRINGS)}
        for epsilon in epsilons:
            for k in rows:
                pem = PrefixExtendingMethod(
                    epsilon=epsilon, max_length=MAX_LENGTH, top_k=TOP_K, k=k, m=PEM_WIDTH
                )
                draws = np.random.default_rng([SEED, repeat, int(epsilon * 1000), k])
                supports, sizes = group_supports(pem, values, draws)
                started = time.process_time()
                result = HeavyHitterSimulation(pem.discover(supports, sizes), truth)
                runs.setdefault((epsilon, k), []).append(
                    {
                        "discovery_cpu_s": time.process_time() - started,
                        "threshold": result.discovery.threshold,
                        "heavy": len(result.heavy),
                        "listed": len(result.discovery.values),
                        "recall": result.recall,
                        "precision": result.precision,
                        "nobody": sum(1 for v in result.discovery.values if v not in truth),
                        "top_found": len(top.intersection(result.discovery.values)),
                        "state_mib": 8 * pem.support_size / 2**20,
                    }
                )
    return [summary(epsilon, k, found) for (epsilon, k), found in runs.items()]


def summary(epsilon: float, k: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(key: str) -> float:
        return statistics.fmean(r[key] for r in runs if r[key] is not None)

    row = {"epsilon": epsilon, "k": k, "repeats": len(runs), "runs": runs}
    row.update({key: mean(key) for key in ("threshold", "heavy", "listed", "recall", "top_found")})
    row.update({key: mean(key) for key in ("precision", "discovery_cpu_s", "state_mib")})
    row["recall_range"] = [min(r["recall"] for r in runs), max(r["recall"] for r in runs)]
    row["nobody"] = sum(r["nobody"] for r in runs)
    print(
        f"| {epsilon:g} | {k} x {PEM_WIDTH} | {row['state_mib']:.2f} | {row['threshold']:,.0f} "
        f"| {row['heavy']:.1f} | {row['listed']:.1f} | {row['recall']:.2f} "
        f"({row['recall_range'][0]:.2f}-{row['recall_range'][1]:.2f}) "
        f"| {row['precision']:.2f} | {row['top_found']:.1f} | {row['nobody']} "
        f"| {row['discovery_cpu_s']:.2f} |",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--vocabulary", type=int, default=100_000)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[2.0, 4.0])
    parser.add_argument(
        "--rows", type=int, nargs="+", default=None,
        help="PEM sketch rows k to measure (default: the campaign default)",
    )  # fmt: skip
    parser.add_argument("--builds", type=int, default=3, help="report builds (median)")
    parser.add_argument(
        "--repeats", type=int, default=0,
        help="then PEM's discovery alone on this many fresh data sets per (epsilon, k)",
    )  # fmt: skip
    parser.add_argument("--no-campaigns", action="store_true", help="only the --repeats part")
    parser.add_argument("--out", default=str(HERE / "results" / "pem_campaign.json"))
    args = parser.parse_args()
    words = vocabulary(args.vocabulary, np.random.default_rng(SEED))
    values = users(words, args.n, np.random.default_rng(SEED + args.n))
    rows: list[dict[str, Any]] = []
    if not args.no_campaigns:
        rows = campaign_rows(args.epsilons, args.rows or [None], words, values, args.builds)
    repeats: list[dict[str, Any]] = []
    if args.repeats:
        print(
            "\n| ε | k x m | state MiB | mean T | mean heavy | mean listed | recall (range) "
            f"| precision | of the true top {TOP_STRINGS} listed | listed, nobody holds (sum) "
            "| discovery CPU s |"
        )
        print("|---" * 11 + "|")
        repeats = repeated(
            args.n, args.vocabulary, args.epsilons, args.rows or [DEFAULT_ROWS], args.repeats
        )
    result = {
        "generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "load_average": os.getloadavg()[0],
        "vocabulary": args.vocabulary,
        "zipf_exponent": ZIPF_EXPONENT,
        "max_length": MAX_LENGTH,
        "top_k": TOP_K,
        "true_top": sorted(Counter(values).values(), reverse=True)[:30],
        "rows": rows,
        "repeats": repeats,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
