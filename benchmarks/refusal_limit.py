"""Refused requests against the rate limit: normal clients' throughput while one token floods
the collector with gzip bombs, with the rate limit off and on (collector/auth.py,
RefusalLimit).

    .venv/bin/python benchmarks/refusal_limit.py [--seconds 5] [--rate-limit 200] [--json out]

Normal clients: 16 keep-alive raw-socket clients in 2 processes, each with its own token (16
apps), posting batches of 100 OUE reports (d = 64); one more token's 16 back-to-back senders
post ~4 KiB gzip bombs (collector_front_door.py). For each setting, quiet and flooded
measurements alternate (3 each), since other jobs change the machine's speed minute to minute.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np
from collector_front_door import (
    BOMB_SENDERS,
    _bombers,
    admin_post,
    bombs,
    emit,
    normal_load,
    serving,
    with_hostile,
    workers_of,
)
from collector_ingest import make_body

from ldptel.client.campaign import CampaignConfig
from ldptel.store.redis_server import RedisServer

APPS = 16


def measure(
    rate_limit: int,
    seconds: float,
    *,
    shared_token: bool = False,
    senders: int = BOMB_SENDERS,
    refusal_delay: float = 0.0,
) -> dict[str, Any]:
    """Quiet and flooded normal throughput, 3 of each, interleaved, at one rate limit. With
    `shared_token`, the bombers use the normal clients' one token (an app's public token)."""
    config = CampaignConfig.from_dict(
        {"name": "bench", "oracle": "oue", "epsilon": 1.0, "domain": [f"v{i}" for i in range(64)]}
    )
    result: dict[str, Any] = {"rate_limit": rate_limit, "refusal_delay": refusal_delay,
                              "quiet": [], "flooded": [], "bombs": []}  # fmt: skip
    with (
        RedisServer(appendonly=True) as server,
        serving(server.url, rate_limit, refusal_delay) as (port, proc),
    ):
        config_id = admin_post(port, "/v1/campaigns", config.to_dict())["config_id"]
        apps = 1 if shared_token else APPS
        tokens = [admin_post(port, "/v1/tokens", {"app": f"app{i}"})["token"] for i in range(apps)]
        flooder = (
            tokens[0] if shared_token else admin_post(port, "/v1/tokens", {"app": "x"})["token"]
        )
        body = make_body(config, config_id, 100)
        pids = workers_of(proc.pid)
        normal_load(port, tokens, body, APPS, 1.0, pids)  # warm-up: every worker has loaded
        bodies = bombs("bench", config_id)
        for _ in range(3):
            result["quiet"].append(normal_load(port, tokens, body, APPS, seconds, pids))
            flooded, answers = with_hostile(
                _bombers, (port, flooder, bodies, senders),
                lambda: normal_load(port, tokens, body, APPS, seconds, pids),
            )  # fmt: skip
            result["flooded"].append(flooded)
            result["bombs"].append(answers)
    quiet = [run["requests_per_s"] for run in result["quiet"]]
    flooded = [run["requests_per_s"] for run in result["flooded"]]
    result["ratios"] = [f / q for q, f in zip(quiet, flooded, strict=True)]
    result["ratio_of_medians"] = float(np.median(flooded) / np.median(quiet))
    result["median_ratio"] = float(np.median(result["ratios"]))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per measurement")
    parser.add_argument("--rate-limit", type=int, default=200, help="per token and second")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    results: dict[str, Any] = {"load_average_before": os.getloadavg()}
    results["off"] = measure(0, args.seconds)
    results["on"] = measure(args.rate_limit, args.seconds)
    results["load_average_after"] = os.getloadavg()
    emit(results, args.json)


if __name__ == "__main__":
    main()
