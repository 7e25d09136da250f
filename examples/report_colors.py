"""Simulated app installs reporting their favourite color, and their start-up latency in ms
to the numeric campaign `latency` (examples/latency.json) if the collector has it, through
the ldptel SDK, as the README's walk-through does: each install has its own state directory
(privacy ledger, memo, spool), randomizes its values on the device and posts them to the
collector.

    INGEST_TOKEN=... python examples/report_colors.py http://127.0.0.1:8080 [INSTALLS]
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ldptel.client import Reporter

#: The domain of examples/colors.json, and how often each color is the true favourite.
COLORS = ["red", "orange", "yellow", "green", "blue", "purple", "black", "white"]
WEIGHTS = [8, 2, 3, 6, 10, 4, 2, 1]


def one_install(url: str, token: str, root: Path, install: int, color: str, latency: float) -> None:
    with Reporter(url, token, state_dir=root / str(install)) as reporter:
        status = reporter.report("colors", color)
        if not status:  # truthy only once the report is spooled
            raise SystemExit(f"install {install}: not reported: {status}")
        # A number, clipped into the campaign's range [0, 2000]; UNKNOWN_CAMPAIGN if the
        # collector has no `latency` campaign (report() never raises).
        reporter.report("latency", latency)
        if not reporter.flush(timeout=30):
            raise SystemExit(f"install {install}: the report was not delivered")


def main() -> int:
    url = sys.argv[1]
    installs = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    token = os.environ["INGEST_TOKEN"]  # an app's token, from `ldptel collector token create`
    # The true values are simulated (seeded); the SDK randomizes each with the OS CSPRNG.
    simulated = random.Random(1)
    colors = simulated.choices(COLORS, weights=WEIGHTS, k=installs)
    latencies = [simulated.lognormvariate(5.0, 0.8) for _ in range(installs)]  # median 148 ms
    with tempfile.TemporaryDirectory() as root, ThreadPoolExecutor(8) as pool:
        jobs = [
            pool.submit(one_install, url, token, Path(root), i, c, ms)
            for i, (c, ms) in enumerate(zip(colors, latencies, strict=True))
        ]
        for job in jobs:
            job.result()
    print(f"{installs} installs reported their color (and start-up latency)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
