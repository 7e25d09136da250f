"""Side-by-side benchmark of ldptel's frequency oracles against pure-ldp and multi-freq-ldpy.

For every oracle in our registry that a peer also implements, on the same Zipf data over d
items, d in {16, 1024}, epsilon in {1, 4}: client perturb rate, aggregation rate, peak
aggregation memory at two n, and empirical / exact theoretical variance (with the bias of
each peer's public output). Writes results/oracles.json and the "## Oracles vs peers"
section of benchmarks/README.md. Run through `benchmarks/run` (it builds the peers' venv).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import peers
from numpy.typing import NDArray

from ldptel.client.oracles import ORACLES, FrequencyOracle, make_oracle
from ldptel.client.randomness import SecureRandom

HERE = Path(__file__).resolve().parent
DOMAIN_SIZES = (16, 1024)
EPSILONS = (1.0, 4.0)
ZIPF_EXPONENT = 1.1
SEED = 20170816  # Wang et al.'s USENIX Security 2017 opening day
#: The targets of issue 2 (ratios ours / fastest peer in the same run).
PERTURB_TARGET = 10.0
AGGREGATE_TARGETS = {"blh": 30.0, "olh": 30.0, "de": 3.0, "sue": 3.0, "oue": 3.0}
VARIANCE_BAND = (0.9, 1.1)
#: Ours counts as O(d) if its peak at n_big is within this factor of its peak at n_small.
MEMORY_FLAT = 1.25
README_SECTION = "## Oracles vs peers"


@dataclass(frozen=True)
class Budget:
    """Sizes and time budgets (seconds) of one run; --quick scales everything down."""

    n: int  # reports per rate measurement for ours
    repeats: int  # timed repeats of ours (median reported)
    peer_seconds: float  # wall time aimed at per peer rate measurement
    peer_max_n: int
    memory_n: tuple[int, int]  # ours' two n for the memory measurement
    memory_peer_max_n: int
    chunk: int  # reports per aggregation chunk (one stream read)
    calibration_n: int  # reports in the trial run that sizes a peer measurement
    variance_n: dict[int, int]  # most reports per repetition, by d
    variance_seconds: float  # per implementation and configuration
    variance_reps: tuple[int, int]  # min, max repetitions


FULL = Budget(
    n=100_000,
    repeats=3,
    peer_seconds=0.4,
    peer_max_n=100_000,
    memory_n=(10_000, 100_000),
    memory_peer_max_n=2_000,
    chunk=4096,
    calibration_n=200,
    variance_n={16: 10_000, 1024: 10_000},
    variance_seconds=1.2,
    variance_reps=(30, 400),
)
QUICK = Budget(
    n=10_000,
    repeats=1,
    peer_seconds=0.05,
    peer_max_n=10_000,
    memory_n=(2_000, 10_000),
    memory_peer_max_n=400,
    chunk=1024,
    calibration_n=40,
    variance_n={16: 2000, 1024: 2000},
    variance_seconds=0.08,
    variance_reps=(5, 30),
)


# -- data ----------------------------------------------------------------------------------
def zipf_values(d: int, n: int, seed: int) -> NDArray[np.int64]:
    """n draws from a Zipf(ZIPF_EXPONENT) law truncated to d items (item 0 most frequent)."""
    weights = 1.0 / np.arange(1, d + 1) ** ZIPF_EXPONENT
    rng = np.random.default_rng(seed)
    return rng.choice(d, size=n, p=weights / weights.sum()).astype(np.int64)


def counts(values: NDArray[np.int64], d: int) -> NDArray[np.float64]:
    return np.bincount(values, minlength=d).astype(np.float64)


# -- timing helpers ------------------------------------------------------------------------
def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds of the whole process, result) of one call."""
    w0, c0 = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - w0, time.process_time() - c0, result


def median_rate(n: int, fn: Callable[[], Any], repeats: int) -> dict[str, float]:
    runs = [timed(fn)[:2] for _ in range(repeats)]
    wall = float(np.median([r[0] for r in runs]))
    cpu = float(np.median([r[1] for r in runs]))
    return {"n": n, "rate": n / wall, "cpu_rate": n / max(cpu, 1e-9), "seconds": wall}


def calibrated_n(seconds_for: Callable[[int], float], budget: float, lo: int, hi: int) -> int:
    """How many items fit in `budget` seconds, from a trial on `lo` items (at most `hi`)."""
    per_item = seconds_for(lo) / lo
    return int(min(hi, max(lo, budget / max(per_item, 1e-9))))


def quiet_peers() -> None:
    # pure-ldp warns on every estimate when n < 10000 or epsilon < 1.
    warnings.simplefilter("ignore", RuntimeWarning)


# -- ours ----------------------------------------------------------------------------------
def build_ours(name: str, epsilon: float, d: int) -> FrequencyOracle:
    return make_oracle(name, epsilon=epsilon, domain_size=d)


def ours_aggregate(oracle: FrequencyOracle, batch: dict[str, Any], n: int) -> Any:
    return oracle.estimate(oracle.support(batch), n)


def measure_ours_rates(
    oracle: FrequencyOracle, values: NDArray[np.int64], budget: Budget
) -> dict[str, Any]:
    """Rates on the first n values, n up to budget.n but cut for wide reports (SHE at
    d = 1024 draws d noise values per report) so one call stays near peer_seconds."""
    rng = np.random.default_rng(SEED)
    secure = SecureRandom()
    lo = min(len(values), 2000)
    n = calibrated_n(
        lambda m: timed(lambda: oracle.perturb_batch(values[:m], rng))[0],
        budget.peer_seconds,
        lo,
        len(values),
    )
    values = values[:n]
    perturb = median_rate(n, lambda: oracle.perturb_batch(values, rng), budget.repeats)
    perturb_secure = median_rate(n, lambda: oracle.perturb_batch(values, secure), budget.repeats)
    batch = oracle.perturb_batch(values, rng)
    ours_aggregate(oracle, batch, n)
    aggregate = median_rate(n, lambda: ours_aggregate(oracle, batch, n), budget.repeats)
    return {"perturb": perturb, "perturb_secure": perturb_secure, "aggregate": aggregate}


def ours_stream_peak(oracle: FrequencyOracle, d: int, n: int, chunk: int) -> int:
    """Peak traced bytes of aggregating n reports read in chunks (as a shard worker reads a
    stream): one packed chunk resident at a time, the O(d) support, and temporaries. The
    chunks cycle through a few stored ones (their content does not change the memory), so
    producing n reports does not dominate the run; producing them is not counted."""
    rng = np.random.default_rng(SEED + n)
    values = zipf_values(d, chunk, SEED + 1)
    stored = [oracle.pack(oracle.perturb_batch(values, rng)) for _ in range(3)]
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    peak = 0
    support = np.zeros(oracle.support_size, dtype=np.int64)
    for i, start in enumerate(range(0, n, chunk)):
        m = min(chunk, n - start)
        # A short last chunk is packed on its own (pack stores column after column).
        data = stored[i % 3] if m == chunk else oracle.pack(oracle.perturb_batch(values[:m], rng))
        tracemalloc.reset_peak()
        support += oracle.support(oracle.unpack(data, m))
        peak = max(peak, tracemalloc.get_traced_memory()[1] - base)
        del data
    tracemalloc.reset_peak()
    oracle.estimate(support, n)
    peak = max(peak, tracemalloc.get_traced_memory()[1] - base)
    tracemalloc.stop()
    return peak


def variance_trial(
    estimate_for: Callable[[NDArray[np.int64]], NDArray[np.float64]],
    theory_for: Callable[[int, NDArray[np.float64]], NDArray[np.float64]],
    values: NDArray[np.int64],
    d: int,
    budget: Budget,
) -> dict[str, Any]:
    """Repeat perturb + aggregate on fixed data; compare the errors with the exact variance.

    n per repetition is the largest (up to len(values)) that leaves time for the minimum
    number of repetitions. ratio = sum_v s_v^2 / sum_v Var_v (s_v^2: sample variance of
    item v over repetitions); mse_ratio uses the squared error against the truth (so it
    includes bias), and its standard error comes from the spread of the per-repetition sums,
    which accounts for correlated items. bias_chi2 = sum_v mean_error_v^2 / sum_v (Var_v/R)
    is about 1 for an unbiased estimator; top_bias is the relative bias of the top item.
    """
    trial = values[: budget.calibration_n]
    per_report = timed(lambda: estimate_for(trial))[0] / len(trial)
    lo, hi = budget.variance_reps
    fits = budget.variance_seconds / lo / max(per_report, 1e-9)
    n = int(max(budget.calibration_n, min(len(values), fits)))
    sub = values[:n]
    true = counts(sub, d)
    theory = np.asarray(theory_for(n, true / n), float)
    t, _, first = timed(lambda: estimate_for(sub))
    reps = int(min(hi, max(lo, budget.variance_seconds / max(t, 1e-9))))
    errors = np.empty((reps, d))
    errors[0] = first - true
    for r in range(1, reps):
        errors[r] = estimate_for(sub) - true
    total = float(theory.sum())
    per_rep = (errors**2).sum(axis=1) / total
    mean_error = errors.mean(axis=0)
    top = int(np.argmax(true))
    return {
        "n": n,
        "reps": reps,
        "ratio": float(errors.var(axis=0, ddof=1).sum() / total),
        "mse_ratio": float(per_rep.mean()),
        "mse_ratio_se": float(per_rep.std(ddof=1) / math.sqrt(reps)),
        "bias_z_max": float((np.abs(mean_error) / np.sqrt(theory / reps)).max()),
        "bias_chi2": float((mean_error**2).sum() / (total / reps)),
        "top_bias": float(mean_error[top] / true[top]),
    }


def measure_ours_variance(
    oracle: FrequencyOracle, values: NDArray[np.int64], budget: Budget
) -> dict[str, Any]:
    rng = np.random.default_rng(SEED + 7)

    def estimate_for(sub: NDArray[np.int64]) -> NDArray[np.float64]:
        batch = oracle.perturb_batch(sub, rng)
        return np.asarray(ours_aggregate(oracle, batch, len(sub)), float)

    return variance_trial(estimate_for, oracle.variance, values, oracle.domain_size, budget)


# -- peers ---------------------------------------------------------------------------------
def measure_peer(
    peer: peers.PeerOracle, values: NDArray[np.int64], budget: Budget
) -> dict[str, Any]:
    vals = values.tolist()
    peer.aggregate(peer.perturb(vals[:20]))  # compile numba, import modules

    def perturb_seconds(m: int) -> float:
        return timed(lambda: peer.perturb(vals[:m]))[0]

    lo = budget.calibration_n
    n_p = calibrated_n(perturb_seconds, budget.peer_seconds, lo, budget.peer_max_n)
    wall, cpu, reports = timed(lambda: peer.perturb(vals[:n_p]))
    perturb = {"n": n_p, "rate": n_p / wall, "cpu_rate": n_p / max(cpu, 1e-9), "seconds": wall}

    def aggregate_seconds(m: int) -> float:
        return timed(lambda: peer.aggregate(reports[:m]))[0]

    n_a = calibrated_n(aggregate_seconds, budget.peer_seconds, min(lo, n_p), n_p)
    wall, cpu, _ = timed(lambda: peer.aggregate(reports[:n_a]))
    aggregate = {"n": n_a, "rate": n_a / wall, "cpu_rate": n_a / max(cpu, 1e-9), "seconds": wall}

    n2 = min(n_a, budget.memory_peer_max_n)
    points = [(m, peer_peak(peer, reports[:m])) for m in (max(1, n2 // 4), n2)]
    return {
        "library": peer.library,
        "perturb": perturb,
        "aggregate": aggregate,
        "memory": memory_fit(points, budget.memory_n, grows=not peer.streaming),
    }


def peer_peak(peer: peers.PeerOracle, reports: list[Any]) -> int:
    """Traced peak of the peer's aggregation (reports already exist, as if in storage) plus
    the report bytes its API needs resident at once (all of them unless it streams)."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    peer.aggregate(reports)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak + peer.resident_input(reports)


def memory_fit(points: list[tuple[int, int]], at: tuple[int, int], grows: bool) -> dict[str, Any]:
    """Measured (n, bytes) points and the memory at the n of `at`: the straight line through
    the points if the API holds every report, else (one report at a time) the larger point."""
    (n1, b1), (n2, b2) = points
    slope = (b2 - b1) / (n2 - n1) if grows and n2 != n1 else 0.0
    level = b2 if grows else max(b1, b2)
    return {
        "measured": [{"n": n, "bytes": b} for n, b in points],
        "bytes_per_report": slope,
        "extrapolated": [{"n": n, "bytes": level + slope * (n - n2)} for n in at],
    }


def measure_peer_variance(
    peer: peers.PeerOracle, ours: FrequencyOracle, values: NDArray[np.int64], budget: Budget
) -> dict[str, Any]:
    """As for ours, on the peer's public output; against the exact variance under the peer's
    own parameters, or under ours where the peer's is not known (then `theory` says so)."""
    source = "own" if peer.theory_variance(2, np.zeros(peer.d)) is not None else "ldptel"

    def theory_for(n: int, f: NDArray[np.float64]) -> NDArray[np.float64]:
        own = peer.theory_variance(n, f)
        return np.asarray(ours.variance(n, f) if own is None else own, float)

    def estimate_for(sub: NDArray[np.int64]) -> NDArray[np.float64]:
        return peer.aggregate(peer.perturb(sub.tolist()))

    return {"theory": source, **variance_trial(estimate_for, theory_for, values, peer.d, budget)}


# -- the run -------------------------------------------------------------------------------
def shared_oracles(selected: list[str] | None) -> list[str]:
    names = [name for name in ORACLES if name in peers.PEERS]
    return [n for n in names if selected is None or n in selected]


def run_config(name: str, d: int, epsilon: float, budget: Budget) -> dict[str, Any]:
    ours = build_ours(name, epsilon, d)
    values = zipf_values(d, budget.n, SEED)
    var_values = values[: budget.variance_n[d]]
    row: dict[str, Any] = {"oracle": name, "d": d, "epsilon": epsilon}
    row["ours"] = measure_ours_rates(ours, values, budget)
    ours_stream_peak(ours, d, budget.chunk, budget.chunk)  # first-call allocations, thread pool
    measured = [
        {"n": m, "bytes": ours_stream_peak(ours, d, m, budget.chunk)} for m in budget.memory_n
    ]
    row["ours"]["memory"] = {"measured": measured, "chunk": budget.chunk}
    row["ours"]["variance"] = measure_ours_variance(ours, var_values, budget)
    row["peers"] = {}
    for cls in peers.PEERS[name]:
        peers.seed_peers(SEED)
        peer = cls(epsilon, d)
        result = measure_peer(peer, values, budget)
        result["variance"] = measure_peer_variance(peer, ours, var_values, budget)
        row["peers"][peer.library] = result
    row["summary"] = summarize(row, budget)
    return row


def best_peer(row: dict[str, Any], metric: str) -> tuple[str, float]:
    library, rate = max(
        ((lib, r[metric]["rate"]) for lib, r in row["peers"].items()), key=lambda t: t[1]
    )
    return library, rate


def summarize(row: dict[str, Any], budget: Budget) -> dict[str, Any]:
    ours = row["ours"]
    summary: dict[str, Any] = {}
    lib, rate = best_peer(row, "perturb")
    summary["perturb"] = {"best_peer": lib, "ratio": ours["perturb"]["rate"] / rate,
                          "ratio_secure": ours["perturb_secure"]["rate"] / rate,
                          "target": PERTURB_TARGET}  # fmt: skip
    summary["perturb"]["met"] = summary["perturb"]["ratio"] >= PERTURB_TARGET
    lib, rate = best_peer(row, "aggregate")
    target = AGGREGATE_TARGETS.get(row["oracle"])
    ratio = ours["aggregate"]["rate"] / rate
    summary["aggregate"] = {"best_peer": lib, "ratio": ratio, "target": target,
                            "met": None if target is None else ratio >= target}  # fmt: skip
    small, big = (m["bytes"] for m in ours["memory"]["measured"])
    peer_big = min(p["memory"]["extrapolated"][1]["bytes"] for p in row["peers"].values())
    summary["memory"] = {
        "ours_growth": big / small,
        "met": big <= MEMORY_FLAT * small,
        "peer_over_ours_at_n_big": peer_big / big,
    }
    r = ours["variance"]["ratio"]
    summary["variance"] = {"ratio": r, "met": VARIANCE_BAND[0] <= r <= VARIANCE_BAND[1]}
    return summary


def machine() -> dict[str, Any]:
    model = ""
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    from importlib.metadata import version

    import xxhash

    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "xxhash": xxhash.VERSION,
        "pure-ldp": version("pure-ldp"),
        "multi-freq-ldpy": version("multi-freq-ldpy"),
        "ldptel": version("ldptel"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30-second smoke run")
    parser.add_argument("--oracles", nargs="*", help="only these of our oracle names")
    parser.add_argument("--out", type=Path, help="results JSON (default results/oracles.json)")
    parser.add_argument("--no-readme", action="store_true", help="do not update README.md")
    args = parser.parse_args(argv)
    budget = QUICK if args.quick else FULL
    out = args.out or HERE / "results" / ("oracles-quick.json" if args.quick else "oracles.json")
    quiet_peers()
    names = shared_oracles(args.oracles)
    started = dt.datetime.now(dt.timezone.utc)
    load_before = os.getloadavg()
    rows = []
    for name in names:
        for d in DOMAIN_SIZES:
            for epsilon in EPSILONS:
                t0 = time.perf_counter()
                rows.append(run_config(name, d, epsilon, budget))
                print(f"{name:6s} d={d:<5d} eps={epsilon:g}  {time.perf_counter() - t0:5.1f} s",
                      file=sys.stderr, flush=True)  # fmt: skip
    results = {
        "command": command_line(args),
        "date": started.isoformat(timespec="seconds"),
        "duration_seconds": (dt.datetime.now(dt.timezone.utc) - started).total_seconds(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "machine": machine(),
        "budget": budget.__dict__,
        "zipf_exponent": ZIPF_EXPONENT,
        "seed": SEED,
        "registry": list(ORACLES),
        "not_shared": [n for n in ORACLES if n not in peers.PEERS],
        "rows": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    import report

    print(report.ratios_text(results))
    if not args.quick and not args.no_readme:
        report.update_readme(HERE / "README.md", README_SECTION, report.markdown(results))
    return 0


def command_line(args: argparse.Namespace) -> str:
    parts = ["benchmarks/run"]
    if args.quick:
        parts.append("--quick")
    if args.oracles:
        parts += ["--oracles", *args.oracles]
    return " ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
