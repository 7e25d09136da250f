"""Campaign configs: what is collected, with which oracle and epsilon, and in which windows.

A config is immutable; its id is a hash of its canonical JSON (RFC 8785, `canonical.py`), so
changing any parameter (epsilon above all) makes a new config id. Clients stamp every batch
with it, the collector rejects unknown ids and the aggregator never mixes two configs in one
estimate. A config is created once (`as_created`): every parameter a client needs to build or
check a report is written into it then, so no client ever derives one (docs/protocol.md).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, TypeAlias

from ldptel.client.canonical import canonical_json
from ldptel.client.discovery.pem import PrefixExtendingMethod
from ldptel.client.errors import (
    InvalidLevelError,
    InvalidValueError,
    ParameterError,
    ValueTypeError,
)
from ldptel.client.levels import (
    SAMPLE,
    SampleOracle,
    check_levels,
    check_strategy,
    reporting_epsilon,
)
from ldptel.client.numeric import NumericMechanism, choose_mechanism, numeric_class
from ldptel.client.numeric.auto import AUTO_NUMERIC
from ldptel.client.numeric.base import check_range
from ldptel.client.oracles import FrequencyOracle, open_domain_class, oracle_class
from ldptel.client.oracles.auto import (
    OPEN_DOMAIN_ORACLES,
    AutoOracle,
    choose_open_oracle,
    choose_oracle,
)
from ldptel.client.oracles.base import check_epsilon, check_int
from ldptel.client.tree_config import (
    check_tree_fields,
    resolve_memoization,
    tree_shape,
    with_tree_defaults,
)
from ldptel.client.tree_wire import TreeReports

#: What randomizes a campaign's reports: a frequency oracle (a campaign with a `domain`) or a
#: numeric mechanism (a campaign with a `range`). Both are ReportMechanisms (wire form,
#: storage, integer support: all the collector and the window state need); the union lets the
#: SDK and the report builder tell the two kinds apart. An open-domain "pem" campaign's is
#: PEM's reports (client/discovery/pem.py), a ReportMechanism too.
Mechanism: TypeAlias = FrequencyOracle | NumericMechanism | PrefixExtendingMethod | TreeReports

#: Used with fullmatch: "$" would also accept a trailing newline ("name\n").
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
#: Unicode's control characters, general category Cc: the C0 and C1 controls U+0000..U+001F
#: and U+007F..U+009F (tests/client/test_open_domain_values.py checks every code point), one
#: regex search instead of a category lookup per character.
CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f]")
DAY = 86_400
#: Memoization modes (ldptel.client.memo, docs/client.md "Longitudinal privacy"): "none", the
#: default, randomizes every report afresh (a guarantee for arbitrary value histories);
#: "exact_discloses_changes" resends a value's first report, and its promise is weaker: it holds
#: only between histories with the same change pattern, which the reports disclose.
MEMO_NONE = "none"
MEMO_EXACT = "exact_discloses_changes"
#: "tree" tracks changes over a horizon of windows (ldptel.client.tree: Erlingsson et al.,
#: SODA 2019): epsilon once per horizon, between any two value histories.
MEMO_TREE = "tree"
#: Why a numeric campaign cannot memoize: the install's secret rounding point puts nearby
#: values on one grid level, so which reports repeat discloses how close two values are; the
#: loss between histories with the same change pattern is unbounded (2 + ln(range / (K d))
#: for values d apart, pm). Refused until a design with an exact-loss proof replaces it.
NUMERIC_MEMO_REFUSED = (
    f'"{MEMO_EXACT}" is refused for numeric campaigns: which reports repeat discloses how '
    "close the values are (the loss between value histories with the same change pattern "
    'is unbounded); use "none"'
)
MEMOIZATION_MODES = (MEMO_NONE, MEMO_EXACT, MEMO_TREE)
#: Open-domain campaigns: the largest max_length (UTF-8 bytes). The report carries only a
#: hash, so the length costs nothing on the wire; it bounds what candidates need to cover.
MAX_OPEN_LENGTH = 4096
#: The base oracle needs d >= 2; an open-domain campaign's oracle has no labels (its reports
#: estimate candidates by item key), so this only sizes its unused per-label methods.
OPEN_DOMAIN_ORACLE_SIZE = 2


@dataclass(frozen=True)
class CampaignConfig:
    """One immutable campaign configuration (see docs/protocol.md for the JSON form)."""

    name: str
    oracle: str
    epsilon: float
    domain: tuple[str, ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    window_seconds: int = DAY
    shards: int = 1
    retention_seconds: int = 7 * DAY
    #: Client-side ledger: reports per window, and the lifetime epsilon budget per campaign
    #: (None = the client's default, DEFAULT_LIFETIME_FACTOR x epsilon; docs/client.md).
    reports_per_window: int = 1
    lifetime_epsilon: float | None = None
    #: With a delta in (0, 1), the lifetime budget is (lifetime_epsilon, lifetime_delta) by
    #: optimal composition (ldptel.client.lifetime), not a sum of epsilons. Absent from the
    #: canonical JSON when None, so other configs keep their ids.
    lifetime_delta: float | None = None
    #: A domain label that clients report for values outside the domain (None = reject them).
    other_label: str | None = None
    #: An open-domain campaign (no `domain` list; OPEN_DOMAIN_ORACLES): the longest value, in
    #: UTF-8 bytes of its NFC form, a client reports (`open_value`); None = a categorical
    #: campaign. Absent from the canonical JSON when None, so other configs keep their ids.
    max_length: int | None = None
    #: Personalized privacy (ldptel.client.levels): level name -> epsilon, each at most
    #: `epsilon` (the campaign's ceiling); empty = no levels. Absent from the canonical JSON
    #: when empty, so configs without levels keep their ids.
    levels: Mapping[str, float] = field(default_factory=dict)
    level_strategy: str = "optimal"
    level_threshold: float | None = None
    #: A config created with oracle "auto" names the chosen oracle in `oracle` and keeps the
    #: choice and the numbers behind it here (auto.choose_oracle); absent otherwise.
    oracle_choice: Mapping[str, Any] | None = None
    #: How clients reuse randomization across reports (MEMOIZATION_MODES); absent from the
    #: canonical JSON when "none", so configs from before keep their ids.
    memoization: str = MEMO_NONE
    #: Memoization "tree" only (absent from the JSON otherwise, so other configs keep their
    #: ids): the windows of a horizon (T) and the changes an install tracks in one (K);
    #: defaults derived when the config is created (`as_created`, client/tree_config.py).
    horizon_windows: int | None = None
    max_changes: int | None = None
    #: Per privacy level, the parameters derived from that level's epsilon (OLH's g, SS's k,
    #: RAPPOR's f, THE's theta) that `params` does not fix, written when the config is
    #: created (`as_created`); absent from the JSON when empty.
    level_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: A numeric campaign's [low, high] (ldptel.client.numeric): it has no `domain` (empty
    #: here, absent from the JSON) and a numeric mechanism as `oracle`; None (absent from the
    #: JSON) for a categorical campaign, so those keep their ids.
    range: tuple[float, float] | None = None
    #: True for a config stored before ids hashed RFC 8785 JSON: its id is the hash of
    #: `legacy_json` and stays so (ids are computed once, at creation). Not part of the JSON.
    legacy_id: bool = field(default=False, compare=False)

    @classmethod
    def from_dict(cls, data: object, *, stored: bool = False) -> CampaignConfig:
        """Validate an untrusted JSON object; raises ParameterError naming the field.

        `stored`: the config of an existing campaign (the registry's, or the collector's
        answer on a client), valid when it was created: the label rules added since
        (`check_domain`) are not applied again, so a stored campaign never stops loading."""
        if not isinstance(data, dict):
            raise ParameterError("config", "must be a JSON object")
        known = {f for f in cls.__dataclass_fields__} - {"legacy_id"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ParameterError(unknown[0], "unknown field")
        open_domain, numeric = _check_kind(data)
        max_length = _check_open_domain(data) if open_domain else None
        params = data.get("params", {})
        if not isinstance(params, dict):
            raise ParameterError("params", "must be an object")
        epsilon = check_epsilon(data["epsilon"])
        if numeric:
            domain, value_range = [], _check_numeric(data)
            oracle, params, choice = _resolve_numeric(data, epsilon, value_range, params)
        else:
            domain = [] if open_domain else check_domain(data["domain"], stored=stored)
            value_range = None
            oracle, params, choice = _resolve_oracle(data, max_length, len(domain), epsilon, params)
        levels, strategy, threshold = _check_level_fields(data, epsilon)
        memoization, lifetime_delta = _check_memoization(data, numeric, stored)
        horizon, changes = check_tree_fields(data, memoization)
        other = data.get("other_label")
        if other is not None and other not in domain:
            raise ParameterError("other_label", "must be null or a label of the domain")
        limits = _check_limits(data)
        config = cls(
            name=data["name"],
            oracle=oracle,
            epsilon=epsilon,
            domain=tuple(domain),
            params=dict(params),
            window_seconds=limits.window_seconds,
            shards=limits.shards,
            retention_seconds=limits.retention_seconds,
            reports_per_window=limits.reports_per_window,
            lifetime_epsilon=limits.lifetime_epsilon,
            lifetime_delta=lifetime_delta,
            other_label=other,
            max_length=max_length,
            levels=levels,
            level_strategy=strategy,
            level_threshold=threshold,
            oracle_choice=choice,
            level_params=_check_level_params(data.get("level_params", {}), levels),
            memoization=memoization,
            horizon_windows=horizon,
            max_changes=changes,
            range=value_range,
        )
        _check_built(config, stored)
        return config

    def to_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict: it deep-copies every label of the domain one by one (30 ms
        # at d = 4096, on every config load); only the mutable nested values need copies.
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["domain"] = list(self.domain)
        if self.max_length is None:
            del data["max_length"]  # absent unless open-domain: other configs keep their ids
        if self.range is None:
            del data["range"]  # absent unless numeric: other configs keep their ids
        else:
            data["range"] = list(self.range)
        if self.max_length is not None or self.range is not None:
            del data["domain"]  # an open domain or a range has no list (not even an empty one)
        data["params"] = copy.deepcopy(dict(self.params))
        if self.oracle_choice is not None:
            data["oracle_choice"] = copy.deepcopy(dict(self.oracle_choice))
        if self.other_label is None:
            del data["other_label"]  # absent when unset: older configs keep their ids
        if self.oracle_choice is None:
            del data["oracle_choice"]  # absent unless chosen by auto: older configs keep ids
        if self.lifetime_delta is None:
            del data["lifetime_delta"]  # absent unless declared: older configs keep their ids
        if self.memoization == MEMO_NONE:
            del data["memoization"]  # absent when the default: older configs keep their ids
        for tree_field in ("horizon_windows", "max_changes"):
            if data[tree_field] is None:
                del data[tree_field]  # absent unless memoization "tree": ids unchanged
        data["levels"] = dict(self.levels)
        if not self.levels:  # absent, so that configs from before levels keep their ids
            for key in ("levels", "level_strategy", "level_threshold"):
                del data[key]
        del data["legacy_id"]
        data["level_params"] = {level: dict(p) for level, p in self.level_params.items()}
        if not self.level_params:
            del data["level_params"]
        return data

    def canonical_json(self) -> str:
        """RFC 8785 (JCS) text of `to_dict()`: the characters whose UTF-8 bytes the id hashes."""
        return canonical_json(self.to_dict())

    def legacy_json(self) -> str:
        """The form ids hashed before RFC 8785: Python's json.dumps with sorted keys, no
        spaces, ensure_ascii=False (1.0 as `1.0`, 0.00001 as `1e-05`); kept for stored ids."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @cached_property
    def config_id(self) -> str:
        """First 16 hex digits of SHA-256 of the canonical JSON's UTF-8 bytes (of the legacy
        form for a config stored under a legacy id). Computed once per config object (the
        collector asks for it on every batch)."""
        text = self.legacy_json() if self.legacy_id else self.canonical_json()
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    @property
    def legacy_config_id(self) -> str:
        """The id the legacy form hashes to (see `legacy_json`)."""
        return replace(self, legacy_id=True).config_id

    def identified_as(self, claimed: object) -> CampaignConfig | None:
        """This config, if `claimed` is its id (RFC 8785 form) or its legacy id (then marked
        legacy_id, so that `config_id` is the stored id); None if it is neither."""
        for legacy in (False, True):
            candidate = replace(self, legacy_id=legacy)
            try:
                if candidate.config_id == claimed:
                    return candidate
            except ParameterError:  # not representable in JCS: only a legacy id can match
                continue
        return None

    @property
    def domain_size(self) -> int:
        return len(self.domain)

    @property
    def open_domain(self) -> bool:
        """True for a campaign of free-text values (`max_length`, no domain list)."""
        return self.max_length is not None

    def open_value(self, value: object) -> str:
        """The form in which an open-domain campaign reports `value`: its NFC normalization,
        checked by the label rules (`check_label`) and against `max_length` UTF-8 bytes;
        raises InvalidValueError (ValueTypeError for a non-string). NFC first, so that
        canonically equivalent spellings have one item key (docs/protocol.md, "Open
        domains")."""
        assert self.max_length is not None
        if not isinstance(value, str):
            raise ValueTypeError("value", f"must be a string, got {type(value).__name__}")
        text = unicodedata.normalize("NFC", value)
        try:
            size = check_label(text, "value")
        except ParameterError as error:
            raise InvalidValueError("value", error.reason) from None
        if size > self.max_length:
            raise InvalidValueError(
                "value", f"is {size} UTF-8 bytes, longer than max_length {self.max_length}"
            )
        return text

    def as_created(self) -> CampaignConfig:
        """This config in the form a campaign is created in: the oracle's fixed parameters
        (FrequencyOracle.fixed_params) and those derived from epsilon (derived_params: OLH's
        g, SS's k, RAPPOR's f, THE's theta) written out, into `params`, or per level into
        `level_params` when the config declares levels. Served with the config, so that no
        client derives one, and stored, so that neither a later default nor another rounding
        rule can change what an existing campaign's reports mean."""
        if self.memoization == MEMO_TREE and None in (self.horizon_windows, self.max_changes):
            return with_tree_defaults(self).as_created()
        oracle = self.build_mechanism()
        if not self.levels:
            derived = {**oracle.fixed_params(), **oracle.derived_params()}
            return replace(self, params={**derived, **self.params})
        shared = replace(self, params={**oracle.fixed_params(), **self.params})
        per_level: dict[str, dict[str, Any]] = {}
        for level in self.levels:
            level_oracle = shared.level_oracle(level)
            if level_oracle is None:  # does not report (threshold)
                continue
            derived = level_oracle.derived_params()
            own = {k: v for k, v in derived.items() if k not in shared.params}
            own.update(self.level_params.get(level, {}))
            if own:
                per_level[level] = own
        return replace(shared, level_params=per_level)

    @property
    def numeric(self) -> bool:
        """True for a numeric campaign (a `range`, a numeric mechanism)."""
        return self.range is not None

    def build_mechanism(self, epsilon: float | None = None, level: str = "") -> Mechanism:
        """The frequency oracle or numeric mechanism this config describes (`build_oracle`
        or `build_numeric`); a memoization "tree" config's tree reports (client/tree_wire.py)."""
        if self.memoization == MEMO_TREE:
            return TreeReports(replace(tree_shape(self), epsilon=epsilon or self.epsilon))
        if self.numeric:
            return self.build_numeric(epsilon)
        if self.discovers:
            return self.build_discovery(epsilon)
        return self.build_oracle(epsilon, level)

    @property
    def discovers(self) -> bool:
        """True for an open-domain campaign of oracle "pem": its reports discover heavy
        hitters with no candidate list (client/discovery/pem.py)."""
        return self.oracle == PrefixExtendingMethod.name

    def build_discovery(self, epsilon: float | None = None) -> PrefixExtendingMethod:
        """The Prefix Extending Method of a "pem" campaign, over its max_length, with
        `params` (top_k, step_bits, sketch, k, m)."""
        assert self.max_length is not None and self.discovers
        epsilon = self.epsilon if epsilon is None else epsilon
        try:
            return PrefixExtendingMethod(epsilon=epsilon, max_length=self.max_length, **self.params)
        except TypeError as error:  # an unexpected keyword in params
            raise ParameterError("params", str(error)) from error

    def build_numeric(self, epsilon: float | None = None) -> NumericMechanism:
        """The numeric mechanism of a numeric campaign, at `epsilon` (default: the
        config's), over its range with `params`."""
        if self.range is None:
            raise ParameterError("range", f"campaign {self.name!r} is not numeric")
        low, high = self.range
        epsilon = self.epsilon if epsilon is None else epsilon
        try:
            mechanism = numeric_class(self.oracle)(
                epsilon=epsilon, low=low, high=high, **self.params
            )
        except TypeError as error:  # an unexpected keyword in params
            raise ParameterError("params", str(error)) from error
        # Created, loaded by a client or by the aggregator: the integers it serves must give
        # at most the config's epsilon, or nobody reports or counts under it.
        mechanism.check_guarantee(self.params)
        return mechanism

    def build_oracle(self, epsilon: float | None = None, level: str = "") -> FrequencyOracle:
        """The oracle this config describes, at `epsilon` (default: the config's), with
        `params` and the level's `level_params`. Parameters derived from epsilon (OLH's g, SS's
        k, RAPPOR's f, THE's theta) are derived anew unless the config fixes them, which every
        config created since they are served does (`as_created`)."""
        if self.numeric:
            raise ParameterError("oracle", f"campaign {self.name!r} is numeric (build_numeric)")
        cls = open_domain_class(self.oracle) if self.open_domain else oracle_class(self.oracle)
        extra: dict[str, Any] = {"labels": list(self.domain)} if cls.takes_labels else {}
        epsilon = self.epsilon if epsilon is None else epsilon
        params = {**self.params, **self.level_params.get(level, {})}
        if self.open_domain:  # labels unused: a report estimates candidates (estimate_keys)
            extra = {}
        size = OPEN_DOMAIN_ORACLE_SIZE if self.open_domain else self.domain_size
        try:
            return cls(epsilon=epsilon, domain_size=size, **params, **extra)
        except TypeError as error:  # an unexpected keyword in params
            raise ParameterError("params", str(error)) from error

    def reporting_epsilon(self, level: str = "") -> float | None:
        """The epsilon a user at `level` randomizes with under the level strategy, or None if
        that level does not report (threshold). Without levels: "" -> the config's epsilon.

        The level rule, the one place it is written (SDK, collector, aggregator and simulation
        all come here): a level is required when the config declares levels, forbidden when
        it declares none, and must be one of them; raises InvalidLevelError otherwise."""
        if not self.levels:
            if level:
                raise InvalidLevelError(
                    "forbidden", f"campaign {self.name!r} declares no privacy levels"
                )
            return self.epsilon
        if not level:
            known = ", ".join(self.levels)
            raise InvalidLevelError(
                "required", f"campaign {self.name!r} requires a privacy level (one of {known})"
            )
        return reporting_epsilon(self.levels, level, self.level_strategy, self.level_threshold)

    def level_mechanism(self, level: str = "") -> Mechanism | None:
        """`level_oracle`, or the numeric mechanism of a numeric campaign (which declares no
        levels: `level` must be "")."""
        if self.numeric or self.discovers or self.memoization == MEMO_TREE:
            self.reporting_epsilon(level)  # the level rule: raises for any level
            return self.build_mechanism()
        return self.level_oracle(level)

    def level_oracle(self, level: str = "") -> FrequencyOracle | None:
        """The oracle a level's reports are randomized with (None: the level does not
        report); the same oracle name and params as the config, at the level's epsilon."""
        epsilon = self.reporting_epsilon(level)
        if epsilon is None:
            return None
        if self.level_strategy == SAMPLE:  # simulated only (levels.SIMULATED_STRATEGIES)
            assert self.level_threshold is not None
            inner = self.build_oracle(self.level_threshold, level)
            return inner if epsilon >= self.level_threshold else SampleOracle(inner, epsilon)
        return self.build_oracle(epsilon, level)

    def window_of(self, timestamp: float) -> int:
        """Start (unix seconds) of the window that contains `timestamp`."""
        return math.floor(timestamp / self.window_seconds) * self.window_seconds


def _check_kind(data: dict[str, Any]) -> tuple[bool, bool]:
    """(open domain, numeric): the kind of campaign `data` declares, once its required
    fields are present and its name and oracle are strings of the right form."""
    open_domain, numeric = "max_length" in data, "range" in data
    if open_domain and numeric:
        raise ParameterError("range", "a campaign has max_length or range, not both")
    kind_fields = () if open_domain or numeric else ("domain",)
    for required in ("name", "oracle", "epsilon", *kind_fields):
        if required not in data:
            extra = " (or max_length for free text, or range for numbers)"
            extra = extra if required == "domain" else ""
            raise ParameterError(required, "is required" + extra)
    name = data["name"]
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ParameterError("name", "must match [a-z0-9][a-z0-9_-]{0,63}")
    if not isinstance(data["oracle"], str):
        raise ParameterError("oracle", "must be a string")
    return open_domain, numeric


def _check_level_fields(
    data: dict[str, Any], epsilon: float
) -> tuple[dict[str, float], str, float | None]:
    """The privacy levels (each at most the config's epsilon), the level strategy and its
    threshold."""
    levels = check_levels(data.get("levels", {}))
    if levels and max(levels.values()) > epsilon:
        raise ParameterError("levels", f"level epsilons must be <= epsilon ({epsilon:g})")
    strategy, threshold = check_strategy(
        data.get("level_strategy", "optimal"), data.get("level_threshold"), levels
    )
    return levels, strategy, threshold


def _check_memoization(
    data: dict[str, Any], numeric: bool, stored: bool
) -> tuple[str, float | None]:
    """The memoization mode (exact memoization of numbers refused, unless stored before the
    refusal) and the lifetime delta it allows."""
    memoization = resolve_memoization(data, MEMO_NONE)
    if memoization not in MEMOIZATION_MODES:
        raise ParameterError("memoization", f"must be one of {', '.join(MEMOIZATION_MODES)}")
    if memoization == MEMO_EXACT and numeric and not stored:
        raise ParameterError("memoization", NUMERIC_MEMO_REFUSED)
    return memoization, _check_lifetime_delta(data.get("lifetime_delta"), memoization)


@dataclass(frozen=True)
class _Limits:
    """A config's windows, shards, retention and per-client budgets, checked."""

    window_seconds: int
    shards: int
    retention_seconds: int
    reports_per_window: int
    lifetime_epsilon: float | None


def _check_limits(data: dict[str, Any]) -> _Limits:
    lifetime = data.get("lifetime_epsilon")
    return _Limits(
        window_seconds=check_int(data.get("window_seconds", DAY), "window_seconds", 60),
        shards=check_int(data.get("shards", 1), "shards", 1, 1024),
        retention_seconds=check_int(data.get("retention_seconds", 7 * DAY), "retention_seconds", 0),
        reports_per_window=check_int(
            data.get("reports_per_window", 1), "reports_per_window", 1, 1_000_000
        ),
        lifetime_epsilon=None if lifetime is None else check_epsilon(lifetime, "lifetime_epsilon"),
    )


def _check_built(config: CampaignConfig, stored: bool) -> None:
    """What only the built config can check: the oracle's own parameters, at the config's
    epsilon and at each level's, and (for a new config) that its canonical JSON exists."""
    config.build_mechanism()  # the oracle validates its own parameters
    for level in config.levels:  # and at each level's epsilon (e.g. a fixed OLH g too small)
        if config.level_oracle(level) is None and level in config.level_params:
            raise ParameterError("level_params", f"level {level!r} does not report")
    if not stored:
        config.canonical_json()  # raises for values JCS cannot write (NaN in params...)


def _check_lifetime_delta(value: object, memoization: str) -> float | None:
    """lifetime_delta: None, or a number in (0, 1) under memoization "none" (optimal
    composition needs every report to be a fresh randomization)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ParameterError("lifetime_delta", "must be null or a number in (0, 1)")
    if memoization != MEMO_NONE:
        raise ParameterError(
            "lifetime_delta", f'needs memoization "{MEMO_NONE}": every report randomized afresh'
        )
    return float(value)


def check_domain(domain: object, *, stored: bool = False) -> list[str]:
    """The labels of an untrusted config: a list of distinct strings and, for a new config
    (not `stored`), each non-empty, free of control characters (NUL included) and in Unicode
    NFC. Labels are compared, hashed (item keys) and reported as their exact code points, so
    NFC and NFD spellings would be two labels; requiring NFC makes canonically equivalent
    labels impossible in one domain (docs/protocol.md, "Labels")."""
    if not isinstance(domain, list) or not all(isinstance(v, str) for v in domain):
        raise ParameterError("domain", "must be a list of strings")
    for i, label in enumerate(domain):
        if stored:
            try:
                label.encode("utf-8")
            except UnicodeEncodeError as error:
                raise ParameterError("domain", f"label {i} has an unpaired surrogate") from error
        else:
            check_label(label, "domain", f"label {i}")
    if len(set(domain)) != len(domain):
        raise ParameterError("domain", "values must be distinct")
    return domain


def check_label(text: str, field: str, what: str = "value") -> int:
    """The label rules (docs/protocol.md, "Labels") for one text: valid Unicode, non-empty,
    no control character, NFC; raises ParameterError on `field`, else returns the length of
    its UTF-8 form. Campaign labels, open-domain values and candidates all keep them."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise ParameterError(field, f"{what} has an unpaired surrogate") from error
    if not text:
        raise ParameterError(field, f"{what} is empty")
    if CONTROL_CHARACTER.search(text):
        raise ParameterError(field, f"{what} holds a control character (NUL...)")
    if not unicodedata.is_normalized("NFC", text):
        raise ParameterError(field, f"{what} is not in Unicode NFC form")
    return size


def check_candidates(texts: Iterable[str], field: str = "candidates") -> list[str]:
    """Candidate strings of an open-domain report: each in NFC (so that it has the item key
    clients report it under, CampaignConfig.open_value) and keeping the label rules,
    duplicates dropped, order kept; raises ParameterError on `field` naming the entry."""
    checked: dict[str, None] = {}
    for i, text in enumerate(texts):
        normalized = unicodedata.normalize("NFC", text)
        check_label(normalized, field, f"entry {i + 1}")
        checked[normalized] = None
    return list(checked)


def _check_open_domain(data: dict[str, Any]) -> int:
    """max_length of an open-domain config, which has no domain, other_label or levels."""
    for absent in ("domain", "other_label", "levels"):
        if absent in data:
            raise ParameterError(absent, "an open-domain campaign (max_length) has none")
    oracle = data["oracle"]
    if oracle not in (*OPEN_DOMAIN_ORACLES, PrefixExtendingMethod.name, AutoOracle.name):
        allowed = ", ".join((*OPEN_DOMAIN_ORACLES, PrefixExtendingMethod.name, AutoOracle.name))
        raise ParameterError("oracle", f"an open-domain campaign takes {allowed}, not {oracle!r}")
    return check_int(data["max_length"], "max_length", 1, MAX_OPEN_LENGTH)


def _check_numeric(data: dict[str, Any]) -> tuple[float, float]:
    """The [low, high] of an untrusted numeric config, which declares neither a domain nor
    what only categorical campaigns have (an other label, privacy levels)."""
    value_range = data["range"]
    if not isinstance(value_range, list) or len(value_range) != 2:
        raise ParameterError("range", "must be a list [low, high]")
    try:
        low, high = check_range(*value_range)
    except ParameterError as error:
        raise ParameterError("range", error.reason) from error
    for categorical in ("domain", "other_label"):
        if data.get(categorical) is not None:
            raise ParameterError(categorical, "a numeric campaign (range) has none")
    for levels in ("levels", "level_params"):  # inverse-variance combination of means: later
        if data.get(levels):
            raise ParameterError(levels, "privacy levels are not supported for numeric campaigns")
    return low, high


def _resolve_numeric(
    data: dict[str, Any], epsilon: float, value_range: tuple[float, float], params: dict[str, Any]
) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """(mechanism name, params, oracle_choice) of an untrusted numeric config; "auto" is
    resolved here, once, as for frequency oracles (`_resolve_oracle`)."""
    name = numeric_class(data["oracle"]).name
    choice = data.get("oracle_choice")
    if name != AUTO_NUMERIC.name:
        if choice is not None and (not isinstance(choice, dict) or choice.get("mechanism") != name):
            raise ParameterError("oracle_choice", f"must be null or a choice of {name!r}")
        return name, params, choice
    if choice is not None:
        raise ParameterError("oracle_choice", "is written when oracle 'auto' is resolved")
    if params:
        raise ParameterError("params", "oracle 'auto' for a numeric campaign takes none")
    chosen = choose_mechanism(epsilon, *value_range)
    # As JSON reads it back (lists, not tuples), so the created config equals the stored one.
    return chosen.mechanism, {}, json.loads(json.dumps(chosen.to_dict()))


def _check_level_params(value: object, levels: Mapping[str, float]) -> dict[str, dict[str, Any]]:
    """level name -> object of oracle parameters, for declared levels only."""
    if not isinstance(value, dict) or not all(isinstance(p, dict) for p in value.values()):
        raise ParameterError("level_params", "must be an object of level name -> object")
    unknown = sorted(set(value) - set(levels))
    if unknown:
        raise ParameterError("level_params", f"{unknown[0]!r} is not a privacy level")
    return {level: dict(params) for level, params in value.items()}


def _resolve_oracle(
    data: dict[str, Any],
    max_length: int | None,
    domain_size: int,
    epsilon: float,
    params: dict[str, Any],
) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """(oracle name, params, oracle_choice) of an untrusted config. "auto" is resolved here,
    once: the config stores the chosen oracle, so its reports never change meaning when a
    later version would choose differently, and every privacy level uses the same oracle."""
    choice = data.get("oracle_choice")
    if data["oracle"] == PrefixExtendingMethod.name and max_length is not None:
        if choice is not None:
            raise ParameterError("oracle_choice", "must be null for oracle 'pem'")
        return PrefixExtendingMethod.name, params, None
    name = oracle_class(data["oracle"]).name
    if name != AutoOracle.name:
        if choice is not None and (not isinstance(choice, dict) or choice.get("oracle") != name):
            raise ParameterError("oracle_choice", f"must be null or a choice of oracle {name!r}")
        return name, params, choice
    if choice is not None:
        raise ParameterError("oracle_choice", "is written when oracle 'auto' is resolved")
    unknown = sorted(set(params) - {"max_report_bytes"})
    if unknown:
        raise ParameterError(
            "params", f"oracle 'auto' takes only max_report_bytes, not {unknown[0]}"
        )
    limit = params.get("max_report_bytes")
    if max_length is not None:
        choice = choose_open_oracle(epsilon, limit)
    else:
        choice = choose_oracle(domain_size, epsilon, limit)
    return choice["oracle"], dict(choice["params"]), choice
