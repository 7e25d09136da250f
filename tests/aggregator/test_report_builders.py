"""Two workers building the same window's report at once never leave a stale report behind
for good: the slower builder cannot overwrite a newer report and mark the window done."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from stream_entries import make_config, register, simulate

from ldptel.aggregator.reports import load_window
from ldptel.aggregator.sinks import store as store_sink
from ldptel.aggregator.worker import Worker

WINDOW = 1_700_006_400


def stored_n(client: Any, name: str) -> int:
    document = load_window(client, name, WINDOW)
    assert document is not None
    return int(document["reports"][0]["n"])


def test_a_slow_builder_does_not_leave_a_stale_report(redis_client: Any, monkeypatch: Any) -> None:
    config = make_config()
    register(redis_client, config)
    simulate(redis_client, config, np.zeros(300, dtype=np.int64), window=WINDOW)
    Worker(redis_client, build_reports=False).run_pass()  # 300 reports applied, report pending

    built, resume = threading.Event(), threading.Event()
    store = store_sink.store_window

    def slow_store(client: Any, document: Any) -> None:
        if threading.current_thread().name == "slow":
            built.set()  # built from 300 reports; stalls before storing
            assert resume.wait(30)
        store(client, document)

    monkeypatch.setattr(store_sink, "store_window", slow_store)  # the store sink's save
    slow = threading.Thread(target=Worker(redis_client, worker_id="a").run_pass, name="slow")
    slow.start()
    assert built.wait(30)

    # Meanwhile 200 more reports are applied and another worker runs a full pass.
    simulate(redis_client, config, np.ones(200, dtype=np.int64), window=WINDOW, seed=1)
    Worker(redis_client, worker_id="b").run_pass()
    resume.set()
    slow.join(30)

    # Whatever the interleaving, the next pass leaves the stored report equal to the state.
    Worker(redis_client, worker_id="c").run_pass()
    assert stored_n(redis_client, config.name) == 500
