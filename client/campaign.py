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
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any, TypeAlias

from ldptel.client.campaign_kinds import (
    KINDS,
    CampaignKind,
    Categorical,
    Discovery,
    Numeric,
    OpenDomain,
    kind_of,
)
from ldptel.client.canonical import canonical_json
from ldptel.client.discovery.pem import PrefixExtendingMethod
from ldptel.client.errors import (
    InvalidLevelError,
    InvalidValueError,
    ParameterError,
    ValueTypeError,
)
from ldptel.client.labels import check_label
from ldptel.client.levels import (
    SAMPLE,
    SampleOracle,
    check_levels,
    check_strategy,
    reporting_epsilon,
)
from ldptel.client.memoization import MEMO_NONE, MEMO_TREE, check_memoization
from ldptel.client.multi.wire import BreakdownReports
from ldptel.client.numeric import NumericMechanism
from ldptel.client.oracles import FrequencyOracle, OpenDomainMechanism
from ldptel.client.oracles.base import check_epsilon, check_int
from ldptel.client.tree import TreeShape
from ldptel.client.tree_config import (
    check_tree_fields,
    tree_defaults,
)
from ldptel.client.tree_wire import TreeReports

#: What randomizes a campaign's reports: a frequency oracle (a campaign with a `domain`) or a
#: numeric mechanism (a campaign with a `range`). Both are ReportMechanisms (wire form,
#: storage, integer support: all the collector and the window state need); the union lets the
#: SDK and the report builder tell the kinds apart. An open-domain campaign's is a key
#: mechanism (client/oracles/keys.py: no domain; its state a sketch or, for OLH, a report
#: log), a "pem" campaign's PEM's reports (client/discovery/pem.py), a breakdown campaign's
#: its breakdown reports (client/multi/wire.py): WireMechanisms all.
Mechanism: TypeAlias = (
    FrequencyOracle
    | OpenDomainMechanism
    | NumericMechanism
    | PrefixExtendingMethod
    | TreeReports
    | BreakdownReports
)

#: Used with fullmatch: "$" would also accept a trailing newline ("name\n").
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
DAY = 86_400
#: Every field of a config's JSON: the campaign's own, and its kinds'.
_CAMPAIGN_FIELDS = (
    "name", "oracle", "epsilon", "params", "window_seconds", "shards", "retention_seconds",
    "reports_per_window", "lifetime_epsilon", "lifetime_delta", "levels", "level_strategy",
    "level_threshold", "oracle_choice", "memoization", "horizon_windows", "max_changes",
    "level_params",
)  # fmt: skip
_JSON_FIELDS = {*_CAMPAIGN_FIELDS, *(f.name for kind in KINDS for f in fields(kind))}


@dataclass(frozen=True, kw_only=True)
class CampaignConfig:
    """One immutable campaign configuration (see docs/protocol.md for the JSON form): the
    campaign's identity, epsilon and limits, and what it measures (`kind`)."""

    name: str
    oracle: str
    epsilon: float
    #: What the values are and what randomizes them (client/campaign_kinds.py); its fields
    #: sit beside these in the JSON.
    kind: CampaignKind
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
        unknown = sorted(set(data) - _JSON_FIELDS)
        if unknown:
            raise ParameterError(unknown[0], "unknown field")
        kind_class = kind_of(data)
        _check_identity(data)
        params = data.get("params", {})
        if not isinstance(params, dict):
            raise ParameterError("params", "must be an object")
        epsilon = check_epsilon(data["epsilon"])
        kind = kind_class.from_dict(data, stored=stored)
        resolved = kind.resolve(data["oracle"], epsilon, params, data.get("oracle_choice"))
        levels, strategy, threshold = _check_level_fields(data, epsilon)
        memoization, lifetime_delta = check_memoization(data, kind.exact_refused, stored)
        horizon, changes = check_tree_fields(data, memoization)
        limits = _check_limits(data)
        config = cls(
            name=data["name"],
            oracle=resolved.oracle,
            epsilon=epsilon,
            kind=kind,
            params=dict(resolved.params),
            window_seconds=limits.window_seconds,
            shards=limits.shards,
            retention_seconds=limits.retention_seconds,
            reports_per_window=limits.reports_per_window,
            lifetime_epsilon=limits.lifetime_epsilon,
            lifetime_delta=lifetime_delta,
            levels=levels,
            level_strategy=strategy,
            level_threshold=threshold,
            oracle_choice=resolved.choice,
            level_params=_check_level_params(data.get("level_params", {}), levels),
            memoization=memoization,
            horizon_windows=horizon,
            max_changes=changes,
        )
        _check_built(config, stored)
        return config

    def to_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict: it deep-copies every label of the domain one by one (30 ms
        # at d = 4096, on every config load); only the mutable nested values need copies.
        data = {name: getattr(self, name) for name in _CAMPAIGN_FIELDS}
        data.update(self.kind.json_fields())
        data["params"] = copy.deepcopy(dict(self.params))
        if self.oracle_choice is None:
            del data["oracle_choice"]  # absent unless chosen by auto: older configs keep ids
        else:
            data["oracle_choice"] = copy.deepcopy(dict(self.oracle_choice))
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
    def domain(self) -> tuple[str, ...]:
        """The labels of a categorical campaign; () for every other kind."""
        return self.kind.domain if isinstance(self.kind, Categorical) else ()

    @property
    def domain_size(self) -> int:
        return len(self.domain)

    @property
    def other_label(self) -> str | None:
        return self.kind.other_label if isinstance(self.kind, Categorical) else None

    @property
    def max_length(self) -> int | None:
        """The longest value (UTF-8 bytes) of a free-text campaign; None for the others."""
        return self.kind.max_length if isinstance(self.kind, OpenDomain | Discovery) else None

    @property
    def range(self) -> tuple[float, float] | None:
        """The [low, high] of a numeric campaign; None for the others."""
        return self.kind.range if isinstance(self.kind, Numeric) else None

    @property
    def open_domain(self) -> bool:
        """True for a campaign of free-text values (`max_length`, no domain list)."""
        return isinstance(self.kind, OpenDomain | Discovery)

    @property
    def numeric(self) -> bool:
        """True for a numeric campaign (a `range`, a numeric mechanism)."""
        return isinstance(self.kind, Numeric)

    @property
    def discovers(self) -> bool:
        """True for an open-domain campaign of oracle "pem": its reports discover heavy
        hitters with no candidate list (client/discovery/pem.py)."""
        return isinstance(self.kind, Discovery)

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
            horizon, changes = tree_defaults(
                self.window_seconds, self.horizon_windows, self.max_changes
            )
            return replace(self, horizon_windows=horizon, max_changes=changes).as_created()
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

    def build_mechanism(self, epsilon: float | None = None, level: str = "") -> Mechanism:
        """The mechanism this config describes, at `epsilon` (default: the config's), with
        `params` and the level's `level_params`, built by its kind; a memoization "tree"
        config's tree reports (client/tree_wire.py). Parameters derived from epsilon (OLH's
        g, SS's k, RAPPOR's f, THE's theta) are derived anew unless the config fixes them,
        which every config created since they are served does (`as_created`)."""
        epsilon = self.epsilon if epsilon is None else epsilon
        if self.memoization == MEMO_TREE:
            return TreeReports(replace(self.tree_shape(), epsilon=epsilon))
        params = {**self.params, **self.level_params.get(level, {})}
        return self.kind.build(self.oracle, epsilon, params)

    def tree_shape(self) -> TreeShape:
        """The public parameters of a memoization "tree" config's horizons (its horizon and
        change cap derived if unwritten; one tracked item for a domain of 2)."""
        horizon, changes = tree_defaults(
            self.window_seconds, self.horizon_windows, self.max_changes
        )
        items = 1 if self.domain_size == 2 else self.domain_size
        return TreeShape(horizon, changes, self.epsilon, items)

    def build_discovery(self, epsilon: float | None = None) -> PrefixExtendingMethod:
        """The Prefix Extending Method of a "pem" campaign (top_k, step_bits, sketch, k, m)."""
        assert isinstance(self.kind, Discovery)
        return self.kind.build(
            self.oracle, self.epsilon if epsilon is None else epsilon, self.params
        )

    def build_numeric(self, epsilon: float | None = None) -> NumericMechanism:
        """The numeric mechanism of a numeric campaign, at `epsilon` (default: the config's)."""
        if not isinstance(self.kind, Numeric):
            raise ParameterError("range", f"campaign {self.name!r} is not numeric")
        return self.kind.build(
            self.oracle, self.epsilon if epsilon is None else epsilon, self.params
        )

    def build_oracle(self, epsilon: float | None = None, level: str = "") -> FrequencyOracle:
        """The frequency oracle of a categorical campaign (`build_mechanism`)."""
        if not isinstance(self.kind, Categorical):
            builder = "build_open" if isinstance(self.kind, OpenDomain) else "build_mechanism"
            raise ParameterError("oracle", f"campaign {self.name!r} is {self.kind.tag} ({builder})")
        params = {**self.params, **self.level_params.get(level, {})}
        return self.kind.build(self.oracle, self.epsilon if epsilon is None else epsilon, params)

    def build_open(self, epsilon: float | None = None) -> OpenDomainMechanism:
        """The key mechanism of an open-domain campaign with candidates (no domain: a sketch
        or OLH over item keys, client/oracles/keys.py)."""
        if not isinstance(self.kind, OpenDomain):
            raise ParameterError("max_length", f"campaign {self.name!r} is {self.kind.tag}")
        return self.kind.build(
            self.oracle, self.epsilon if epsilon is None else epsilon, self.params
        )

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
        """`level_oracle`, or the mechanism of a kind without levels (numeric, discovery,
        breakdown, memoization "tree": `level` must be "")."""
        if not isinstance(self.kind, Categorical) or self.memoization == MEMO_TREE:
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


def _check_identity(data: dict[str, Any]) -> None:
    """The fields every campaign has are present, its name and oracle strings of the right
    form (a categorical campaign's `domain` is its kind's: Categorical.from_dict)."""
    for required in ("name", "oracle", "epsilon"):
        if required not in data:
            raise ParameterError(required, "is required")
    name = data["name"]
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ParameterError("name", "must match [a-z0-9][a-z0-9_-]{0,63}")
    if not isinstance(data["oracle"], str):
        raise ParameterError("oracle", "must be a string")


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


def _check_level_params(value: object, levels: Mapping[str, float]) -> dict[str, dict[str, Any]]:
    """level name -> object of oracle parameters, for declared levels only."""
    if not isinstance(value, dict) or not all(isinstance(p, dict) for p in value.values()):
        raise ParameterError("level_params", "must be an object of level name -> object")
    unknown = sorted(set(value) - set(levels))
    if unknown:
        raise ParameterError("level_params", f"{unknown[0]!r} is not a privacy level")
    return {level: dict(params) for level, params in value.items()}
