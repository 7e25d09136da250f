"""Heavy-hitter discovery with no candidate list: recall, precision, time and peak memory of
our PEM over count mean sketches (ldptel.client.discovery), beside pure-ldp's PEM.

Data: a synthetic vocabulary of V distinct lowercase words of 4-10 letters (seeded), user i's
value drawn Zipf(1.1) over the vocabulary's ranks; n users. PEM parameters: values of at
most 10 bytes (80 bits), top_k = 32, 8 bits per step, 10 groups. "heavy" = the strings whose
true count is at least our threshold (the set recall is over); precision = listed strings
that are heavy / listed.

Ours: every user through the real client code (group draw + the sketch's perturb_keys on a
seeded generator) and the groups' supports ("client_cpu_s", CPU time), then discovery
("discovery_cpu_s": candidates, estimates, release; "discovery_peak_mib": its tracemalloc
peak); "state_mib" is the groups' sketch counts. Defaults: CMS, k = 1024 rows, m = 256.

pure-ldp 1.2.0: PEMClient/PEMServer with its CMSClient/CMSServer as the group oracle (its
default, OLH over a dense domain of 2^prefix_bits items, cannot be built at 80 bits), one
`privatise` and one `aggregate` call per user as its docs do, on the same padded bit strings.
Its groups report start + (i + 1) 8 bits, so its start is 0 (8, 16, ..., 80 bits; ours 13,
21, ..., 77, 80). Its estimate loops over the sketch rows in Python for every candidate, so
beside it both sides use `--peer-k` rows (default 64, m = 256; ours again as
"ours_peer_k"). Its `find_heavy_hitters(k=32)` lists the top 32 of the last group: that list
is cut at our threshold (its estimates scaled by n / n_g like ours) for precision and recall.

Run from the repository root: `benchmarks/run heavy-hitters [--n N] [--peer-n N]` (in the
peers' venv, which benchmarks/run builds).
Writes results/heavy_hitters.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ldptel.analysis.heavy_hitters import HeavyHitterSimulation, group_supports
from ldptel.client.discovery import Discovery, PrefixExtendingMethod
from ldptel.client.discovery.pem import DEFAULT_ROWS

HERE = Path(__file__).resolve().parent
SEED = 20261201
ZIPF_EXPONENT = 1.1
MAX_LENGTH = 10
TOP_K = 32


def vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    """`size` distinct lowercase words of 4-10 letters, in random rank order."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words: set[str] = set()
    while len(words) < size:
        lengths = rng.integers(4, MAX_LENGTH + 1, size - len(words))
        words.update("".join(rng.choice(letters, length)) for length in lengths)
    ranked = sorted(words)
    rng.shuffle(ranked)
    return ranked


def users(words: list[str], n: int, rng: np.random.Generator) -> list[str]:
    weights = 1.0 / np.arange(1, len(words) + 1) ** ZIPF_EXPONENT
    return [words[i] for i in rng.choice(len(words), n, p=weights / weights.sum())]


def scores(discovery: Discovery, truth: dict[str, int]) -> dict[str, Any]:
    result = HeavyHitterSimulation(discovery, truth)
    return {
        "listed": len(discovery.values),
        "heavy": len(result.heavy),
        "recall": result.recall,
        "precision": result.precision,
        "threshold": discovery.threshold,
    }


def ours(
    epsilon: float, values: list[str], truth: dict[str, int], k: int = DEFAULT_ROWS
) -> tuple[dict[str, Any], Any]:
    pem = PrefixExtendingMethod(epsilon=epsilon, max_length=MAX_LENGTH, top_k=TOP_K, k=k)
    rng = np.random.default_rng(SEED)
    start = time.process_time()
    supports, sizes = group_supports(pem, values, rng)
    client = time.process_time() - start
    tracemalloc.start()
    start = time.process_time()
    discovery = pem.discover(supports, sizes)
    server = time.process_time() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    state = sum(s.nbytes for s in supports)
    row = {
        **scores(discovery, truth),
        "aggregate_cpu_s": 0.0,  # the supports are summed during the client simulation
        "sketch": pem.sketch,
        "groups": pem.groups,
        "client_cpu_s": client,
        "discovery_cpu_s": server,
        "discovery_peak_mib": peak / 2**20,
        "state_mib": state / 2**20,
        "expected_false_discoveries": discovery.expected_false_discoveries,
        "found": list(discovery.values),
    }
    return row, (pem, discovery)


def cms_server(epsilon: float, k: int, m: int) -> Any:
    """pure-ldp 1.2.0's CMSServer: it builds its base with d = None, whose np.zeros(None)
    today's numpy refuses; built with d = 1 (its sketch does not use d), as old numpy did."""
    from pure_ldp.core import _freq_oracle_server as base
    from pure_ldp.frequency_oracles.apple_cms import CMSServer

    original = base.FreqOracleServer.__init__

    def with_size(self: Any, epsilon: float, d: Any, index_mapper: Any = None) -> None:
        original(self, epsilon, 1 if d is None else d, index_mapper)

    base.FreqOracleServer.__init__ = with_size
    try:
        return CMSServer(epsilon, k, m)
    finally:
        base.FreqOracleServer.__init__ = original


def pure_ldp(
    epsilon: float, values: list[str], truth: dict[str, int], pem: PrefixExtendingMethod,
    threshold: float,
) -> dict[str, Any]:  # fmt: skip
    """pure-ldp's PEM over its CMS on the same padded bit strings, cut at our threshold."""
    import random

    from pure_ldp.frequency_oracles.apple_cms import CMSClient
    from pure_ldp.heavy_hitters.prefix_extending import PEMClient, PEMServer

    random.seed(SEED)
    np.random.seed(SEED % 2**32)
    bits = 8 * MAX_LENGTH
    # Its groups report start + (i + 1) step bits and its candidates grow to that length, so
    # (80 - start) must be a multiple of the step: start 0 (8, 16, ..., 80 bits; ours 13,
    # 21, ..., 77, 80), 10 groups on both sides.
    start_length = 0
    k, m = pem.params["k"], pem.params["m"]
    hash_funcs = cms_server(epsilon, k, m).get_hash_funcs()
    client = PEMClient(epsilon, start_length, bits, pem.step_bits,
                       fo_client=CMSClient(epsilon, hash_funcs, m),
                       index_mapper=lambda x: x)  # fmt: skip
    server = PEMServer(epsilon, start_length, bits, pem.step_bits,
                       fo_server=cms_server(epsilon, k, m), index_mapper=lambda x: x)  # fmt: skip
    for oracle in server.oracles:  # its update_params drew a new family per group
        oracle.hash_funcs = hash_funcs
    padded = {v: pem.prefix(v, pem.groups - 1) for v in truth}
    sizes = np.zeros(server.g, dtype=np.int64)
    # Each report aggregated as it is made: a list of 10^6 reports of m int64 is 2 GiB.
    client_cpu = aggregate_cpu = 0.0
    for value in values:
        start = time.process_time()
        report = client.privatise(padded[value])
        middle = time.process_time()
        server.aggregate(report)
        client_cpu += middle - start
        aggregate_cpu += time.process_time() - middle
        sizes[report[1]] += 1
    tracemalloc.start()
    start = time.process_time()
    found, estimates = server.find_heavy_hitters(k=TOP_K)
    server_cpu = time.process_time() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # Its estimates are g x the last group's; ours scale by n / n_g (same expectation).
    scale = len(values) / (server.g * max(1, sizes[-1]))
    listed = []
    for label, estimate in zip(found, estimates, strict=True):
        data = int(label, 2).to_bytes(MAX_LENGTH, "big").rstrip(b"\0")
        text = data.decode("utf-8", "replace")
        if estimate * scale >= threshold:
            listed.append(text)
    heavy = {v for v, c in truth.items() if c >= threshold}
    return {
        "listed": len(listed),
        "heavy": len(heavy),
        "recall": len(heavy.intersection(listed)) / len(heavy) if heavy else None,
        "precision": len(heavy.intersection(listed)) / len(listed) if listed else None,
        "top_k_listed": len(found),
        "client_cpu_s": client_cpu,
        "aggregate_cpu_s": aggregate_cpu,
        "discovery_cpu_s": server_cpu,
        "discovery_peak_mib": peak / 2**20,
        "found": listed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--vocabulary", type=int, default=100_000)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[2.0, 4.0])
    parser.add_argument("--peer-n", type=int, default=None, help="pure-ldp's n (default --n)")
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument(
        "--peer-k", type=int, default=64,
        help="sketch rows on both sides beside pure-ldp (its estimate loops over rows in Python)",
    )  # fmt: skip
    parser.add_argument("--out", default=str(HERE / "results" / "heavy_hitters.json"))
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    words = vocabulary(args.vocabulary, rng)
    rows = []
    for n in sorted({args.n, args.peer_n or args.n}):
        values = users(words, n, np.random.default_rng(SEED + n))
        truth = dict(Counter(values))
        for epsilon in args.epsilons:
            ours_row, (pem, discovery) = ours(epsilon, values, truth)
            row: dict[str, Any] = {"n": n, "epsilon": epsilon, "ours": ours_row}
            if not args.no_peer and n == (args.peer_n or args.n):
                same, (pem, discovery) = ours(epsilon, values, truth, args.peer_k)
                row["ours_peer_k"] = same
                row["pure-ldp"] = pure_ldp(epsilon, values, truth, pem, discovery.threshold)
            print(json.dumps({k: v for k, v in row.items()}, default=str)[:2000], flush=True)
            rows.append(row)
    result = {
        "generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "load_average": os.getloadavg()[0],
        "vocabulary": args.vocabulary,
        "zipf_exponent": ZIPF_EXPONENT,
        "max_length": MAX_LENGTH,
        "top_k": TOP_K,
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
