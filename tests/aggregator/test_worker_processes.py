"""Worker processes: killed with SIGKILL at random instants and restarted, or run three at a
time, they reach exactly the state of one uninterrupted worker, bit for bit."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from functools import partial
from typing import Any

import numpy as np
import pytest
from stream_entries import dump_states, make_config, register, simulate
from waiting import wait_for

from ldptel.aggregator.worker import Worker
from ldptel.store import keys

WINDOW = 1_700_006_400


def populate(client: Any, shards: int, corrupt_every: int = 0) -> list[Any]:
    """Two campaigns, two windows, a few hundred entries per shard; some corrupt entries."""
    configs = [make_config("alpha", shards=shards), make_config("beta", shards=shards, epsilon=2)]
    for number, config in enumerate(configs):
        register(client, config)
        rng = np.random.default_rng(number)
        for window in (WINDOW, WINDOW + 86_400):
            values = rng.integers(0, 8, 20_000)
            simulate(client, config, values, window=window, batch_size=50, seed=window + number)
    if corrupt_every:
        for index in range(0, 40, corrupt_every):
            client.xadd(keys.stream("alpha", index % shards), {"c": "f" * 16, "w": WINDOW})
    return configs


def worker_command(url: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "ldptel.cli", "aggregator", "run", "--once", "--quiet",
        "--redis-url", url, "--batch-entries", "3", *extra,
    ]  # fmt: skip


def caught_up(client: Any, configs: list[Any]) -> bool:
    """Every shard's checkpoint is at its stream's last entry."""
    for config in configs:
        for shard in range(config.shards):
            last = client.xrevrange(keys.stream(config.name, shard), count=1)
            if last and client.get(keys.checkpoint(config.name, shard)) != last[0][0]:
                return False
    return True


def progress(client: Any, configs: list[Any]) -> list[bytes | None]:
    return [
        client.get(keys.checkpoint(config.name, shard))
        for config in configs
        for shard in range(config.shards)
    ]


def moved(client: Any, configs: list[Any], before: Any, process: subprocess.Popen[bytes]) -> bool:
    """The worker has made progress since `before`, or has ended."""
    return progress(client, configs) != before or process.poll() is not None


def reports_of(client: Any, names: list[str]) -> dict[bytes, Any]:
    """Stored window reports without their build times."""
    import json

    documents = {}
    for key in sorted(client.scan_iter(match=f"{keys.PREFIX}:report:*")):
        document = json.loads(client.get(key))
        document.pop("built_at")
        for report in document["reports"]:
            report.pop("built_at")
        documents[key] = document
    return documents


@pytest.mark.slow
def test_sigkill_at_random_instants_neither_loses_nor_doubles(
    redis_client: Any, reference_client: Any, redis_url: str
) -> None:
    configs = populate(redis_client, shards=2, corrupt_every=7)
    populate(reference_client, shards=2, corrupt_every=7)
    Worker(reference_client, batch_entries=3).run_pass()

    chance = random.Random(20240601)
    interrupted = 0
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for _round in range(40):
        if caught_up(redis_client, configs):
            break
        before = progress(redis_client, configs)
        process = subprocess.Popen(
            worker_command(redis_url, "--worker-id", "victim"),
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        # Wait until the worker is really aggregating, then kill it a random moment later.
        made_progress = partial(moved, redis_client, configs, before, process)
        wait_for(made_progress, "the worker made progress", interval=0.005)
        time.sleep(chance.uniform(0.0, 0.15))
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            interrupted += 1
        process.wait()
    else:
        pytest.fail("the worker never caught up")
    # The last run may have finished on its own; complete whatever a kill left undone.
    subprocess.run(worker_command(redis_url, "--worker-id", "victim"), check=True, timeout=120)

    print("kills mid-aggregation:", interrupted)
    assert interrupted >= 3, "too few kills landed mid-aggregation to mean anything"
    assert dump_states(redis_client) == dump_states(reference_client)
    quarantine = keys.quarantine("alpha", 0), keys.quarantine("alpha", 1)
    for key in quarantine:
        assert redis_client.xlen(key) == reference_client.xlen(key) > 0
    assert reports_of(redis_client, ["alpha", "beta"]) == reports_of(
        reference_client, ["alpha", "beta"]
    )


@pytest.mark.slow
def test_three_parallel_workers_equal_one(
    redis_client: Any, reference_client: Any, redis_url: str
) -> None:
    configs = populate(redis_client, shards=6)
    populate(reference_client, shards=6)
    Worker(reference_client, batch_entries=3).run_pass()

    processes = [
        subprocess.Popen(
            worker_command(redis_url, "--worker-id", f"parallel-{number}"),
            stdout=subprocess.PIPE,
            text=True,
        )
        for number in range(3)
    ]
    outputs = [process.communicate(timeout=120)[0] for process in processes]

    assert all(process.returncode == 0 for process in processes)
    assert caught_up(redis_client, configs)
    # Each worker reports what it applied; together exactly every report, once.
    applied = sum(int(out.split()[1].replace(",", "")) for out in outputs)
    assert applied == 2 * 2 * 20_000
    assert dump_states(redis_client) == dump_states(reference_client)
