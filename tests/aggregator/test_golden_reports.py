"""Golden window documents: one per report kind, built from seeded reports through the real
stream, shard step and report builder, must match tests/aggregator/golden/ byte for byte on a
machine like the one that wrote them; elsewhere their floats may differ in the last bits
(tests/json_close.py: OpenBLAS's kernels, picked by CPU, differ in the last bit) and must agree
to 1e-12, every other value exactly.

They hold a refactor of the report path to its output. A change that alters a document on
purpose regenerates them (and says why in its commit):

    LDPTEL_UPDATE_GOLDENS=1 .venv/bin/pytest tests/aggregator/test_golden_reports.py
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from json_close import assert_json_close
from stream_entries import append, register, simulate

from ldptel.aggregator.model import to_json
from ldptel.aggregator.reports import Candidates, build_window
from ldptel.aggregator.worker import Worker
from ldptel.client.campaign import CampaignConfig
from ldptel.client.discovery.pem import PrefixExtendingMethod
from ldptel.client.hashing import item_keys
from ldptel.store.registry import Registry

GOLDEN = Path(__file__).parent / "golden"
WINDOW = 1_700_006_400
BUILT_AT = 1_700_100_000.0
COLORS = ["red", "green", "blue", "black", "white", "purple", "orange", "pink"]
#: Free-text answers: five frequent ones and a tail of strings held by one user each.
FREQUENT = {"blue": 900, "green": 600, "red": 400, "tea": 250, "mate": 150}
ANSWERS = [word for word, count in FREQUENT.items() for _ in range(count)]
ANSWERS += [f"z{i}" for i in range(700)]


def config_of(**data: Any) -> CampaignConfig:
    return CampaignConfig.from_dict({"name": "golden", "epsilon": 1.0, **data}).as_created()


def zipf_values(n: int, size: int, seed: int) -> np.ndarray:
    weights = 1.0 / np.arange(1, size + 1)
    return np.random.default_rng(seed).choice(size, n, p=weights / weights.sum())


def categorical(client: Any, oracle: str, **extra: Any) -> CampaignConfig:
    config = config_of(oracle=oracle, domain=COLORS, **extra)
    register(client, config)
    simulate(client, config, zipf_values(3000, len(COLORS), 1), window=WINDOW)
    return config


def levels(client: Any) -> CampaignConfig:
    config = config_of(
        oracle="oue", epsilon=2.0, domain=COLORS, levels={"high": 0.5, "medium": 1, "low": 2}
    )
    register(client, config)
    rng = np.random.default_rng(2)
    for number, level in enumerate(("high", "medium", "low")):
        oracle = config.level_oracle(level)
        assert oracle is not None
        values = zipf_values(1000, len(COLORS), 10 + number)
        append(client, config, oracle.perturb_batch(values, rng), window=WINDOW, level=level)
    return config


def open_domain(client: Any, oracle: str, **params: Any) -> CampaignConfig:
    config = config_of(oracle=oracle, epsilon=4.0, max_length=8, params=params)
    register(client, config)
    mechanism: Any = config.build_mechanism()
    rng = np.random.default_rng(3)
    for start in range(0, len(ANSWERS), 250):
        keys = item_keys(ANSWERS[start : start + 250])
        append(client, config, mechanism.perturb_keys(keys, rng), window=WINDOW)
    return config


def pem(client: Any) -> CampaignConfig:
    params = {"top_k": 4, "step_bits": 8, "sketch": "cms", "k": 64, "m": 64}
    config = config_of(oracle="pem", epsilon=4.0, max_length=2, params=params)
    register(client, config)
    mechanism = config.build_mechanism()
    assert isinstance(mechanism, PrefixExtendingMethod)
    rng = np.random.default_rng(4)
    values = ["ab"] * 3000 + ["cd"] * 2000 + ["ef"] * 1000 + [f"{i:02}" for i in range(100)] * 10
    for start in range(0, len(values), 500):
        batch = mechanism.perturb_values(values[start : start + 500], rng)
        append(client, config, batch, window=WINDOW)
    return config


def numeric(client: Any, oracle: str) -> CampaignConfig:
    config = config_of(oracle=oracle, range=[0, 2000])
    register(client, config)
    values = np.random.default_rng(5).gamma(2.0, 150.0, 4000)
    simulate(client, config, values, window=WINDOW, batch_size=500)
    return config


def rappor(client: Any) -> CampaignConfig:
    config = config_of(oracle="rappor", epsilon=1.1, domain=COLORS, params={"f": 0.5})
    register(client, config)
    simulate(client, config, zipf_values(4000, len(COLORS), 6), window=WINDOW, batch_size=1000)
    return config


def breakdown(client: Any, oracle: str) -> CampaignConfig:
    attributes = {"os": ["android", "ios", "web"], "plan": ["free", "pro"], "country": COLORS[:4]}
    config = config_of(oracle=oracle, epsilon=2.0, attributes=attributes)
    register(client, config)
    simulate(client, config, zipf_values(4000, 24, 7), window=WINDOW, batch_size=500)
    return config


CANDIDATES = Candidates(("blue", "green", "red", "tea", "mate", "z1", "z2", "never"), "golden")
#: name -> (campaign set-up, candidates for the report or None)
KINDS: dict[str, tuple[Callable[[Any], CampaignConfig], Candidates | None]] = {
    "categorical_de": (lambda c: categorical(c, "de"), None),
    "categorical_olh": (lambda c: categorical(c, "olh"), None),
    "levels": (levels, None),
    "open_domain_cms": (lambda c: open_domain(c, "cms", k=64, m=256), CANDIDATES),
    "open_domain_olh": (lambda c: open_domain(c, "olh"), CANDIDATES),
    "pem_discovery": (pem, None),
    "numeric_mean_pm": (lambda c: numeric(c, "pm"), None),
    "numeric_mean_duchi": (lambda c: numeric(c, "duchi"), None),
    "numeric_distribution_sw": (lambda c: numeric(c, "sw"), None),
    "numeric_distribution_dbitflip": (lambda c: numeric(c, "dbitflip"), None),
    "rappor": (rappor, None),
    "breakdown_joint": (lambda c: breakdown(c, "joint"), None),
    "breakdown_pairs": (lambda c: breakdown(c, "pairs"), None),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_window_document_is_unchanged(redis_client: Any, kind: str) -> None:
    setup, candidates = KINDS[kind]
    config = setup(redis_client)
    Worker(redis_client, build_reports=False).run_pass()
    document = build_window(
        redis_client, Registry(redis_client), config.name, WINDOW, None, BUILT_AT, candidates
    )
    text = to_json(document, indent=1) + "\n"
    path = GOLDEN / f"{kind}.json"
    if os.environ.get("LDPTEL_UPDATE_GOLDENS") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    if path.read_text() != text:  # another CPU's BLAS kernels: the same document to 1e-12
        assert_json_close(path.read_text(), text)
