"""What the collector's single-report request costs beyond the bare-Flask floor, part by part:
`ldptel collector serve` with parts of the request replaced by nothing (ablations, for
measurement only), beside the floor of collector_floor.py, all served at once on the same
gunicorn/gevent settings, each with its own private redis-server, measured in turns.

    .venv/bin/python benchmarks/collector_ablation.py [--rounds 5] [--seconds 3]

Ablations: `log` (no access log line), `metrics` (no request, accepted and batch-size
metrics), `validate` (the batch's validation done once and reused: no config lookup, no
decode), `script` (the ingest script replaced by one XADD of the packed entry: no rate
count, no idempotency mark, no digest). CPU per request is the gunicorn workers' and their
redis-server's (/proc), as in collector_floor.py.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
from typing import Any

from collector_floor import create_campaign, serve_floor, wait_ready
from collector_ingest import ADMIN, cpu_seconds, free_port, http_rate, make_body, process_tree

from ldptel.client.campaign import CampaignConfig
from ldptel.store.redis_server import RedisServer

FLOOR = "floor"
VARIANTS = (FLOOR, "", "log", "metrics", "validate", "script", "log,metrics,validate,script")


def ablate(parts: set[str]) -> None:
    """Replace the named parts of the collector's request path by nothing (this process and
    the gunicorn workers it forks)."""
    from ldptel.collector import ingest, metrics
    from ldptel.store import logs

    class Nothing:
        def observe(self, *args: Any) -> None: ...
        def inc(self, *args: Any) -> None: ...
        def labels(self, *args: Any) -> Nothing:
            return self

    if "log" in parts:
        logs.info = lambda *args, **kwargs: None  # type: ignore[assignment]
    if "metrics" in parts:
        metrics.request_seconds = lambda endpoint: Nothing()  # type: ignore[assignment,return-value]
        metrics.REPORTS_ACCEPTED = metrics.BATCH_SIZE = Nothing()  # type: ignore[assignment]
    if "script" in parts:

        def append(self: Any, batch: Any, key: str, token_hash: str, **_: Any) -> Any:
            self.redis.xadd("floor", {"b": batch.packed})
            return ingest.Stored(accepted=batch.n, duplicate=False)

        ingest.Ingestor.append = append  # type: ignore[method-assign]
    if "validate" in parts:
        validate, seen = ingest.Ingestor.validate, {}

        def once(self: Any, batch: Any) -> Any:
            key = (batch.campaign, len(batch.reports))
            if key not in seen:
                seen[key] = validate(self, batch)
            return seen[key]

        ingest.Ingestor.validate = once  # type: ignore[method-assign]


def start(variant: str, redis_url: str, config: CampaignConfig) -> tuple[Any, int, str, bytes]:
    """A served variant: (process, port, token, body of one report)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    if variant == FLOOR:
        floor = multiprocessing.Process(target=serve_floor, args=(redis_url, port))
        floor.start()
        wait_ready(url)
        return floor, port, "none", make_body(config, "none", 1)
    env = {**os.environ, "LDPTEL_ADMIN_TOKEN": ADMIN, "ABLATE": variant}
    server = subprocess.Popen(
        [sys.executable, __file__, "serve", "--port", str(port), "--redis-url", redis_url,
         "--workers", "2", "--rate-limit", "0"],
        env=env, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_ready(url)
    config_id, token = create_campaign(url, config)
    return server, port, token, make_body(config, config_id, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    config = CampaignConfig.from_dict(
        {"name": "bench", "oracle": "oue", "epsilon": 1.0, "domain": [f"v{i}" for i in range(64)]}
    )
    load = os.getloadavg()[0]
    servers, stores = {}, []
    try:
        for variant in VARIANTS:
            store = RedisServer(appendonly=True)
            stores.append(store.__enter__())
            process, port, token, body = start(variant, store.url, config)
            http_rate(port, token, body, 1, 1, 2, 1.0)  # warm up
            pids = [*process_tree(process.pid), store.process.pid]  # type: ignore[union-attr]
            servers[variant] = (process, port, token, body, pids)
        cpu: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
        for _ in range(args.rounds):
            for variant, (_, port, token, body, pids) in servers.items():
                before = cpu_seconds(pids)
                result = http_rate(port, token, body, 1, 2, 8, args.seconds)
                assert result["errors"] == 0, result
                accepted = result["requests_per_s"] * result["elapsed"]
                cpu[variant].append((cpu_seconds(pids) - before) / accepted * 1e6)
    finally:
        for process, *_ in servers.values():
            process.terminate()
            process.join() if isinstance(process, multiprocessing.Process) else process.wait()
        for store in stores:
            store.__exit__(None, None, None)
    floor = statistics.median(cpu[FLOOR])
    print(f"load average {load:.2f} -> {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print("| variant | CPU µs/request (rounds) | median | floor / variant |")
    print("|---|---|---:|---:|")
    for variant, rounds in cpu.items():
        name = variant or "the collector"
        if variant not in (FLOOR, ""):
            name = "without " + variant.replace(",", ", ")
        median = statistics.median(rounds)
        print(f"| {name} | {', '.join(f'{r:.0f}' for r in rounds)} | {median:.0f} | "
              f"{floor / median:.2f} |")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:  # a served variant: ablate, then `ldptel collector serve`
        ablate(set(filter(None, os.environ.get("ABLATE", "").split(","))))
        from ldptel.cli.main import main as ldptel

        sys.exit(ldptel(["collector", *sys.argv[1:]]))
    main()
