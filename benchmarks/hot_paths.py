"""The hot paths of issue 31 beside their floors, in one run (benchmarks/README.md, "Hot paths"):

- decode: `oracle.decode` of 1000 wire reports against a numpy floor over the same base64
  texts (the field read from each report, one join, a table lookup, 4 characters to 3 bytes;
  no validation), for every oracle whose report is a byte string, and the per-report path
  alone (the decoder before issue 31);
- sketch: `oracle.support` CPU per byte of packed report, CMS and HCMS against OUE;
- device: one report of an open-domain string (cms, hcms, olh, pem) and OUE at d = 65,536,
  `oracle.perturb*` alone and through `Reporter.report` (SQLite spool included), beside DE at
  d = 64 (scalar draws of a few bytes: the report() path's own floor);
- offline: report() with the collector unreachable, this thread's CPU beside the process's
  (the sender's rounds);
- pass: one aggregator `Worker` pass over 200,000 OUE reports at d = 1,024 on a private
  redis-server: worker CPU (user and kernel), redis-server CPU, wall time, minor page faults.

CPU time of this process (time.process_time), interleaved, median of 3 repetitions; compare
the ratios of one run, not absolute times across runs (the machine is shared). `--before REV`
runs the sections on the library of commit REV (`git archive`) and on this checkout, in child
processes taking turns (before, after, three times, or --turns N), and prints each figure's
medians.

    .venv/bin/python benchmarks/hot_paths.py [decode|sketch|device|offline|idle|pass ...] [--json]
        [--before REV [--turns N]]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import redis
from client_overhead import closed_port_url, per_call
from numpy.typing import NDArray

from ldptel.client import Reporter
from ldptel.client.campaign import CampaignConfig
from ldptel.client.configs import Known, store
from ldptel.client.hashing import item_keys
from ldptel.client.oracles import batch_decode, histogram, unary
from ldptel.client.oracles.base import FrequencyOracle
from ldptel.client.oracles.batch_decode import base64_bytes, sixbit_rows
from ldptel.client.randomness import SecureRandom

REPEATS = 3


def cpu_seconds(fn: Callable[[], Any], loops: int) -> float:
    start = time.process_time()
    for _ in range(loops):
        fn()
    return (time.process_time() - start) / loops


def interleaved(fns: dict[str, Callable[[], Any]], loops: int) -> dict[str, float]:
    """Median over REPEATS of each fn's CPU seconds per call, the fns taking turns."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(REPEATS):
        for name, fn in fns.items():
            samples[name].append(cpu_seconds(fn, loops))
    return {name: statistics.median(values) for name, values in samples.items()}


# -- decode ------------------------------------------------------------------------------------


def numpy_floor(reports: list[dict[str, Any]], field: str, width: int) -> NDArray[np.uint8]:
    """The bytes of fixed-length base64 texts, unchecked: the same whole-batch passes as
    `decode`'s (a join, one translate to six-bit values, 4 values to 3 bytes), no check."""
    texts = [report[field] for report in reports]
    grid = sixbit_rows(texts, len(texts[0]))
    assert grid is not None
    six = grid[:, :-1] & 63  # "=" to 0
    return base64_bytes(six)[:, :width]


def int_floor(reports: list[dict[str, Any]], field: str) -> NDArray[np.int64]:
    return np.fromiter([report[field] for report in reports], dtype=np.int64, count=len(reports))


DECODE_CASES = (
    ("oue", 64, "bits"),
    ("oue", 1024, "bits"),
    ("sue", 1024, "bits"),
    ("ss", 1024, "bits"),
    ("rappor", 64, "bits"),
    ("cms", 0, "bits"),
    ("she", 64, "z"),
    ("the", 64, "z"),
)


def build(oracle: str, d: int) -> Any:
    """A categorical campaign's frequency oracle, or (d = 0) an open-domain campaign's
    mechanism (build_mechanism: a key mechanism, or before issue 25 a keyed oracle at d = 2;
    `--before` runs this file on either)."""
    if d == 0:
        data: dict[str, Any] = {"name": "x", "oracle": oracle, "epsilon": 1.0, "max_length": 64}
    else:
        data = {"name": "x", "oracle": oracle, "epsilon": 1.0, "domain": [str(i) for i in range(d)]}
    built = CampaignConfig.from_dict(data).build_mechanism()
    assert d == 0 or isinstance(built, FrequencyOracle)
    return built


def wire_reports(built: Any, n: int, open_domain: bool) -> list[dict[str, Any]]:
    rng = np.random.default_rng(1)
    if open_domain:
        batch = built.perturb_keys(item_keys(f"w{i}" for i in rng.integers(0, 99, n)), rng)
    else:
        batch = built.perturb_batch(rng.integers(0, built.domain_size, n), rng)
    return [dict(report) for report in built.encode(batch)]


def decode_row(oracle: str, d: int, field: str, n: int, loops: int) -> dict[str, Any]:
    built = build(oracle, d)
    reports = wire_reports(built, n, d == 0)
    decoded = built.decode(reports)
    # The bytes the wire carries: packed bits, or little-endian int32 values ("z").
    wire = np.ascontiguousarray(decoded[field], dtype="u1" if field == "bits" else "<i4")
    expected = wire.view(np.uint8).reshape(n, -1)
    width = expected.shape[1]
    ints = [name for name in decoded if name != field]
    assert np.array_equal(numpy_floor(reports, field, width), expected), oracle

    def floor() -> None:
        numpy_floor(reports, field, width)
        for name in ints:
            int_floor(reports, name)

    def per_report() -> None:
        with report_by_report():
            built.decode(reports)

    fns = {"decode": lambda: built.decode(reports), "floor": floor, "per_report": per_report}
    cost = interleaved(fns, loops)
    return {
        "oracle": oracle,
        "d": d or "open",
        "chars": len(reports[0][field]),
        "decode_us": cost["decode"] * 1e6,
        "floor_us": cost["floor"] * 1e6,
        "decode_vs_floor": cost["decode"] / cost["floor"],
        "per_report_vs_floor": cost["per_report"] / cost["floor"],
    }


@contextlib.contextmanager
def report_by_report() -> Iterator[None]:
    """The per-report path alone (the decoder before issue 31): whole-batch paths off."""
    saved = unary.decode_base64_column, histogram.decode_base64_column, batch_decode.int_column
    unary.decode_base64_column = histogram.decode_base64_column = lambda *args: None
    batch_decode.int_column = lambda *args: None
    try:
        yield
    finally:
        unary.decode_base64_column, histogram.decode_base64_column, batch_decode.int_column = saved


def decode_rows(n: int = 1000, loops: int = 200) -> list[dict[str, Any]]:
    return [decode_row(oracle, d, field, n, loops) for oracle, d, field in DECODE_CASES]


# -- sketch counting ---------------------------------------------------------------------------


def cms_support_before(built: Any, batch: dict[str, NDArray[Any]]) -> NDArray[np.int64]:
    """CMS counting before issue 31 (for the comparison): sort each chunk, unpack, reduceat."""
    rows = np.asarray(batch["j"], dtype=np.int64)
    packed = np.asarray(batch["bits"], dtype=np.uint8)
    support = np.zeros((built.k, built.m), dtype=np.int64)
    step = max(1, (1 << 22) // built.m)
    for start in range(0, rows.size, step):
        order = np.argsort(rows[start : start + step], kind="stable")
        sorted_rows = rows[start : start + step][order]
        first = np.flatnonzero(np.r_[True, sorted_rows[1:] != sorted_rows[:-1]])
        bits = np.unpackbits(packed[start : start + step][order], axis=1, count=built.m)
        support[sorted_rows[first]] += np.add.reduceat(bits, first, axis=0, dtype=np.int32)
    return support.reshape(-1)


def sketch_rows(sizes: tuple[int, ...] = (1000, 100_000)) -> list[dict[str, Any]]:
    """Per byte of packed report, one support() call over n reports (the aggregator calls it
    on chunks of CELL_BUDGET / support_work reports: 116,508 for CMS at its defaults)."""
    rows = []
    for n in sizes:
        loops = max(1, 100_000 // n)
        batches: dict[str, tuple[Callable[[], Any], int]] = {}
        for built, d in ((build("oue", 1024), 1024), (build("cms", 0), 0), (build("hcms", 0), 0)):
            batch = built.unpack(built.pack(built.decode(wire_reports(built, n, d == 0))), n)
            size = len(built.pack(batch))
            batches[built.name] = (functools.partial(built.support, batch), size)
            if built.name == "cms":
                before = functools.partial(cms_support_before, built, batch)
                assert np.array_equal(before(), built.support(batch))
                batches["cms (before)"] = (before, size)
        cost = interleaved({name: fn for name, (fn, _) in batches.items()}, loops)
        per_byte = {name: cost[name] / size for name, (_, size) in batches.items()}
        rows.extend(
            {
                "oracle": name,
                "n": n,
                "bytes_per_report": size // n,
                "reports_per_cpu_s": n / cost[name],
                "ns_per_byte": per_byte[name] * 1e9,
                "vs_oue_per_byte": per_byte[name] / per_byte["oue"],
            }
            for name, (_, size) in batches.items()
        )
    return rows


# -- on the device -----------------------------------------------------------------------------


def offline_reporter(state_dir: Path, data: dict[str, Any], batch_size: int = 5000) -> Reporter:
    config = CampaignConfig.from_dict(
        {**data, "reports_per_window": 1_000_000, "lifetime_epsilon": 1e9}
    )
    store(state_dir, config.name, Known("active", config, time.time()))
    reporter = Reporter(
        closed_port_url(),
        "bench-token",
        state_dir=state_dir,
        batch_size=batch_size,
        max_batch_age=3600.0,
        max_spool_rows=10_000_000,
        max_spool_bytes=1 << 34,
        strict=True,
    )
    reporter.privacy_spent(config.name)
    return reporter


LABELS_64 = [f"v{i}" for i in range(64)]


def device_rows(calls: int = 2000) -> list[dict[str, Any]]:
    cases: list[tuple[str, dict[str, Any]]] = [
        (oracle, {"name": oracle, "oracle": oracle, "epsilon": 1.0, "max_length": 64})
        for oracle in ("cms", "hcms", "olh", "pem")
    ]
    cases.append(("de", {"name": "de", "oracle": "de", "epsilon": 1.0, "domain": LABELS_64}))
    cases.append(
        (
            "oue",
            {
                "name": "oue",
                "oracle": "oue",
                "epsilon": 1.0,
                "domain": [f"v{i}" for i in range(65536)],
            },
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        return [device_row(Path(tmp) / name, data, calls) for name, data in cases]


def device_row(state_dir: Path, data: dict[str, Any], calls: int) -> dict[str, Any]:
    config = CampaignConfig.from_dict(data)
    built, rng = config.build_mechanism(), SecureRandom()
    if config.open_domain:
        values = [f"word {i}" for i in range(calls)]
        draw = built.perturb if config.discovers else built.perturb_string  # type: ignore[union-attr]

        def perturb(i: int) -> object:
            return draw(values[i], rng)
    else:
        values = [data["domain"][i % len(data["domain"])] for i in range(calls)]

        def perturb(i: int) -> object:
            return built.perturb(i % config.domain_size, rng)

    reporter = offline_reporter(state_dir, data)

    def report(i: int) -> None:
        reporter.report(config.name, values[i])

    alone, whole = [], []
    for _ in range(REPEATS):
        alone.append(per_call(perturb, calls)["cpu_median_us"])
        whole.append(per_call(report, calls)["cpu_median_us"])
    reporter.close(timeout=0)
    return {
        "oracle": config.oracle,
        "d": "open" if config.open_domain else config.domain_size,
        "perturb_cpu_us": statistics.median(alone),
        "report_cpu_us": statistics.median(whole),
    }


def offline_rows(calls: int = 3000) -> list[dict[str, Any]]:
    """report() of DE (d = 64) with the collector unreachable (the sender backing off) and
    the default batch_size (500), `calls` reports spooled first: per call, this thread's
    CPU and the whole process's (the sender's rounds too), medians of REPEATS runs."""
    data = {"name": "de", "oracle": "de", "epsilon": 1.0, "domain": LABELS_64}
    thread, process = [], []
    with tempfile.TemporaryDirectory() as tmp:
        reporter = offline_reporter(Path(tmp), data, batch_size=500)
        for _ in range(calls):
            reporter.report("de", "v1")
        for _ in range(REPEATS):
            thread0, process0 = time.thread_time(), time.process_time()
            for _ in range(calls):
                reporter.report("de", "v1")
            thread.append((time.thread_time() - thread0) / calls * 1e6)
            process.append((time.process_time() - process0) / calls * 1e6)
        reporter.close(timeout=0)
    return [
        {
            "oracle": "de",
            "d": 64,
            "report_thread_cpu_us": statistics.median(thread),
            "report_process_cpu_us": statistics.median(process),
        }
    ]


# -- the aggregator's pass over idle campaigns ----------------------------------------------


def idle_rows(counts: tuple[int, ...] = (1, 101), passes: int = 5) -> list[dict[str, Any]]:
    """CPU of a pass that finds nothing to do: K campaigns (DE, d = 64, one shard), each with
    one 1000-report entry already counted and its window reported. Worker CPU
    (time.process_time) and redis-server's (INFO cpu), and the pass's wall time; per idle
    campaign = the difference between K = 101 and K = 1, over 100."""
    from aggregate import fill, redis_cpu_seconds, register

    from ldptel.aggregator.worker import Worker
    from ldptel.store.redis_server import RedisServer

    samples: dict[int, list[tuple[float, float, float]]] = {k: [] for k in counts}
    with contextlib.ExitStack() as stack:
        clients = {}
        for k in counts:  # a redis-server each (interleaved passes, no shared keyspace)
            server = stack.enter_context(RedisServer(appendonly=False))
            client = redis.Redis.from_url(server.url)
            for i in range(k):
                config = CampaignConfig.from_dict(
                    {"name": f"idle-{i}", "oracle": "de", "epsilon": 1.0,
                     "domain": [f"v{j}" for j in range(64)]}
                )  # fmt: skip
                register(client, config)
                fill(client, config, 1000)
            Worker(client).run_pass()
            clients[k] = client
        for _ in range(REPEATS):
            for k, client in clients.items():
                worker = Worker(client)
                worker.run_pass()  # the registry's caches warm, as in a running worker
                redis_cpu, cpu = redis_cpu_seconds(client), time.process_time()
                wall = time.perf_counter()
                for _ in range(passes):
                    stats = worker.run_pass()
                    assert stats.entries == 0 and stats.reports_built == 0, stats
                wall = (time.perf_counter() - wall) / passes
                cpu = (time.process_time() - cpu) / passes
                samples[k].append((cpu, (redis_cpu_seconds(client) - redis_cpu) / passes, wall))
    medians = {k: [statistics.median(v[i] for v in samples[k]) for i in range(3)] for k in counts}
    low, high = counts
    rows = [
        {"campaigns": k, "worker_cpu_ms": m[0] * 1e3, "redis_cpu_ms": m[1] * 1e3,
         "wall_ms": m[2] * 1e3}
        for k, m in medians.items()
    ]  # fmt: skip
    per = [(medians[high][i] - medians[low][i]) / (high - low) * 1e3 for i in range(3)]
    rows.append(
        {"campaigns": "per idle campaign", "worker_cpu_ms": per[0], "redis_cpu_ms": per[1],
         "wall_ms": per[2]}
    )  # fmt: skip
    return rows


# -- where aggregation waits ------------------------------------------------------------------


def pass_rows(n: int = 200_000) -> list[dict[str, Any]]:
    """One Worker pass over n OUE reports (d = 1,024) in 1000-report entries, 3 times (a
    fresh stream each): this process's CPU in user mode and in the kernel (getrusage), its
    minor page faults, redis-server's CPU (INFO cpu) and the pass's wall time; medians."""
    from aggregate import fill, redis_cpu_seconds, register

    from ldptel.aggregator.worker import Worker
    from ldptel.store.redis_server import RedisServer

    samples = []
    config = CampaignConfig.from_dict(
        {"name": "pass-oue", "oracle": "oue", "epsilon": 1.0,
         "domain": [f"v{i}" for i in range(1024)]}
    )  # fmt: skip
    with RedisServer(appendonly=False) as server:
        client = redis.Redis.from_url(server.url)
        for _ in range(REPEATS):
            client.flushdb()
            register(client, config)
            fill(client, config, n)
            worker = Worker(client, build_reports=False)
            before, redis_cpu = resource.getrusage(resource.RUSAGE_SELF), redis_cpu_seconds(client)
            wall = time.perf_counter()
            assert worker.run_pass().reports == n
            wall = time.perf_counter() - wall
            after = resource.getrusage(resource.RUSAGE_SELF)
            user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
            samples.append({
                "worker_user_s": user, "worker_sys_s": system,
                "redis_cpu_s": redis_cpu_seconds(client) - redis_cpu, "wall_s": wall,
                "wall_vs_cpu": wall / (user + system),
                "minor_faults": float(after.ru_minflt - before.ru_minflt),
            })  # fmt: skip
    medians = {name: statistics.median(row[name] for row in samples) for name in samples[0]}
    return [{"oracle": "oue", "d": 1024, "n": n, **medians}]


SECTIONS = {
    "decode": decode_rows,
    "sketch": sketch_rows,
    "device": device_rows,
    "offline": offline_rows,
    "idle": idle_rows,
    "pass": pass_rows,
}


def before_after(
    rev: str, sections: list[str], turns: int = REPEATS
) -> dict[str, list[dict[str, Any]]]:
    """Each section on commit `rev`'s library and on this checkout's, in child processes
    taking turns `turns` times; per row, each numeric figure's median before and after."""
    root = Path(__file__).resolve().parents[1]
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as old:
        archive = subprocess.run(["git", "archive", rev], cwd=root, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", old], input=archive.stdout, check=True)
        for _ in range(turns):
            for name, tree in (("before", old), ("after", str(root))):
                command = [sys.executable, str(Path(__file__).resolve()), *sections, "--json"]
                env = {**os.environ, "PYTHONPATH": tree}  # cwd too: it precedes PYTHONPATH
                done = subprocess.run(
                    command, cwd=tree, env=env, capture_output=True, text=True, check=True
                )
                runs[name].append(json.loads(done.stdout))
    results: dict[str, list[dict[str, Any]]] = {}
    for section in sections:
        rows = []
        for i, row in enumerate(runs["after"][0][section]):
            merged = {k: v for k, v in row.items() if not isinstance(v, float)}
            for key in (k for k, v in row.items() if isinstance(v, float)):
                for name, results_of in runs.items():
                    merged[f"{key} {name}"] = statistics.median(
                        r[section][i][key] for r in results_of
                    )
            rows.append(merged)
        results[section] = rows
    return results


def table(rows: list[dict[str, Any]]) -> str:
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [f"{v:,.2f}" if isinstance(v, float) else str(v) for v in row.values()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # argparse checks a `*` argument's default against the choices as one value: [] (all).
    parser.add_argument("sections", nargs="*", choices=[[], *SECTIONS], default=[])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--before", metavar="REV", help="compare with commit REV's library")
    parser.add_argument("--turns", type=int, default=REPEATS, help="--before's turns each")
    args = parser.parse_args()
    load = os.getloadavg()
    sections = args.sections or list(SECTIONS)
    if args.before:
        results = before_after(args.before, sections, args.turns)
    else:
        results = {name: SECTIONS[name]() for name in sections}
    if args.json:
        print(json.dumps({"load_average": load, **results}, indent=2))
        return
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    for name, rows in results.items():
        print(f"\n{name}\n{table(rows)}")


if __name__ == "__main__":
    main()
