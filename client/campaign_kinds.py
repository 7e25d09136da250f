"""What a campaign measures: its kind, one tagged variant per mechanism family.

A campaign's identity and limits (name, epsilon, windows, levels, memoization) live on
`CampaignConfig`; what its values are and how they are randomized lives in one of these
frozen, keyword-only variants, each validated when built from untrusted JSON and able to
build its own mechanism. A new kind is one variant here, registered in `KINDS`, plus one
report builder (aggregator/reports/); no other kind changes (docs/architecture.md).

The canonical JSON is flat: a variant writes its own fields (`json_fields`) beside the
campaign's, and is recognized by them (`claims`), so every config keeps the id it had.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, TypeVar

import numpy as np

from ldptel.client.discovery.pem import PrefixExtendingMethod
from ldptel.client.errors import InvalidValueError, ParameterError, ValueTypeError
from ldptel.client.labels import check_domain, check_label
from ldptel.client.memoization import MEMO_NONE, NUMERIC_MEMO_REFUSED
from ldptel.client.multi.attributes import Attributes
from ldptel.client.multi.auto import choose_breakdown
from ldptel.client.multi.catalog import BREAKDOWNS
from ldptel.client.multi.wire import BreakdownReports
from ldptel.client.multi.wire_flat import breakdown_reports
from ldptel.client.numeric import NumericMechanism, choose_mechanism, numeric_class
from ldptel.client.numeric.auto import AUTO_NUMERIC
from ldptel.client.numeric.base import check_range
from ldptel.client.oracles import (
    FrequencyOracle,
    OpenDomainMechanism,
    open_domain_class,
    oracle_class,
)
from ldptel.client.oracles.auto import (
    OPEN_DOMAIN_ORACLES,
    AutoOracle,
    choose_open_oracle,
    choose_oracle,
)
from ldptel.client.oracles.base import check_int

if TYPE_CHECKING:  # typing.Self is Python 3.11+
    from typing_extensions import Self

#: Open-domain campaigns: the largest max_length (UTF-8 bytes). The report carries only a
#: hash, so the length costs nothing on the wire; it bounds what candidates need to cover.
MAX_OPEN_LENGTH = 4096
Built = TypeVar("Built")
#: Breakdowns randomize every report afresh: no memoization mode is built for them yet.
BREAKDOWN_MEMO_REFUSED = 'a breakdown campaign randomizes every report afresh (memoization "none")'


@dataclass(frozen=True)
class Resolved:
    """A config's oracle as created: its name ("auto" resolved once, so that a campaign's
    reports never change meaning when a later version would choose differently), its
    params, and the choice with the numbers behind it (None unless chosen by "auto")."""

    oracle: str
    params: dict[str, Any]
    choice: dict[str, Any] | None = None


def _named(name: str, params: dict[str, Any], choice: object, key: str, what: str) -> Resolved:
    """A config naming its oracle (not "auto"): its stored choice is None or a choice of it."""
    if choice is None:
        return Resolved(name, params)
    if not isinstance(choice, dict) or choice.get(key) != name:
        raise ParameterError("oracle_choice", f"must be null or a choice of {what}{name!r}")
    return Resolved(name, params, choice)


@dataclass(frozen=True, kw_only=True)
class Categorical:
    """Values from a list of labels (`domain`), reported by a frequency oracle; values
    outside it are reported as `other_label` if the campaign has one, else refused."""

    tag: ClassVar[str] = "categorical"
    #: Why memoization "exact_discloses_changes" is refused for the kind (None: allowed).
    exact_refused: ClassVar[str | None] = None
    domain: tuple[str, ...]
    other_label: str | None = None

    @classmethod
    def claims(cls, data: Mapping[str, Any]) -> bool:
        return True  # the kind of a campaign that declares no other (KINDS: the last)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, stored: bool) -> Categorical:
        if "domain" not in data:
            extra = "(or max_length for free text, or range for numbers)"
            raise ParameterError("domain", f"is required {extra}")
        domain = tuple(check_domain(data["domain"], stored=stored))
        other = data.get("other_label")
        if other is not None and other not in domain:
            raise ParameterError("other_label", "must be null or a label of the domain")
        return cls(domain=domain, other_label=other)

    def json_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"domain": list(self.domain)}
        if self.other_label is not None:  # absent when unset: older configs keep their ids
            fields["other_label"] = self.other_label
        return fields

    def resolve(
        self, oracle: str, epsilon: float, params: dict[str, Any], choice: object
    ) -> Resolved:
        name = oracle_class(oracle).name
        if name != AutoOracle.name:
            return _named(name, params, choice, "oracle", "oracle ")
        made = choose_oracle(len(self.domain), epsilon, _auto_limit(params, choice))
        return Resolved(made["oracle"], dict(made["params"]), made)

    def build(self, oracle: str, epsilon: float, params: Mapping[str, Any]) -> FrequencyOracle:
        cls = oracle_class(oracle)
        labels: dict[str, Any] = {"labels": list(self.domain)} if cls.takes_labels else {}
        return _construct(cls, epsilon=epsilon, domain_size=len(self.domain), **params, **labels)


@dataclass(frozen=True, kw_only=True)
class _FreeText:
    """What the two free-text kinds share: values of at most `max_length` UTF-8 bytes (NFC),
    and no domain, other label or levels."""

    exact_refused: ClassVar[str | None] = None
    max_length: int

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, stored: bool) -> Self:
        return cls(max_length=_check_open_domain(data))

    def json_fields(self) -> dict[str, Any]:
        return {"max_length": self.max_length}


@dataclass(frozen=True, kw_only=True)
class OpenDomain(_FreeText):
    """Free text reported as an item key by a key mechanism (OPEN_DOMAIN_ORACLES; no domain);
    a report estimates candidate strings."""

    tag: ClassVar[str] = "open_domain"

    @classmethod
    def claims(cls, data: Mapping[str, Any]) -> bool:
        return "max_length" in data and data.get("oracle") != PrefixExtendingMethod.name

    def resolve(
        self, oracle: str, epsilon: float, params: dict[str, Any], choice: object
    ) -> Resolved:
        name = oracle_class(oracle).name
        if name != AutoOracle.name:
            return _named(name, params, choice, "oracle", "oracle ")
        made = choose_open_oracle(epsilon, _auto_limit(params, choice))
        return Resolved(made["oracle"], dict(made["params"]), made)

    def build(self, oracle: str, epsilon: float, params: Mapping[str, Any]) -> OpenDomainMechanism:
        """The key mechanism (client/oracles/keys.py): no domain, candidates by item key."""
        return _construct(open_domain_class(oracle), epsilon=epsilon, **params)


@dataclass(frozen=True, kw_only=True)
class Discovery(_FreeText):
    """Free text whose heavy hitters are discovered with no candidate list: the Prefix
    Extending Method (oracle "pem", client/discovery/pem.py) over `max_length`."""

    tag: ClassVar[str] = "discovery"

    @classmethod
    def claims(cls, data: Mapping[str, Any]) -> bool:
        return "max_length" in data and data.get("oracle") == PrefixExtendingMethod.name

    def resolve(
        self, oracle: str, epsilon: float, params: dict[str, Any], choice: object
    ) -> Resolved:
        if choice is not None:
            raise ParameterError("oracle_choice", "must be null for oracle 'pem'")
        return Resolved(PrefixExtendingMethod.name, params)

    def build(
        self, oracle: str, epsilon: float, params: Mapping[str, Any]
    ) -> PrefixExtendingMethod:
        return _construct(
            PrefixExtendingMethod, epsilon=epsilon, max_length=self.max_length, **params
        )


@dataclass(frozen=True, kw_only=True)
class Numeric:
    """Numbers in [low, high] (`range`), reported by a numeric mechanism (client/numeric/)."""

    tag: ClassVar[str] = "numeric"
    exact_refused: ClassVar[str | None] = NUMERIC_MEMO_REFUSED
    range: tuple[float, float]

    @classmethod
    def claims(cls, data: Mapping[str, Any]) -> bool:
        return "range" in data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, stored: bool) -> Numeric:
        return cls(range=_check_numeric(data))

    def json_fields(self) -> dict[str, Any]:
        return {"range": list(self.range)}

    def resolve(
        self, oracle: str, epsilon: float, params: dict[str, Any], choice: object
    ) -> Resolved:
        name = numeric_class(oracle).name
        if name != AUTO_NUMERIC.name:
            return _named(name, params, choice, "mechanism", "")
        if choice is not None:
            raise ParameterError("oracle_choice", "is written when oracle 'auto' is resolved")
        if params:
            raise ParameterError("params", "oracle 'auto' for a numeric campaign takes none")
        chosen = choose_mechanism(epsilon, *self.range)
        # As JSON reads it back (lists, not tuples), so the created config equals the stored.
        return Resolved(chosen.mechanism, {}, json.loads(json.dumps(chosen.to_dict())))

    def build(self, oracle: str, epsilon: float, params: Mapping[str, Any]) -> NumericMechanism:
        low, high = self.range
        mechanism = _construct(numeric_class(oracle), epsilon=epsilon, low=low, high=high, **params)
        # Created, loaded by a client or by the aggregator: the integers it serves must give
        # at most the config's epsilon, or nobody reports or counts under it.
        mechanism.check_guarantee(params)
        return mechanism


@dataclass(frozen=True, kw_only=True)
class Breakdown:
    """Several categorical attributes, one report per user covering all of them under the
    campaign's epsilon (`"attributes": {"os": [...], "plan": [...]}`, 2 to 8, in name order;
    client/multi/, docs/breakdowns.md), reported by a breakdown mechanism ("joint", "pairs",
    "split", "hadamard" or "auto")."""

    tag: ClassVar[str] = "breakdown"
    exact_refused: ClassVar[str | None] = BREAKDOWN_MEMO_REFUSED
    attributes: Attributes

    @classmethod
    def claims(cls, data: Mapping[str, Any]) -> bool:
        return "attributes" in data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, stored: bool) -> Breakdown:
        for absent in ("domain", "other_label", "levels", "level_params", "max_length", "range"):
            if absent in data:
                raise ParameterError(absent, "a breakdown campaign (attributes) has none")
        if data.get("memoization", MEMO_NONE) != MEMO_NONE:
            raise ParameterError("memoization", BREAKDOWN_MEMO_REFUSED)
        declared = data["attributes"]
        # In name order: the canonical JSON sorts an object's keys, and the joint index and
        # the pair numbers follow the attributes' order, so every reader must see one order.
        ordered = dict(sorted(declared.items())) if isinstance(declared, dict) else declared
        attributes = Attributes.from_config(ordered)
        if not stored:  # the label rules, as for a categorical domain
            for name, labels in zip(attributes.names, attributes.labels, strict=True):
                for i, label in enumerate(labels):
                    check_label(label, f"attributes.{name}", f"label {i}")
        return cls(attributes=attributes)

    def json_fields(self) -> dict[str, Any]:
        names, labels = self.attributes.names, self.attributes.labels
        return {"attributes": {name: list(own) for name, own in zip(names, labels, strict=True)}}

    def resolve(
        self, oracle: str, epsilon: float, params: dict[str, Any], choice: object
    ) -> Resolved:
        if set(params) - {"inner"}:
            unknown = sorted(set(params) - {"inner"})[0]
            raise ParameterError("params", f"a breakdown takes only inner (served), not {unknown}")
        if oracle in BREAKDOWNS:
            return _named(oracle, params, choice, "mechanism", "")
        if oracle != AutoOracle.name:
            known = ", ".join([*BREAKDOWNS, AutoOracle.name])
            raise ParameterError("oracle", f"a breakdown campaign takes {known}, not {oracle!r}")
        if choice is not None or params:
            raise ParameterError("oracle_choice", "is written when oracle 'auto' is resolved")
        _, made = choose_breakdown(epsilon, self.attributes)
        written = {"mechanism": made.mechanism, "reason": made.reason, "variances": made.variances}
        return Resolved(made.mechanism, {}, written)

    def build(self, oracle: str, epsilon: float, params: Mapping[str, Any]) -> BreakdownReports:
        inner = params.get("inner")  # served by a created config (derived_params)
        cls = BREAKDOWNS[oracle]
        return breakdown_reports(cls(epsilon=epsilon, attributes=self.attributes, inner=inner))

    def row_index(self, value: object) -> int:
        """A user's value {"os": "ios", "plan": "pro", ...} as its row's index in the joint
        domain; InvalidValueError naming the attribute that is missing, unknown or not one of
        its labels (ValueTypeError for a value that is not such an object)."""
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            kind = type(value).__name__
            raise ValueTypeError("value", f"must be an object of attribute -> label, got {kind}")
        try:
            row = self.attributes.row_of(value)
        except ParameterError as error:
            raise InvalidValueError(f"value.{error.field}", error.reason) from None
        return int(self.attributes.joint_index(np.array([row]))[0])


#: Every campaign kind; the first whose `claims` accepts an untrusted config is its kind.
CampaignKind: TypeAlias = Categorical | OpenDomain | Discovery | Numeric | Breakdown
KINDS: tuple[type[CampaignKind], ...] = (Breakdown, Numeric, Discovery, OpenDomain, Categorical)


def kind_of(data: Mapping[str, Any]) -> type[CampaignKind]:
    """The kind an untrusted config declares (by its fields); refuses two at once."""
    if "max_length" in data and "range" in data:
        raise ParameterError("range", "a campaign has max_length or range, not both")
    return next(kind for kind in KINDS if kind.claims(data))


def _construct(cls: Callable[..., Built], **arguments: Any) -> Built:
    """cls(**arguments): an unexpected keyword in a config's params is a ParameterError."""
    try:
        return cls(**arguments)
    except TypeError as error:
        raise ParameterError("params", str(error)) from error


def _auto_limit(params: Mapping[str, Any], choice: object) -> Any:
    """Oracle "auto"'s only parameter (max_report_bytes), for a config not yet resolved."""
    if choice is not None:
        raise ParameterError("oracle_choice", "is written when oracle 'auto' is resolved")
    unknown = sorted(set(params) - {"max_report_bytes"})
    if unknown:
        raise ParameterError(
            "params", f"oracle 'auto' takes only max_report_bytes, not {unknown[0]}"
        )
    return params.get("max_report_bytes")  # checked by the choice


def _check_open_domain(data: Mapping[str, Any]) -> int:
    """max_length of an open-domain config, which has no domain, other_label or levels."""
    for absent in ("domain", "other_label", "levels"):
        if absent in data:
            raise ParameterError(absent, "an open-domain campaign (max_length) has none")
    allowed = (*OPEN_DOMAIN_ORACLES, PrefixExtendingMethod.name, AutoOracle.name)
    if data["oracle"] not in allowed:
        names = ", ".join(allowed)
        raise ParameterError(
            "oracle", f"an open-domain campaign takes {names}, not {data['oracle']!r}"
        )
    return check_int(data["max_length"], "max_length", 1, MAX_OPEN_LENGTH)


def _check_numeric(data: Mapping[str, Any]) -> tuple[float, float]:
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
