"""`ldptel demo`: the whole pipeline on this machine, with nothing installed by hand.

A private redis-server, the collector on a free port (real HTTP), a demo campaign, N simulated
users posting randomized reports in batches, one aggregator pass, then the report as a table
(with the true counts of the simulated data beside the estimates) and as an HTML page.
Everything it starts is stopped on exit, on Ctrl-C and on SIGTERM.

Scenarios: "screens" (default), a categorical campaign of app screens; "favorite-color", an
open-domain campaign where users type their favourite colour as free text, with a long tail
of misspellings and of rare names held by one user each; its report estimates the colour
names of a public dictionary (cli/color_names.py) and lists only those clearing the release
threshold. With `--oracle pem` the same users report to a "pem" campaign, whose report
discovers the frequent answers with no dictionary at all (Prefix Extending Method,
docs/heavy-hitters.md); its answers are at most PEM_MAX_LENGTH bytes.
"""

from __future__ import annotations

import argparse
import json
import secrets
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from ldptel.cli.progress import shows_progress
from ldptel.client.errors import ParameterError

if TYPE_CHECKING:  # the CLI imports a part only when a command needs it
    from ldptel.aggregator.model import WindowDocument
    from ldptel.aggregator.report import Candidates
    from ldptel.client.campaign import CampaignConfig, Mechanism
    from ldptel.client.oracles import ReportBatch
    from ldptel.client.transport import Transport

CAMPAIGN = "demo-screens"
COLOR_CAMPAIGN = "demo-favorite-color"
SCENARIOS = ("screens", "favorite-color", "daily")
#: favorite-color: the answers most users give (Zipf over this order), the share of rare
#: answers (misspellings of them, and dictionary names held by one user each), and the
#: longest answer the campaign takes (UTF-8 bytes).
COMMON_COLORS = ("blue", "green", "red", "purple", "black", "pink", "yellow", "orange")
RARE_SHARE = 0.1
SINGLE_NAMES = 40
COLOR_MAX_LENGTH = 64
#: favorite-color with --oracle pem: PEM reports one prefix per group and has a group per 8
#: bits of max_length, and its release threshold grows as sqrt(groups) (docs/heavy-hitters.md,
#: "What it costs"): 8 bytes make 8 groups at the defaults, and hold every common colour
#: and their misspellings; the one-user names are drawn among the names that fit.
PEM_MAX_LENGTH = 8
SCREENS = (
    "home", "search", "feed", "profile", "settings", "notifications", "messages", "compose",
    "camera", "gallery", "player", "playlist", "library", "downloads", "store", "checkout",
    "cart", "orders", "wishlist", "help", "about", "login", "signup", "onboarding",
    "map", "nearby", "events", "calendar", "friends", "groups", "stories", "live",
)  # fmt: skip
BATCH = 1000
THREADS = 4
SDK_USERS = 100
ADMIN_APP = "demo"


def default_oracle() -> str:
    from ldptel.client.oracles import ORACLES

    return "oue" if "oue" in ORACLES else "de"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario",
        choices=SCENARIOS,
        default="screens",
        help="screens: app screens, a fixed domain (default); favorite-color: free-text "
        "answers, an open-domain campaign reported against a dictionary of colour names; "
        "daily: a yes/no answer every day for a year, some users changing it, under "
        "memoization tree (cli/demo_daily.py)",
    )
    parser.add_argument(
        "--n", type=int, default=None, help="simulated users (default 100000; daily: 2000)"
    )
    parser.add_argument(
        "--oracle",
        default=None,
        help="oracle name (default oue; favorite-color: auto, or pem to discover the answers "
        "with no dictionary)",
    )
    parser.add_argument(
        "--epsilon",
        type=float,
        default=None,
        help="privacy budget (default 1; daily: 4 for the whole year of each install's reports)",
    )
    parser.add_argument(
        "--domain-size", type=int, default=len(SCREENS), metavar="D", help="items (default 32)"
    )
    parser.add_argument("--zipf-exponent", type=float, default=1.1, metavar="S")
    parser.add_argument("--seed", type=int, default=2024, help="simulation seed (default 2024)")
    parser.add_argument(
        "--sdk-users",
        type=int,
        default=None,
        metavar="K",
        help=f"how many of the users report through the client SDK (default {SDK_USERS}, "
        "at most n)",
    )
    parser.add_argument(
        "--html",
        default=".ldptel/demo-report.html",
        metavar="FILE",
        help="where to write the HTML report (default ./.ldptel/demo-report.html)",
    )
    parser.add_argument(
        "--windows",
        type=int,
        default=1,
        metavar="K",
        help="simulate K consecutive windows (the last one current) with a drifting "
        "distribution, n users each (default 1)",
    )
    parser.add_argument(
        "--dashboard",
        action="store_true",
        help="then serve the dashboard over the demo's data on a loopback port until Ctrl-C",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def item_names(domain_size: int) -> list[str]:
    """App screens for the first 32 items, then screen-<i>."""
    return [SCREENS[i] if i < len(SCREENS) else f"screen-{i}" for i in range(domain_size)]


def zipf_values(
    n: int, domain_size: int, exponent: float, rng: np.random.Generator
) -> NDArray[np.int64]:
    """n true values with P(item i) proportional to 1 / (i + 1)^exponent."""
    weights = 1.0 / np.arange(1, domain_size + 1) ** exponent
    return rng.choice(domain_size, size=n, p=weights / weights.sum())


def misspelled(word: str, rng: np.random.Generator) -> str:
    """A typo of `word`: one letter dropped, doubled or swapped with the next."""
    at = int(rng.integers(0, len(word) - 1))
    kind = int(rng.integers(0, 3))
    if kind == 0:
        return word[:at] + word[at + 1 :]
    if kind == 1:
        return word[: at + 1] + word[at:]
    return word[:at] + word[at + 1] + word[at] + word[at + 2 :]


def color_answers(
    n: int, exponent: float, rng: np.random.Generator, max_length: int | None = None
) -> list[str]:
    """n users' free-text favourite colours: COMMON_COLORS by Zipf, and RARE_SHARE of rare
    answers: up to SINGLE_NAMES dictionary names held by exactly one user each (of at most
    `max_length` UTF-8 bytes, if given), and misspellings of the common colours (many of
    them unique)."""
    from ldptel.cli.color_names import COLOR_NAMES

    rare = round(n * RARE_SHARE)
    others = [
        name
        for name in COLOR_NAMES
        if name not in COMMON_COLORS and (max_length is None or len(name.encode()) <= max_length)
    ]
    singles = [str(name) for name in rng.choice(others, min(SINGLE_NAMES, rare // 2), False)]
    typos = [
        misspelled(COMMON_COLORS[i], rng)
        for i in rng.integers(0, len(COMMON_COLORS), rare - len(singles))
    ]
    common = [COMMON_COLORS[i] for i in zipf_values(n - rare, len(COMMON_COLORS), exponent, rng)]
    answers = common + singles + typos
    rng.shuffle(answers)
    return answers


@dataclass(frozen=True)
class Scenario:
    """What a demo run simulates: the campaign, each user's true value, the candidates an
    open-domain report estimates, and the items whose true counts are shown (None: the
    strings a "pem" report discovers, known only from the report)."""

    campaign: dict[str, Any]
    answers: list[str]
    candidates: Candidates | None
    labels: list[str] | None

    @property
    def name(self) -> str:
        return str(self.campaign["name"])

    def true_counts(self, document: WindowDocument) -> list[int]:
        """The true count of each item of the document's reports, by item index."""
        counts = Counter(self.answers)
        labels = self.labels
        if labels is None:
            labels = [item["item"] for item in document["reports"][-1]["items"]]
        return [counts[label] for label in labels]


def scenario(
    args: argparse.Namespace, campaign: dict[str, Any], rng: np.random.Generator, drift: float
) -> Scenario:
    """The users of one window: screens by a Zipf law drifting with `drift` in [0, 1]
    (`drifting_probabilities`), or free-text colours (no drift), reported against the colour
    dictionary, or discovered with none (a "pem" campaign)."""
    if args.scenario == "screens":
        names = list(campaign["domain"])
        p = drifting_probabilities(args.domain_size, args.zipf_exponent, drift)
        values = rng.choice(args.domain_size, size=args.n, p=p)
        return Scenario(campaign, [names[v] for v in values], None, names)
    if campaign["oracle"] == "pem":
        answers = color_answers(args.n, args.zipf_exponent, rng, PEM_MAX_LENGTH)
        return Scenario(campaign, answers, None, None)
    from ldptel.aggregator.report import Candidates
    from ldptel.cli.color_names import COLOR_NAMES

    answers = color_answers(args.n, args.zipf_exponent, rng)
    candidates = Candidates(COLOR_NAMES, "the CSS colour names (cli/color_names.py)")
    return Scenario(campaign, answers, candidates, list(COLOR_NAMES))


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so every `finally` stops what the demo started."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Stage:
    """One stage of the demo: a tqdm progress bar on stderr where progress is shown (a
    terminal, no --json: cli/progress.py); `TIMINGS` keeps its seconds."""

    TIMINGS: ClassVar[dict[str, float]] = {}

    def __init__(
        self, description: str, show: bool, total: int | None = None, unit: str = "it"
    ) -> None:
        from tqdm import tqdm

        self.description = description
        self.started = time.perf_counter()
        self.bar = tqdm(
            total=total, desc=f"{description:<22}", unit=unit, unit_scale=True, file=sys.stderr,
            leave=True, dynamic_ncols=True, disable=not show,
        )  # fmt: skip
        self.lock = threading.Lock()

    def advance(self, amount: int = 1) -> None:
        with self.lock:
            self.bar.update(amount)

    def close(self) -> None:
        self.bar.close()
        Stage.TIMINGS[self.description] = time.perf_counter() - self.started


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """The WSGI app on a free loopback port in a background thread; yields its base URL."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    # shutdown() waits for serve_forever to next look at its flag: every 0.5 s by default.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="collector", daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


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
    answers are randomized by their item keys (KeyedOracle.perturb_keys), a "pem"
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
    from ldptel.client.oracles.base import FrequencyOracle, KeyedOracle

    if isinstance(oracle, PrefixExtendingMethod):
        texts = [campaign.open_value(a) for a in answers]
        return lambda start, rng: oracle.perturb_values(texts[start : start + BATCH], rng)
    if campaign.open_domain:
        assert isinstance(oracle, KeyedOracle)
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


def demo_campaign(args: argparse.Namespace) -> dict[str, Any]:
    """The demo campaign, validated here (one clear error before anything is started)."""
    from ldptel.client.campaign import CampaignConfig

    if args.epsilon is None:  # the default depends on the scenario (--help)
        args.epsilon = 4.0 if args.scenario == "daily" else 1.0

    campaign: dict[str, Any]
    if args.scenario == "daily":
        from ldptel.cli.demo_daily import daily_campaign

        campaign = daily_campaign(args.epsilon)
    elif args.scenario == "favorite-color":
        oracle = args.oracle or "auto"
        campaign = {
            "name": COLOR_CAMPAIGN,
            "oracle": oracle,
            "epsilon": args.epsilon,
            "max_length": PEM_MAX_LENGTH if oracle == "pem" else COLOR_MAX_LENGTH,
            "shards": 2,
        }
    else:
        campaign = {
            "name": CAMPAIGN,
            "oracle": args.oracle or default_oracle(),
            "epsilon": args.epsilon,
            "domain": item_names(args.domain_size),
            "shards": 2,
        }
    CampaignConfig.from_dict(campaign).build_mechanism()
    return campaign


def run(args: argparse.Namespace) -> int:
    daily = args.scenario == "daily"
    if args.n is None:
        from ldptel.cli.demo_daily import DAILY_USERS

        args.n = DAILY_USERS if daily else 100_000
    if daily and args.sdk_users:  # the SDK reports on the wall clock: today, not that year
        raise ParameterError("sdk_users", "the daily scenario simulates a past year: give 0")
    if daily:
        args.sdk_users = 0
    if args.n < 1:
        raise ParameterError("n", "must be >= 1")
    if args.sdk_users is None:
        args.sdk_users = min(SDK_USERS, args.n)
    if not 0 <= args.sdk_users <= args.n:
        raise ParameterError("sdk_users", "must be in [0, n]")
    if not 1 <= args.windows <= 60:
        raise ParameterError("windows", "must be in [1, 60] for the demo")
    if not 2 <= args.domain_size <= 4096:
        raise ParameterError("domain_size", "must be in [2, 4096] for the demo")
    campaign = demo_campaign(args)
    try:  # before anything starts: a bad --html fails at once, not after the whole run
        Path(args.html).parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ParameterError("html", f"cannot create {Path(args.html).parent}: {error}") from None
    with sigterm_as_interrupt(), ExitStack() as stack:
        return _demo(args, campaign, stack)


def _step(description: str, show: bool, action: Callable[[], Any]) -> Any:
    stage = Stage(description, show, total=1)
    try:
        result = action()
        stage.advance()
        return result
    finally:
        stage.close()


class SimulatedClock:
    """The demo collector's clock: the wall clock moved back by `offset` seconds, so that the
    simulated users of `--windows K` report into K consecutive past windows (production
    collectors stamp windows from the wall clock only)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        return time.time() - self.offset


def drifting_probabilities(domain_size: int, exponent: float, t: float) -> NDArray[np.float64]:
    """Zipf probabilities drifting linearly with t in [0, 1] towards the same law with the
    2nd and 5th items swapped: one item falls, another rises, the rest stay (a visible trend)."""
    weights = 1.0 / np.arange(1, domain_size + 1) ** exponent
    start = weights / weights.sum()
    end = start.copy()
    falling, rising = min(1, domain_size - 2), min(4, domain_size - 1)
    end[[falling, rising]] = end[[rising, falling]]
    return np.asarray((1 - t) * start + t * end, dtype=np.float64)


@dataclass(frozen=True)
class Filled:
    """What the demo put in Redis: the campaign's last window document and its true counts."""

    document: WindowDocument
    true_counts: list[int]


def _demo(args: argparse.Namespace, campaign: dict[str, Any], stack: ExitStack) -> int:
    from ldptel.aggregator.html import render_html
    from ldptel.aggregator.model import to_json
    from ldptel.aggregator.table import format_window
    from ldptel.cli.report import write_output
    from ldptel.store.redis_server import RedisServer

    show = shows_progress(sys.stderr, machine_output=args.json)
    server = _step("starting redis-server", show, lambda: RedisServer(appendonly=False).start())
    stack.callback(server.cleanup)
    if args.scenario == "daily":
        from ldptel.cli.demo_daily import fill_daily

        filled = fill_daily(server.url, args, campaign, stack, show)
    else:
        filled = fill(server.url, args, campaign, stack, show)
    document, true_counts = filled.document, filled.true_counts
    timings = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in Stage.TIMINGS.items())
    print(f"stages: {timings}", file=sys.stderr)
    for report in document["reports"]:
        for item in report["items"]:
            item["true_count"] = true_counts[item["index"]]
    write_output(Path(args.html), render_html(document), "html")
    if args.json:
        print(to_json(document, indent=2))
    else:
        print(format_window(document, true_counts))
        print(f"\nHTML report: {Path(args.html).resolve()}")
    if args.dashboard:
        _serve_dashboard(server.url, str(campaign["name"]), stack)
    return 0


def _serve_dashboard(redis_url: str, name: str, stack: ExitStack) -> None:
    """The dashboard over the demo's Redis on a loopback port, until Ctrl-C."""
    import redis

    from ldptel.dashboard import create_app

    client = redis.Redis.from_url(redis_url)
    stack.callback(client.close)
    base_url = stack.enter_context(serve(create_app(client)))
    print(f"Dashboard: {base_url}/campaigns/{name} (Ctrl-C stops the demo)", flush=True)
    with suppress(KeyboardInterrupt):
        threading.Event().wait()


def fill(
    redis_url: str,
    args: argparse.Namespace,
    campaign: dict[str, Any],
    stack: ExitStack,
    show: bool = False,
) -> Filled:
    """The collector on a free port over `redis_url`, the campaign, args.n users in each of
    args.windows consecutive windows (the last one the current window, where the SDK users
    report too), one aggregator pass that stores every window's document; progress bars if
    `show`."""
    import logging

    import redis

    from ldptel.aggregator.report import build_window, list_windows
    from ldptel.aggregator.worker import Worker
    from ldptel.client.campaign import CampaignConfig
    from ldptel.collector import create_app
    from ldptel.store.registry import Registry

    admin_token = secrets.token_urlsafe(32)
    clock = SimulatedClock()
    config = {"redis_url": redis_url, "admin_token": admin_token, "rate_limit": 0}
    app = create_app(config, clock=clock.now)
    for quiet in ("ldptel.collector.access", "werkzeug"):  # one line per request otherwise
        logging.getLogger(quiet).setLevel(logging.WARNING)
    base_url = stack.enter_context(serve(app))

    created = _step(
        "registering campaign",
        show,
        lambda: admin_post(base_url, "/v1/campaigns", admin_token, campaign),
    )
    stamped = {**campaign, "config_id": created["config_id"]}
    window_seconds = CampaignConfig.from_dict(campaign).window_seconds
    token = admin_post(base_url, "/v1/tokens", admin_token, {"app": ADMIN_APP})["token"]

    rng = np.random.default_rng(args.seed)
    users: Scenario | None = None
    for number in range(args.windows):
        last = number == args.windows - 1
        clock.offset = (args.windows - 1 - number) * window_seconds
        drift = number / (args.windows - 1) if args.windows > 1 else 0.0
        users = scenario(args, campaign, rng, drift)
        sdk_users = args.sdk_users if last else 0
        if sdk_users:  # on the wall clock, which the SDK's ledger reads from the collector
            stage = Stage("users via the SDK", show, total=sdk_users, unit="user")
            try:
                report_through_sdk(base_url, token, users.name, users.answers[:sdk_users], stage)
            finally:
                stage.close()
        label = "users posting reports"
        if args.windows > 1:
            label = f"window {number + 1}/{args.windows} users"
        stage = Stage(label, show, total=args.n - sdk_users, unit="report")
        try:
            answers = users.answers[sdk_users:]
            post_reports(base_url, token, stamped, answers, args.seed + number, stage)
        finally:
            stage.close()
    assert users is not None  # args.windows >= 1

    client = redis.Redis.from_url(redis_url)
    stack.callback(client.close)
    stage = Stage("aggregating", show, total=args.n * args.windows, unit="report")
    try:
        Worker(client, on_step=lambda result: stage.advance(result.reports)).run_pass()
    finally:
        stage.close()

    stage = Stage("building the report", show, total=1)
    try:
        registry = Registry(client)
        window = list_windows(client, registry, users.name)[-1]
        document = build_window(client, registry, users.name, window, None, None, users.candidates)
        stage.advance()
    finally:
        stage.close()
    return Filled(document, users.true_counts(document))
