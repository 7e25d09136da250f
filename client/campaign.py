"""Campaign configs: what is collected, with which oracle and epsilon, and in which windows.

A config is immutable; its id is a hash of its canonical JSON, so changing any parameter
(epsilon above all) makes a new config id. Clients stamp every batch with it, the collector
rejects unknown ids and the aggregator never mixes two configs in one estimate.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ldptel.client.errors import InvalidLevelError, ParameterError
from ldptel.client.levels import check_levels, check_strategy, reporting_epsilon
from ldptel.client.oracles import FrequencyOracle, oracle_class
from ldptel.client.oracles.auto import AutoOracle, choose_oracle
from ldptel.client.oracles.base import check_epsilon, check_int

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
DAY = 86_400
#: Memoization modes (ldptel.client.memo, docs/client.md "Longitudinal privacy"): "none", the
#: default, randomizes every report afresh (a guarantee for arbitrary value histories);
#: "exact_discloses_changes" resends a value's first report, and its promise is weaker: it holds
#: only between histories with the same change pattern, which the reports disclose.
MEMO_NONE = "none"
MEMO_EXACT = "exact_discloses_changes"
MEMOIZATION_MODES = (MEMO_NONE, MEMO_EXACT)


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
    #: A domain label that clients report for values outside the domain (None = reject them).
    other_label: str | None = None
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

    @classmethod
    def from_dict(cls, data: object) -> CampaignConfig:
        """Validate an untrusted JSON object; raises ParameterError naming the field."""
        if not isinstance(data, dict):
            raise ParameterError("config", "must be a JSON object")
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ParameterError(unknown[0], "unknown field")
        for required in ("name", "oracle", "epsilon", "domain"):
            if required not in data:
                raise ParameterError(required, "is required")
        name = data["name"]
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            raise ParameterError("name", "must match [a-z0-9][a-z0-9_-]{0,63}")
        if not isinstance(data["oracle"], str):
            raise ParameterError("oracle", "must be a string")
        domain = data["domain"]
        if not isinstance(domain, list) or not all(isinstance(v, str) for v in domain):
            raise ParameterError("domain", "must be a list of strings")
        if len(set(domain)) != len(domain):
            raise ParameterError("domain", "values must be distinct")
        params = data.get("params", {})
        if not isinstance(params, dict):
            raise ParameterError("params", "must be an object")
        lifetime = data.get("lifetime_epsilon")
        epsilon = check_epsilon(data["epsilon"])
        oracle, params, choice = _resolve_oracle(data, len(domain), epsilon, params)
        levels = check_levels(data.get("levels", {}))
        if levels and max(levels.values()) > epsilon:
            raise ParameterError("levels", f"level epsilons must be <= epsilon ({epsilon:g})")
        strategy, threshold = check_strategy(
            data.get("level_strategy", "optimal"), data.get("level_threshold"), levels
        )
        memoization = data.get("memoization", MEMO_NONE)
        if memoization not in MEMOIZATION_MODES:
            raise ParameterError("memoization", f"must be one of {', '.join(MEMOIZATION_MODES)}")
        other = data.get("other_label")
        if other is not None and other not in domain:
            raise ParameterError("other_label", "must be null or a label of the domain")
        config = cls(
            name=name,
            oracle=oracle,
            epsilon=epsilon,
            domain=tuple(domain),
            params=dict(params),
            window_seconds=check_int(data.get("window_seconds", DAY), "window_seconds", 60),
            shards=check_int(data.get("shards", 1), "shards", 1, 1024),
            retention_seconds=check_int(
                data.get("retention_seconds", 7 * DAY), "retention_seconds", 0
            ),
            reports_per_window=check_int(
                data.get("reports_per_window", 1), "reports_per_window", 1, 1_000_000
            ),
            lifetime_epsilon=None
            if lifetime is None
            else check_epsilon(lifetime, "lifetime_epsilon"),
            other_label=other,
            levels=levels,
            level_strategy=strategy,
            level_threshold=threshold,
            oracle_choice=choice,
            memoization=memoization,
        )
        config.build_oracle()  # the oracle validates its own parameters
        for level in levels:  # and at each level's epsilon (e.g. a fixed OLH g too small)
            config.level_oracle(level)
        return config

    def to_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict: it deep-copies every label of the domain one by one (30 ms
        # at d = 4096, on every config load); only the mutable nested values need copies.
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["domain"] = list(self.domain)
        data["params"] = copy.deepcopy(dict(self.params))
        if self.oracle_choice is not None:
            data["oracle_choice"] = copy.deepcopy(dict(self.oracle_choice))
        if self.other_label is None:
            del data["other_label"]  # absent when unset: older configs keep their ids
        if self.oracle_choice is None:
            del data["oracle_choice"]  # absent unless chosen by auto: older configs keep ids
        if self.memoization == MEMO_NONE:
            del data["memoization"]  # absent when the default: older configs keep their ids
        data["levels"] = dict(self.levels)
        if not self.levels:  # absent, so that configs from before levels keep their ids
            for key in ("levels", "level_strategy", "level_threshold"):
                del data[key]
        return data

    def canonical_json(self) -> str:
        """Sorted keys, no spaces, UTF-8: the bytes the config id hashes."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @cached_property
    def config_id(self) -> str:
        """First 16 hex digits of SHA-256 of the canonical JSON (computed once: the config
        is immutable)."""
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()[:16]

    @property
    def domain_size(self) -> int:
        return len(self.domain)

    def with_fixed_params(self) -> CampaignConfig:
        """This config with its oracle's fixed parameters written into `params` (see
        FrequencyOracle.fixed_params): the form a campaign is created in."""
        return replace(self, params={**self.build_oracle().fixed_params(), **self.params})

    def build_oracle(self, epsilon: float | None = None) -> FrequencyOracle:
        """The oracle this config describes, at `epsilon` (default: the config's). Parameters
        derived from epsilon (OLH's g, SS's k) are derived anew unless params fix them."""
        cls = oracle_class(self.oracle)
        extra: dict[str, Any] = {"labels": list(self.domain)} if cls.takes_labels else {}
        epsilon = self.epsilon if epsilon is None else epsilon
        try:
            return cls(epsilon=epsilon, domain_size=self.domain_size, **self.params, **extra)
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

    def level_oracle(self, level: str = "") -> FrequencyOracle | None:
        """The oracle a level's reports are randomized with (None: the level does not
        report); the same oracle name and params as the config, at the level's epsilon."""
        epsilon = self.reporting_epsilon(level)
        return None if epsilon is None else self.build_oracle(epsilon)

    def window_of(self, timestamp: float) -> int:
        """Start (unix seconds) of the window that contains `timestamp`."""
        return math.floor(timestamp / self.window_seconds) * self.window_seconds


def _resolve_oracle(
    data: dict[str, Any], domain_size: int, epsilon: float, params: dict[str, Any]
) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """(oracle name, params, oracle_choice) of an untrusted config. "auto" is resolved here,
    once: the config stores the chosen oracle, so its reports never change meaning when a
    later version would choose differently, and every privacy level uses the same oracle."""
    name = oracle_class(data["oracle"]).name
    choice = data.get("oracle_choice")
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
    choice = choose_oracle(domain_size, epsilon, params.get("max_report_bytes"))
    return choice["oracle"], dict(choice["params"]), choice
