"""The TypeScript client beside the Python SDK, in one run (benchmarks/README.md, "TypeScript
client: bundle size and report() cost"): the browser bundle's size (esbuild, minified, then
gzipped), and report() on the calling thread in Node and in Python for the same served
configs (each on a durable state: Node's journal file, Python's SQLite WAL), epsilon = 1.

    .venv/bin/python benchmarks/client_js.py [--calls 3000] [--json]

Needs client-js built (`cd client-js && npm ci && npm run build`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from client_overhead import offline_reporter, per_call

from ldptel.client.campaign import CampaignConfig

CLIENT_JS = Path(__file__).parents[1] / "client-js"
#: Untimed calls before the timed ones (client-js/bench/report-cost.mjs makes as many).
WARM_UP = 500
CASES = (("de", 32), ("olh", 1024), ("oue", 1024), ("hr", 1024), ("de", 4096))


def served(oracle: str, d: int) -> dict[str, Any]:
    """The config as the collector serves it (derived parameters written, config_id)."""
    config = CampaignConfig.from_dict(
        {
            "name": f"bench-{oracle}-{d}",
            "oracle": oracle,
            "epsilon": 1.0,
            "domain": [f"v{i}" for i in range(d)],
            "reports_per_window": 1_000_000,
            "lifetime_epsilon": 1e9,
        }
    ).as_created()
    return {**config.to_dict(), "config_id": config.config_id}


def node(script: str, *args: str) -> Any:
    done = subprocess.run(
        ["node", str(CLIENT_JS / "bench" / script), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def python_row(tmp: str, oracle: str, d: int, calls: int) -> dict[str, Any]:
    labels = [f"v{i}" for i in range(d)]
    reporter, name = offline_reporter(Path(tmp) / f"py-{oracle}{d}", oracle, d)
    for i in range(WARM_UP):  # as the Node side does (it warms its JIT)
        reporter.report(name, labels[i % d])
    cost = per_call(lambda i: reporter.report(name, labels[i % d]), calls)
    reporter.close(timeout=0)
    return {"oracle": oracle, "d": d, **cost}


def run(calls: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        configs = Path(tmp) / "configs.json"
        configs.write_text(json.dumps([served(o, d) for o, d in CASES]))
        node_rows = node("report-cost.mjs", str(configs), str(Path(tmp) / "js"), str(calls))
        py_rows = [python_row(tmp, oracle, d, calls) for oracle, d in CASES]
    return {
        "load_average": os.getloadavg(),
        "calls": calls,
        "bundle": node("bundle-size.mjs"),
        "node": node_rows,
        "python": py_rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.calls)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    load = result["load_average"]
    bundle = result["bundle"]
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    print(
        f"bundle: {bundle['minified_bytes']:,} bytes minified, "
        f"{bundle['gzipped_bytes']:,} bytes gzipped"
    )
    print(
        "| oracle | d | Node median µs | Python median µs | Node / Python | Node p99 µs "
        "| Python p99 µs | Node CPU µs | Python CPU µs |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for js, py in zip(result["node"], result["python"], strict=True):
        ratio = js["median_us"] / py["median_us"]
        print(
            f"| {js['oracle']} | {js['d']} | {js['median_us']:.1f} | {py['median_us']:.1f} | "
            f"{ratio:.2f} | {js['p99_us']:.1f} | {py['p99_us']:.1f} | {js['cpu_us']:.1f} | "
            f"{py['cpu_us']:.1f} |"
        )


if __name__ == "__main__":
    main()
