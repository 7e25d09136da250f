"""Sketch window state, a hash of cells (before) against a packed string (after): Redis memory
of the state and the time of the aggregation pass and of reading the state for a report, for
CMS and HCMS with k = 64 rows and at their defaults (k = m = 1024: 2^20 and 2^21 cells), at
epsilon = 4. A pass that fails (the hash form at the defaults: its script runs so long that
Redis answers BUSY to other clients) is reported as such.

    .venv/bin/python benchmarks/sketch_state.py [--quick]

"hash" forces the old form (one HINCRBY per nonzero cell in one EVAL, aggregator/state.py)
through `state.packs`; "packed" is the shipped rule (sparse deltas by BITFIELD, dense ones
rewritten). Entries are 1000-report batches in the collector's format, drained by one
worker pass (entries per step: the default 1000, and 10, where a pass adds to the state 10
times more often). Memory: MEMORY USAGE of the state's keys (its hash and its packed
string; "state MiB"). Wall and CPU seconds of the worker and redis-server; "read ms":
median wall time of 5 read_state calls (what a report reads).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import redis
from aggregate import redis_cpu_seconds, register

from ldptel.aggregator import state as window_state
from ldptel.aggregator.state import StateKey, read_state
from ldptel.aggregator.worker import Worker
from ldptel.client.campaign import CampaignConfig
from ldptel.client.hashing import item_keys
from ldptel.store import keys
from ldptel.store.redis_server import RedisServer

BATCH = 1000
WINDOW = 1_700_006_400
#: A long lease (the default is 30 s), so that a slow step on a loaded machine measures the
#: step, not the lease; a Lua script longer than redis-server's 5 s still makes Redis answer
#: BUSY to every other client (the collector included) until it ends.
LEASE_MS = 600_000


def fill(client: redis.Redis, config: CampaignConfig, n: int) -> None:
    """n reports of Zipf-distributed strings, in BATCH-sized entries, each drawn afresh (so
    HCMS's one-cell reports touch as many cells as real ones would)."""
    oracle = config.build_open()
    rng = np.random.default_rng(0)
    words = item_keys(f"word {i}" for i in range(10_000))
    stream = keys.stream(config.name, 0)
    with client.pipeline(transaction=False) as pipe:
        for _ in range(n // BATCH):
            batch = oracle.perturb_keys(words[rng.zipf(1.3, BATCH) % words.size], rng)
            fields = {"c": config.config_id, "w": WINDOW, "n": BATCH, "l": ""}
            pipe.xadd(stream, {**fields, "p": oracle.pack(batch)})
        pipe.execute()


def measure(url: str, oracle: str, k: int, n: int, entries: int, packed: bool) -> dict[str, Any]:
    client = redis.Redis.from_url(url)
    client.flushdb()
    config = CampaignConfig.from_dict(
        {"name": f"bench-{oracle}", "oracle": oracle, "epsilon": 4.0, "max_length": 64,
         "params": {"k": k}}
    ).as_created()  # fmt: skip
    register(client, config)
    fill(client, config, n)
    window_state.packs = (lambda size: True) if packed else (lambda size: False)  # type: ignore[assignment]
    redis_cpu, cpu, started = redis_cpu_seconds(client), time.process_time(), time.perf_counter()
    worker = Worker(client, build_reports=False, batch_entries=entries, lease_ms=LEASE_MS)
    stats = worker.run_pass()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    redis_cpu = redis_cpu_seconds(client) - redis_cpu
    if stats.reports != n:
        raise RuntimeError(f"{stats.reports} of {n} reports counted: a step outlasted the lease")
    state = StateKey(WINDOW, config.config_id)
    memory = sum(
        int(client.memory_usage(key, samples=0) or 0)
        for key in (state.redis_key(config.name, 0), state.cells_key(config.name, 0))
    )
    size = config.build_open().support_size
    reads = []
    for _ in range(5):
        started = time.perf_counter()
        read_state(client, config.name, [0], state, size)
        reads.append(time.perf_counter() - started)
    client.flushdb()
    client.close()
    return {
        "oracle": oracle, "cells": size, "n": n, "entries": entries,
        "form": "packed" if packed else "hash", "mib": memory / 2**20, "seconds": seconds,
        "cpu": cpu, "redis_cpu": redis_cpu, "read_ms": statistics.median(reads) * 1000,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="n = 20,000 (a smoke run)")
    args = parser.parse_args()
    n = 20_000 if args.quick else 200_000
    print(
        "| oracle | cells | n | entries/step | state | state MiB | pass s | worker CPU s "
        "| redis CPU s | read ms |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    with RedisServer(appendonly=False) as server:
        for oracle, k, entries, packed in runs():
            try:
                r = measure(server.url, oracle, k, n, entries, packed)
            except (redis.RedisError, RuntimeError) as error:
                print(f"| {oracle} | {k * 1024:,} | {n:,} | {entries} | hash | failed: "
                      f"{str(error)[:40]} | | | | |", flush=True)  # fmt: skip
                continue
            print(
                f"| {r['oracle']} | {r['cells']:,} | {r['n']:,} | {r['entries']} | "
                f"{r['form']} | {r['mib']:.1f} | {r['seconds']:.2f} | {r['cpu']:.2f} | "
                f"{r['redis_cpu']:.2f} | {r['read_ms']:.0f} |",
                flush=True,
            )


def runs() -> list[tuple[str, int, int, bool]]:
    """(oracle, k, entries per step, packed): both forms at k = 64, the packed one at the
    default k = 1024, and last (its script keeps Redis busy after the failure) the hash form
    there once (CMS)."""
    small = [(o, 64, e, p) for o in ("cms", "hcms") for e in (1000, 10) for p in (False, True)]
    large = [(o, 1024, e, True) for o in ("cms", "hcms") for e in (1000, 10)]
    return [*small, *large, ("cms", 1024, 1000, False)]


if __name__ == "__main__":
    main()
