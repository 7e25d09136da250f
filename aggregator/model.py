"""The report model: the types of a window document, from the estimates to the JSON the
aggregator stores, the collector serves unchanged and the CLI and HTML pages read
(docs/aggregator.md, "The report document", describes every field).

TypedDicts, not dataclasses: a document is JSON, and these types are that JSON's schema, so
the stored bytes, the HTTP API and `ldptel report --json` stay one format that mypy checks
end to end. `from_json` checks a document against these types (every field at any depth:
present, of its type, and none the model lacks) before anything reads it; `to_json` writes it.

Optional fields are keys of a `total=False` subclass (not NotRequired): that works on every
Python ldptel supports and keeps `__required_keys__` exact for `from_json`.
"""

import json
from typing import Literal, TypedDict

from ldptel.aggregator.typed_json import checker

Status = Literal["ok", "not_enough_reports"]


class Window(TypedDict):
    """A time window: [start, end) in UTC."""

    start: str
    end: str
    start_unix: int
    seconds: int


class Significance(TypedDict):
    """How "significantly above zero" was decided (one-sided, Bonferroni over the domain)."""

    z: float
    expected_false_flags: float
    rule: str
    method: str


class Central(TypedDict):
    """The central (epsilon, delta) from amplification by shuffling (aggregator/privacy.py);
    when `applies` is false, `epsilon` is the local one, `delta` 0 and `reason` says why."""

    bound: str
    local_epsilon: float
    n_users: int
    delta: float
    applies: bool
    epsilon: float
    #: FMT21 Theorem 3.1's closed form at the same n and delta, for comparison (None when its
    #: precondition fails).
    closed_form_epsilon: float | None
    reason: str
    #: Who it holds against, between which inputs, and in words (ldptel.client.statements).
    adversary: str
    neighbouring: str
    statement: str


class Local(TypedDict):
    """The local guarantee of one report, against the collector and the network."""

    epsilon: float
    delta: float
    adversary: str
    neighbouring: str
    statement: str


class CentralLifetime(TypedDict):
    """An install's reports over every window, for a reader of every window's report: the
    windows' central guarantees composed (aggregator/privacy.py); null figures when it does
    not apply (no central guarantee, or memoized reports)."""

    applies: bool
    windows: int
    epsilon: float | None
    delta: float | None
    n_users: int
    adversary: str
    neighbouring: str
    statement: str


class RapporPrivacy(TypedDict):
    """RAPPOR's parameters as used (Rappor.privacy_summary)."""

    epsilon: float
    permanent_epsilon: float
    k: float
    h: float
    m: float
    f: float
    p: float
    q: float


class _Privacy(TypedDict):
    local_epsilon: float
    reports_per_window: int
    user_epsilon_per_window: float
    lifetime_epsilon: float | None
    central: Central | None


class Longitudinal(TypedDict):
    """The guarantee over a user's whole history that the client's ledger enforces
    (ldptel.client.guarantee.Guarantee; docs/client.md, "Longitudinal privacy")."""

    memoization: str
    per_report_epsilon: float
    window_epsilon: float
    #: By adding epsilons (delta 0), over at most lifetime_reports fresh reports.
    lifetime_epsilon: float
    lifetime_reports: int
    #: By optimal composition, at lifetime_delta (null under exact memoization).
    lifetime_composed_epsilon: float | None
    lifetime_delta: float | None
    #: Whose budget the ledger enforces: basic or optimal composition.
    accountant: str
    adversary: str
    holds_for: str
    discloses: str
    statement: str


class Privacy(_Privacy, total=False):
    """A report's privacy guarantee in numbers."""

    #: Over a user's whole history: per window, for life, for which histories.
    longitudinal: Longitudinal
    #: One report's guarantee against the collector and the network, in words.
    local: Local
    #: For a reader of every window's report, over an install's life.
    central_lifetime: CentralLifetime
    #: RAPPOR only: its parameters and the bound over all reports of one value.
    rappor: RapporPrivacy
    permanent_epsilon: float
    #: A combined report: each level's own privacy section.
    levels: dict[str, "Privacy"]


class LevelRow(TypedDict):
    """One privacy level of a combined report."""

    level: str
    epsilon: float
    #: None: the level does not report (threshold strategy).
    epsilon_used: float | None
    n: int
    #: Its weight in the combined estimate (mean over items; 0 without reports).
    weight: float


class Combined(TypedDict):
    """How a config's privacy levels were combined."""

    strategy: str
    threshold: float | None
    method: str
    assumption: str
    levels: list[LevelRow]


class _Item(TypedDict):
    item: str
    index: int
    estimate: float
    variance: float
    stderr: float
    ci_low: float
    ci_high: float
    consistent: float
    threshold: float
    significant: bool


class Item(_Item, total=False):
    """One item of the domain: its estimated count with variance, stderr, CI, consistent
    estimate and significance."""

    #: Simulated data only (`ldptel demo`): the true count, drawn beside the estimate.
    true_count: int


class _Discovery(TypedDict):
    #: The campaign's longest value, in UTF-8 bytes.
    max_length: int
    #: Distinct candidate strings estimated, where they came from, and how many are listed.
    candidates: int
    source: str
    discovered: int
    #: The threshold of a candidate nobody holds (each item also carries its own).
    threshold: float
    expected_false_discoveries: float
    #: That thresholding is post-processing and costs no privacy, in words.
    statement: str


class Discovery(_Discovery, total=False):
    """An open-domain report: which candidates were estimated, and the release threshold
    that decides which are listed (aggregator/reports/open_domain.py)."""

    #: Candidates given but not estimated: longer than max_length UTF-8 bytes, so no client
    #: can send them (counting them would only raise the threshold).
    too_long: int


class MeanEstimate(TypedDict):
    """The mean of a numeric campaign's clipped values: the unbiased estimate, the variance
    estimated from the reports (conservative: it includes the values' own spread), its
    standard error and confidence interval (normal approximation), and the exact worst-case
    standard error over all inputs (a bound that depends on no data)."""

    estimate: float
    variance: float
    stderr: float
    ci_low: float
    ci_high: float
    worst_case_stderr: float
    method: str


class Bucket(TypedDict):
    """One bucket [low, high) of an estimated distribution, around a grid level `point`:
    the consistent probability (>= 0, summing to 1), the estimator's own value `raw`, and
    the CDF at the bucket's end."""

    low: float
    high: float
    point: float
    probability: float
    raw: float
    cdf: float


class Quantile(TypedDict):
    """The q-quantile of an estimated distribution."""

    q: float
    value: float


class DistributionEstimate(TypedDict):
    """The estimated distribution of the clipped values (sw, dbitflip): a histogram over
    buckets, its CDF and quantiles."""

    method: str
    buckets: list[Bucket]
    quantiles: list[Quantile]


class _Numeric(TypedDict):
    low: float
    high: float
    resolution: int
    clipping: str
    mean: MeanEstimate


class Numeric(_Numeric, total=False):
    """A numeric campaign's estimates: its range, the mean, and for distribution
    mechanisms the distribution."""

    distribution: DistributionEstimate


class TreeNode(TypedDict):
    """One node of a window's prefix: its level, first window (index in the horizon) and
    the sum of the +-1 bits reported for it, per tracked item."""

    level: int
    start: int
    sums: list[int]


class TreeSection(TypedDict):
    """Memoization "tree" (ldptel.client.tree): where the window lies in its horizon, the
    nodes its estimates sum (read from the window states at each node's end), and what an
    install past max_changes does to them."""

    horizon: int
    window_index: int
    horizon_windows: int
    max_changes: int
    levels: int
    nodes: list[TreeNode]
    method: str
    past_max_changes: str


class BreakdownCell(TypedDict):
    """One cell of a marginal: a label of each of its attributes, the estimated count of
    users holding them (unbiased) with its exact variance, stderr and interval, and the
    consistent count (post-processed: non-negative, agreeing across marginals; biased)."""

    values: list[str]
    estimate: float
    variance: float
    stderr: float
    ci_low: float
    ci_high: float
    consistent: float


class BreakdownMarginal(TypedDict):
    """The one-way or two-way marginal over `attributes` (campaign order), its cells
    row-major over the attributes' labels."""

    attributes: list[str]
    cells: list[BreakdownCell]


class BreakdownSection(TypedDict):
    """A breakdown campaign's marginals (client/multi/, docs/breakdowns.md)."""

    mechanism: str
    attributes: dict[str, list[str]]
    marginals: list[BreakdownMarginal]
    #: How the consistent column was made, and that it is biased, in words.
    consistency: str


class _Report(TypedDict):
    campaign: str
    config_id: str
    level: str
    oracle: str
    epsilon: float
    n: int
    window: Window
    built_at: str
    status: Status
    message: str
    min_reports: int
    confidence: float
    consistency: str
    privacy: Privacy
    #: The domain's items (empty for a numeric campaign).
    items: list[Item]


class Report(_Report, total=False):
    """The estimates of one (config, privacy level) in one window."""

    #: A categorical campaign: how items were flagged significantly above zero.
    significance: Significance
    #: A config with privacy levels: the report combining them (level "").
    combined: Combined
    #: An open-domain config: its candidates and release threshold.
    discovery: Discovery
    #: A numeric campaign (a range instead of a domain): the mean and distribution (absent
    #: while n < min_reports, as its items would be).
    numeric: Numeric
    #: Memoization "tree": the window's place in its horizon and the nodes summed.
    tree: TreeSection
    #: A breakdown campaign (attributes): every one-way and two-way marginal (absent while
    #: n < min_reports, as its items would be).
    breakdown: BreakdownSection
    #: Present when the stated stderr and intervals are not calibrated (full RAPPOR decoded
    #: by its LASSO selection, more candidates than m k / 4): why, and how far off.
    uncalibrated: str


class WindowDocument(TypedDict):
    """Every report of one campaign window: what keys.report stores."""

    campaign: str
    window: Window
    built_at: str
    reports: list[Report]


def to_json(document: WindowDocument, indent: int | None = None) -> str:
    """The document as JSON: compact for storage, indented for people."""
    separators = (",", ":") if indent is None else None
    return json.dumps(document, indent=indent, separators=separators)


def from_json(raw: str | bytes) -> WindowDocument:
    """A window document from JSON, checked against the model."""
    value = json.loads(raw)
    checker(WindowDocument)(value)
    document: WindowDocument = value
    return document
