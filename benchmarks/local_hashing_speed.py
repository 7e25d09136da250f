"""Speed of BLH and OLH at d = 1024: client perturb_batch and aggregator support, in
reports/s (best of a few runs). Not a test; run: .venv/bin/python benchmarks/local_hashing_speed.py

Support is also timed on one thread (the chunked kernel alone) next to the default thread
pool, so the pool's share is visible on a busy machine.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from ldptel.client.oracles import make_oracle
from ldptel.client.oracles.local_hashing import LocalHashing
from ldptel.client.randomness import SecureRandom


def best_rate(count: int, run: Callable[[], object], repeats: int) -> float:
    """count / the fastest of `repeats` timed runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return count / min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain-size", type=int, default=1024)
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    d, n = args.domain_size, args.n
    rng = np.random.default_rng(1)
    values = rng.integers(0, d, n)
    print(f"d = {d}, n = {n}; rates in reports/s (best of {args.repeats})")
    header = "oracle  eps    g  perturb(numpy)  perturb(CSPRNG)  support(1 thread)  support(pool)"
    print(header)
    for name, eps in [("blh", 1.0), ("blh", 4.0), ("olh", 1.0), ("olh", 4.0)]:
        oracle = make_oracle(name, epsilon=eps, domain_size=d)
        assert isinstance(oracle, LocalHashing)
        batch = oracle.perturb_batch(values, rng)
        perturb = best_rate(n, lambda o=oracle: o.perturb_batch(values, rng), args.repeats)
        secure = best_rate(
            n, lambda o=oracle: o.perturb_batch(values, SecureRandom()), args.repeats
        )
        seeds, ys = batch["seed"], batch["y"]
        one = best_rate(n, lambda o=oracle, s=seeds, y=ys: o._count_matches(s, y), args.repeats)
        pool = best_rate(n, lambda o=oracle, b=batch: o.support(b), args.repeats)
        print(
            f"{name:6s} {eps:4.1f} {oracle.g:4d}  {perturb:14,.0f}  {secure:15,.0f}"
            f"  {one:17,.0f}  {pool:13,.0f}"
        )


if __name__ == "__main__":
    main()
