"""Campaign configs: what is collected, with which oracle and epsilon, and in which windows.

A config is immutable; its id is a hash of its canonical JSON, so changing any parameter
(epsilon above all) makes a new config id. Clients stamp every batch with it, the collector
rejects unknown ids and the aggregator never mixes two configs in one estimate.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ldptel.client.errors import ParameterError
from ldptel.client.oracles import FrequencyOracle, oracle_class
from ldptel.client.oracles.base import check_epsilon, check_int

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
DAY = 86_400


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
    #: Client-side ledger: reports per window, and the lifetime epsilon budget (None = no cap).
    reports_per_window: int = 1
    lifetime_epsilon: float | None = None

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
        config = cls(
            name=name,
            oracle=oracle_class(data["oracle"]).name,
            epsilon=check_epsilon(data["epsilon"]),
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
        )
        config.build_oracle()  # the oracle validates its own parameters
        return config

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["domain"] = list(self.domain)
        data["params"] = dict(self.params)
        return data

    def canonical_json(self) -> str:
        """Sorted keys, no spaces, UTF-8: the bytes the config id hashes."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @property
    def config_id(self) -> str:
        """First 16 hex digits of SHA-256 of the canonical JSON."""
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()[:16]

    @property
    def domain_size(self) -> int:
        return len(self.domain)

    def build_oracle(self) -> FrequencyOracle:
        """The oracle this config describes."""
        cls = oracle_class(self.oracle)
        extra: dict[str, Any] = {"labels": list(self.domain)} if cls.takes_labels else {}
        try:
            return cls(epsilon=self.epsilon, domain_size=self.domain_size, **self.params, **extra)
        except TypeError as error:  # an unexpected keyword in params
            raise ParameterError("params", str(error)) from error

    def window_of(self, timestamp: float) -> int:
        """Start (unix seconds) of the window that contains `timestamp`."""
        return int(math.floor(timestamp / self.window_seconds)) * self.window_seconds
