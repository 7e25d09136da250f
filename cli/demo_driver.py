"""`ldptel demo`'s clients: simulated users posting randomized batches over real HTTP
(the wire protocol, docs/protocol.md), a few through the SDK itself, and admin calls."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ldptel.cli.demo_process import Stage
from ldptel.client.errors import ParameterError

if TYPE_CHECKING:  # the CLI imports a part only when a command needs it
    from ldptel.aggregator.model import WindowDocument
    from ldptel.client.campaign import CampaignConfig, Mechanism
    from ldptel.client.oracles import ReportBatch
    from ldptel.client.transport import Transport


BATCH = 1000


THREADS = 4


SDK_USERS = 100


ADMIN_APP = "demo"


def post_batch(transport: Transport, campaign: str, config_id: str, reports: list[str]) -> int:
    """POST one batch through the SDK's transport; a retry reuses the idempotency key."""
    key = uuid.uuid4().hex
    for attempt in range(5):
        outcome = transport.post_batch(campaign, config_id, key, reports)
        if outcome.verdict == "delivered":
            return len(reports)
        if outcome.verdict != "retry":
            break
        time.sleep(0.05 * 2**attempt)
    raise ParameterError("collector", f"batch rejected: {outcome.status} {outcome.reason}")


def admin_post(base_url: str, path: str, admin_token: str, body: dict[str, Any]) -> Any:
    import requests

    response = requests.post(
        f"{base_url}{path}", json=body, headers={"Authorization": f"Bearer {admin_token}"}
    )
    if response.status_code not in (200, 201):
        raise ParameterError("collector", f"{path}: {response.status_code} {response.text}")
    return response.json()


def post_reports(
    base_url: str,
    token: str,
    config: dict[str, Any],
    answers: Sequence[str],
    seed: int,
    stage: Stage,
) -> int:
    """Simulated users randomize their values and post them in batches from a few threads
    (vectorized: one oracle call per batch; a real app would use the Reporter). Open-domain
    answers are randomized by their item keys (KeyMechanism.perturb_keys), a "pem"
    campaign's by PrefixExtendingMethod.perturb_values."""
    from ldptel.client.campaign import CampaignConfig
    from ldptel.client.transport import Transport

    campaign = CampaignConfig.from_dict({k: v for k, v in config.items() if k != "config_id"})
    oracle = campaign.build_mechanism()
    perturb = batch_perturber(campaign, oracle, answers)
    starts = range(0, len(answers), BATCH)
    seeds = np.random.SeedSequence(seed).spawn(len(starts))
    local = threading.local()

    def send(start: int, seed_sequence: np.random.SeedSequence) -> int:
        if not hasattr(local, "transport"):
            local.transport = Transport(base_url, token, timeout=30.0)
        # Real clients draw from the OS CSPRNG; the simulation is seeded to be repeatable.
        rng = np.random.default_rng(seed_sequence)
        batch = perturb(start, rng)
        reports = [json.dumps(r, separators=(",", ":")) for r in oracle.encode(batch)]
        accepted = post_batch(local.transport, config["name"], config["config_id"], reports)
        stage.advance(accepted)
        return accepted

    with worker_pool() as pool:
        futures = [pool.submit(send, start, s) for start, s in zip(starts, seeds, strict=True)]
        return sum(future.result() for future in futures)


def batch_perturber(
    campaign: CampaignConfig, oracle: Mechanism, answers: Sequence[str]
) -> Callable[[int, np.random.Generator], ReportBatch]:
    """perturb(start, rng): the randomized reports of answers[start : start + BATCH], by the
    oracle's vectorized code (answers checked and indexed once, here)."""
    from ldptel.client.discovery import PrefixExtendingMethod
    from ldptel.client.hashing import item_keys
    from ldptel.client.oracles.base import FrequencyOracle
    from ldptel.client.oracles.keys import KeyMechanism

    if isinstance(oracle, PrefixExtendingMethod):
        texts = [campaign.open_value(a) for a in answers]
        return lambda start, rng: oracle.perturb_values(texts[start : start + BATCH], rng)
    if campaign.open_domain:
        assert isinstance(oracle, KeyMechanism)
        keys = item_keys(campaign.open_value(a) for a in answers)
        return lambda start, rng: oracle.perturb_keys(keys[start : start + BATCH], rng)
    assert isinstance(oracle, FrequencyOracle)  # a demo campaign is not numeric
    index = {label: i for i, label in enumerate(campaign.domain)}
    values = np.array([index[a] for a in answers], dtype=np.int64)
    return lambda start, rng: oracle.perturb_batch(values[start : start + BATCH], rng)


def report_through_sdk(
    base_url: str, token: str, campaign: str, labels: list[str], stage: Stage
) -> None:
    """Users who report through the real client SDK: one Reporter per user, each with its own
    state directory (ledger, memo, spool), exactly as an app install would."""
    import tempfile

    from ldptel.client import Reporter

    def one_user(root: str, user: int, label: str) -> None:
        # strict: a report that is not spooled must fail the demo, not thin its estimate
        with Reporter(base_url, token, state_dir=Path(root) / str(user), strict=True) as reporter:
            reporter.report(campaign, label)
            if not reporter.flush(timeout=30):
                raise ParameterError("collector", f"user {user}'s report was not delivered")
        stage.advance()

    with (
        tempfile.TemporaryDirectory(prefix="ldptel-demo-users-") as root,
        worker_pool() as pool,
    ):
        futures = [pool.submit(one_user, root, u, label) for u, label in enumerate(labels)]
        for future in futures:
            future.result()


@contextmanager
def worker_pool() -> Iterator[ThreadPoolExecutor]:
    """THREADS threads; on an error or Ctrl-C anywhere inside (while tasks are submitted too)
    the tasks not started yet are cancelled, so leaving waits only for the few running ones."""
    pool = ThreadPoolExecutor(THREADS)
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def run_step(description: str, show: bool, action: Callable[[], Any]) -> Any:
    stage = Stage(description, show, total=1)
    try:
        result = action()
        stage.advance()
        return result
    finally:
        stage.close()


@dataclass(frozen=True)
class Filled:
    """What the demo put in Redis: the campaign's last window document and its true counts."""

    document: WindowDocument
    true_counts: list[int]
