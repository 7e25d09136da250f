"""The aggregator SIGKILLed mid-pass while the served collector takes batches, then restarted
with the same worker id: every acknowledged report is in the window state exactly once (its
`n` and every item's count equal what the clients sent), and so is the window report.

Exactly-once rests on one MULTI/EXEC per step (state delta and checkpoint together,
aggregator/shard.py): a kill before EXEC applies nothing, after it everything, and the
restarted worker goes on from the checkpoint."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from load_clients import assert_exactly_once, setup
from served_collector import served
from waiting import scaled, wait_for

from ldptel.aggregator.model import from_json
from ldptel.store import keys, reports

KILLS = 2
SENDERS = 4
DOMAIN = 5


def values_of(i: int) -> list[int]:
    """What load_clients.Client.send(i) reports: (1 + i % 4) times the value i % 5."""
    return [i % DOMAIN] * (1 + i % 4)


def start_aggregator(redis_url: str, log: Path) -> subprocess.Popen[bytes]:
    """`ldptel aggregator run --every` as deployed, with a small step (3 entries per
    transaction) and a short interval, so that a pass is nearly always under way."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "ldptel.cli", "aggregator", "run", "--every", "0.2s",
             "--worker-id", "aggregator-0", "--batch-entries", "3", "--redis-url", redis_url],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def behind(client: Any) -> bool:
    """The stream holds entries past the aggregator's checkpoint (a pass has work to do)."""
    last = client.xrevrange(keys.stream("colors", 0), count=1)
    return bool(last) and client.get(keys.checkpoint("colors", 0)) != last[0][0]


def state_totals(client: Any) -> tuple[int, np.ndarray]:
    """n and the item counts over every window state of the campaign."""
    n, support = 0, np.zeros(DOMAIN, dtype=np.int64)
    for key in client.scan_iter(match=f"{keys.PREFIX}:{{colors:0}}:state:*"):
        for field, value in client.hgetall(key).items():
            if field == b"n":
                n += int(value)
            else:
                support[int(field)] += int(value)
    return n, support


def test_the_aggregator_killed_mid_pass_under_load_loses_and_doubles_nothing(
    redis_url: str, redis_client: Any, tmp_path: Path
) -> None:
    log = tmp_path / "aggregator.log"
    aggregator = start_aggregator(redis_url, log)  # it starts while the collector does
    with served(redis_url, tmp_path, workers=1) as collector:
        client = setup(collector)
        numbers = itertools.count()
        sent: list[int] = []
        done = threading.Event()

        def keep_sending() -> None:
            while not done.is_set():
                i = next(numbers)
                client.send(i)  # retried until acknowledged, or the test fails
                sent.append(i)
            client.session().close()  # an idle keep-alive would hold the collector's stop

        try:
            with ThreadPoolExecutor(SENDERS) as pool:
                senders = [pool.submit(keep_sending) for _ in range(SENDERS)]
                try:
                    for _ in range(KILLS):
                        # Kill right after a step committed while entries wait: mid-pass.
                        before = redis_client.get(keys.checkpoint("colors", 0))
                        wait_for(
                            lambda before=before: (
                                behind(redis_client)
                                and redis_client.get(keys.checkpoint("colors", 0)) != before
                            ),
                            "the aggregator to apply a step with entries still waiting",
                        )
                        aggregator.send_signal(signal.SIGKILL)
                        aggregator.wait()
                        aggregator = start_aggregator(redis_url, log)
                finally:
                    done.set()
                    for sender in senders:
                        sender.result()
            wait_for(lambda: not behind(redis_client), "the restarted aggregator to catch up")
            total = sum(len(values_of(i)) for i in sent)
            wait_for(lambda: report_n(redis_client) == total, "the window report")
        finally:
            aggregator.send_signal(signal.SIGTERM)
            assert aggregator.wait(timeout=scaled(60)) == 0, log.read_text()

    assert_exactly_once(client, redis_client)  # the collector stored each batch once
    expected = np.zeros(DOMAIN, dtype=np.int64)
    for i in sent:
        expected[i % DOMAIN] += len(values_of(i))
    n, support = state_totals(redis_client)
    assert n == total == sum(client.acknowledged.values())
    assert support.tolist() == expected.tolist()


def report_n(client: Any) -> int:
    """Reports counted by the stored window reports of the campaign."""
    total = 0
    for key in client.scan_iter(match=f"{keys.PREFIX}:report:colors:*"):
        window = int(key.rsplit(b":", 1)[1])
        raw = reports.load(client, "colors", window)
        total += sum(report["n"] for report in from_json(raw or b"{}")["reports"])
    return total
