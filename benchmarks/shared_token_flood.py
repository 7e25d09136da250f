"""Gzip bombs sent with the app's own ingest token (it ships in every app, so it is public):
normal clients' share of their quiet rate under 8 bomb senders that use the same token, with
refusals answered at once and with the refusal delay (collector/auth.py, RefusalLimit;
LDPTEL_REFUSAL_DELAY_SECONDS), at the default rate limit (1,000 requests per token and s).

    .venv/bin/python benchmarks/shared_token_flood.py [--seconds 4] [--delay 0.25]
        [--rate-limit 1000] [--json out]

Normal clients: 16 keep-alive raw-socket clients in 2 processes, all with the one token,
posting batches of 100 OUE reports (d = 64); 8 bomb senders with that token post ~4 KiB gzip
bombs back to back, each waiting for its answer (collector_front_door.py). For each delay,
quiet and flooded measurements alternate (3 each), since other jobs change the machine's
speed minute to minute; the figure is the median of the 3 flooded/quiet ratios (of answers
202: at the default limit the 16 clients alone pass 1,000/s at times and get some 429s, so
run it with `--rate-limit 0` too, where only the CPU is shared).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from collector_front_door import emit
from refusal_limit import measure

SENDERS = 8
RATE_LIMIT = 1_000  # the default (collector/settings.py)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="per measurement")
    parser.add_argument("--delay", type=float, default=0.25, help="the refusal delay (s)")
    parser.add_argument("--rate-limit", type=int, default=RATE_LIMIT, help="0 = off")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    results: dict[str, Any] = {"load_average_before": os.getloadavg()}
    for name, delay in (("at_once", 0.0), ("delayed", args.delay)):
        results[name] = measure(
            args.rate_limit, args.seconds, shared_token=True, senders=SENDERS, refusal_delay=delay
        )
    results["load_average_after"] = os.getloadavg()
    emit(results, args.json)


if __name__ == "__main__":
    main()
