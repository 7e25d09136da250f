"""End to end: `ldptel demo --n 1000000` (private redis-server, the collector over real HTTP,
simulated users posting batches, one aggregator pass, the report), timed per stage.

    .venv/bin/python benchmarks/end_to_end.py [--n N] [--oracles oue de olh] [--repeats R]
                                              [--no-readme]

Runs the demo's own code in this process (the `ldptel demo` command, stdout and progress bars
captured) and reads its per-stage timings; prints a Markdown table and writes it into the
aggregation section of README.md between the end-to-end markers.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from ldptel.cli.demo_process import Stage
from ldptel.cli.main import main as ldptel

README = Path(__file__).with_name("README.md")
BEGIN = "<!-- end_to_end.py: begin -->"
END = "<!-- end_to_end.py: end -->"
STAGES = (
    "starting redis-server",
    "registering campaign",
    "users via the SDK",
    "users posting reports",
    "aggregating",
    "building the report",
)


def children_cpu() -> float:
    """CPU seconds of waited-for children so far (the demo's redis-server)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_demo(n: int, oracle: str) -> dict[str, Any]:
    """One `ldptel demo` run: stage seconds, wall seconds, CPU seconds, the report's n."""
    Stage.TIMINGS.clear()
    out, err = io.StringIO(), io.StringIO()
    load = os.getloadavg()[0]
    cpu = time.process_time(), children_cpu()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["demo", "--n", str(n), "--oracle", oracle, "--json", "--html", f"{tmp}/r.html"]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = ldptel(argv)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"ldptel demo failed ({status}): {err.getvalue()[-2000:]}")
    (report,) = json.loads(out.getvalue())["reports"]
    return {
        "oracle": oracle,
        "n": report["n"],
        "d": len(report["items"]),
        "stages": dict(Stage.TIMINGS),
        "wall": wall,
        "cpu": time.process_time() - cpu[0],
        "redis_cpu": children_cpu() - cpu[1],
        "load_before": load,
        "load_after": os.getloadavg()[0],
    }


def share(runs: list[dict[str, Any]], stage: str) -> float:
    """The stage's mean fraction of the runs' wall time."""
    return sum(run["stages"][stage] / run["wall"] for run in runs) / len(runs)


def markdown(runs: list[dict[str, Any]]) -> str:
    head = "| oracle | d | n | " + " | ".join(STAGES) + " | total wall | posting reports/s |"
    lines = [head, "|---|---:|---:|" + "---:|" * (len(STAGES) + 2)]
    for run in runs:
        cells = [f"{run['stages'][stage]:.2f}" for stage in STAGES]
        posting = (run["n"] - 100) / run["stages"]["users posting reports"]
        lines.append(
            f"| {run['oracle']} | {run['d']} | {run['n']:,} | " + " | ".join(cells)
            + f" | {run['wall']:.2f} | {posting:,.0f} |"
        )  # fmt: skip
    loads = [run["load_before"] for run in runs] + [run["load_after"] for run in runs]
    cpu = sum(run["cpu"] for run in runs) / len(runs)
    redis_cpu = sum(run["redis_cpu"] for run in runs) / len(runs)
    return "\n".join(
        [
            BEGIN,
            "### End to end (`end_to_end.py`)",
            "",
            f"`ldptel demo --n {runs[0]['n']:,}` run in-process by `end_to_end.py` on this "
            f"{os.cpu_count()}-core machine, shared with other engineers' jobs (1-minute load "
            f"average {min(loads):.1f}-{max(loads):.1f} during the runs). Stages in seconds: a "
            "private redis-server 7.0 (AOF off), the collector in-process on werkzeug's threaded "
            "server (real HTTP on loopback), 100 users through the client SDK (one Reporter and "
            "state directory each), the rest perturbed by the oracle's vectorized code and "
            "posted by 4 threads in batches of 1000 through the SDK's transport (validation by "
            "the collector, one stream entry per batch), one aggregator pass, the window report. "
            f"Per run, on average: {cpu:.1f} s of CPU in this process (client, collector and "
            f"aggregator share it) and {redis_cpu:.1f} s in redis-server.",
            "",
            *lines,
            "",
            f"Posting the reports over HTTP takes {share(runs, 'users posting reports'):.0%} of "
            f"the wall time on average, the aggregator pass {share(runs, 'aggregating'):.1%}. "
            "The collector's production numbers (gunicorn) are in its own section.",
            END,
        ]
    )


def update_readme(text: str) -> None:
    """Replace the marked block inside the aggregation section (nothing else changes)."""
    readme = README.read_text()
    start, end = readme.index(BEGIN), readme.index(END) + len(END)
    README.write_text(readme[:start] + text + readme[end:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--oracles", nargs="+", default=["oue", "de", "olh"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-readme", action="store_true", help="do not update README.md")
    args = parser.parse_args()
    runs = []
    for _ in range(args.repeats):
        for oracle in args.oracles:
            runs.append(run_demo(args.n, oracle))
            print(json.dumps(runs[-1]), flush=True)
    text = markdown(runs)
    print(text)
    if not args.no_readme:
        update_readme(text)


if __name__ == "__main__":
    main()
