"""Adapters that drive the peers' frequency oracles through their public APIs.

pure-ldp (Maddock) and multi-freq-ldpy (Arcolezi) perturb one value per call and aggregate
Python lists of reports. Each adapter exposes the same three steps the harness times:
`perturb(values) -> reports` (their per-user client, called once per value, as their docs
do), `aggregate(reports) -> estimated counts` (their server / aggregator, public output
only), and `resident_input(reports)`: the report bytes their API needs in memory at once.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

PURE_LDP = "pure-ldp"
MULTI_FREQ = "multi-freq-ldpy"


def _identity(x: int) -> int:
    # pure-ldp maps items with `x - 1` by default (1-based); our items are 0-based.
    return x


def deep_sizeof(obj: Any) -> int:
    """Bytes held by a report (or a list of reports): containers plus their numbers/arrays."""
    if isinstance(obj, np.ndarray):
        return int(sys.getsizeof(obj)) + (0 if obj.flags.owndata else int(obj.nbytes))
    if isinstance(obj, (list, tuple)):
        return int(sys.getsizeof(obj)) + sum(deep_sizeof(x) for x in obj)
    return int(sys.getsizeof(obj))


def seed_peers(seed: int) -> None:
    """Seed every random source the peers draw from (Python, numpy, numba's own state)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    _seed_numba(seed % 2**32)


def _seed_numba(seed: int) -> None:
    from numba import njit

    @njit  # type: ignore[misc]
    def seed_jit(s: int) -> None:
        np.random.seed(s)

    seed_jit(seed)


class PeerOracle:
    """One peer implementation of one of our oracles at (epsilon, d)."""

    library: ClassVar[str]
    oracle: ClassVar[str]  # our protocol name
    #: True if the aggregator consumes one report at a time (no need to hold all of them).
    streaming: ClassVar[bool]
    #: True if the public output is clipped at 0 and renormalized (biased on purpose).
    clips: ClassVar[bool] = False

    def __init__(self, epsilon: float, d: int) -> None:
        self.epsilon = epsilon
        self.d = d

    def perturb(self, values: Sequence[int]) -> list[Any]:
        raise NotImplementedError

    def aggregate(self, reports: list[Any]) -> NDArray[np.float64]:
        raise NotImplementedError

    def pq(self) -> tuple[float, float] | None:
        """(p*, q*): the chance a report supports its true item / any other item."""
        return None

    def theory_variance(self, n: int, f: NDArray[np.float64]) -> NDArray[np.float64] | None:
        """Exact per-item variance of the (unclipped) estimate under this peer's own
        parameters (Wang et al. 2017, eq. 2), or None if not known."""
        pq = self.pq()
        if pq is None:
            return None
        p, q = pq
        return n * q * (1 - q) / (p - q) ** 2 + n * f * (1 - p - q) / (p - q)

    def resident_input(self, reports: list[Any]) -> int:
        """Bytes of input the aggregator must hold at once (one report if it streams)."""
        return deep_sizeof(reports[0]) if self.streaming else deep_sizeof(reports)


# -- pure-ldp: client/server objects; server.aggregate(report) streams -----------------------
class _PureLdp(PeerOracle):
    library = PURE_LDP
    streaming = True

    def __init__(self, epsilon: float, d: int) -> None:
        super().__init__(epsilon, d)
        self.client = self.make_client()

    def make_client(self) -> Any:
        raise NotImplementedError

    def make_server(self) -> Any:
        raise NotImplementedError

    def perturb(self, values: Sequence[int]) -> list[Any]:
        privatise = self.client.privatise
        return [privatise(v) for v in values]

    def aggregate(self, reports: list[Any]) -> NDArray[np.float64]:
        server = self.make_server()
        server.aggregate_all(reports)
        return np.asarray(server.estimate_all(range(self.d), suppress_warnings=True), float)


class _DirectEncoding(PeerOracle):
    def pq(self) -> tuple[float, float]:
        e = math.exp(self.epsilon)
        return e / (e + self.d - 1), 1 / (e + self.d - 1)


class _UnaryEncoding(PeerOracle):
    oue = False

    def pq(self) -> tuple[float, float]:
        if self.oue:
            return 0.5, 1 / (math.exp(self.epsilon) + 1)
        half = math.exp(self.epsilon / 2)
        return half / (half + 1), 1 / (half + 1)


class _SummedHistogram(PeerOracle):
    def theory_variance(self, n: int, f: NDArray[np.float64]) -> NDArray[np.float64]:
        # Each report adds Laplace(2/eps) noise to every item: variance 2 (2/eps)^2 each.
        return np.full(self.d, n * 8 / self.epsilon**2)


class _LocalHashing(PeerOracle):
    olh = False

    def g(self) -> int:
        return round(math.exp(self.epsilon)) + 1 if self.olh else 2

    def pq(self) -> tuple[float, float]:
        e, g = math.exp(self.epsilon), self.g()
        return e / (e + g - 1), 1 / g


def the_pq(epsilon: float, theta: float) -> tuple[float, float]:
    """THE's support probabilities for threshold theta (Wang et al. 2017, Sec. 4.3)."""
    return 1 - 0.5 * math.exp(epsilon / 2 * (theta - 1)), 0.5 * math.exp(-epsilon * theta / 2)


class PureDE(_PureLdp, _DirectEncoding):
    oracle = "de"

    def make_client(self) -> Any:
        from pure_ldp.frequency_oracles.direct_encoding import DEClient

        return DEClient(self.epsilon, self.d, index_mapper=_identity)

    def make_server(self) -> Any:
        from pure_ldp.frequency_oracles.direct_encoding import DEServer

        return DEServer(self.epsilon, self.d, index_mapper=_identity)


class PureSUE(_PureLdp, _UnaryEncoding):
    oracle = "sue"

    def make_client(self) -> Any:
        from pure_ldp.frequency_oracles.unary_encoding import UEClient

        return UEClient(self.epsilon, self.d, use_oue=self.oue, index_mapper=_identity)

    def make_server(self) -> Any:
        from pure_ldp.frequency_oracles.unary_encoding import UEServer

        return UEServer(self.epsilon, self.d, use_oue=self.oue, index_mapper=_identity)


class PureOUE(PureSUE):
    oracle = "oue"
    oue = True


class PureSHE(_PureLdp, _SummedHistogram):
    oracle = "she"
    the = False

    def make_client(self) -> Any:
        from pure_ldp.frequency_oracles.histogram_encoding import HEClient

        return HEClient(self.epsilon, self.d, index_mapper=_identity)

    def make_server(self) -> Any:
        from pure_ldp.frequency_oracles.histogram_encoding import HEServer

        return HEServer(self.epsilon, self.d, use_the=self.the, index_mapper=_identity)

    def aggregate(self, reports: list[Any]) -> NDArray[np.float64]:
        # THE's server thresholds the reports in place: hand it copies one at a time (a
        # generator), so the caller's reports stay intact and no second list is held.
        return super().aggregate((r.copy() for r in reports) if self.the else reports)  # type: ignore[arg-type]


class PureTHE(PureSHE):
    oracle = "the"
    the = True

    def theory_variance(self, n: int, f: NDArray[np.float64]) -> NDArray[np.float64] | None:
        return PeerOracle.theory_variance(self, n, f)

    def pq(self) -> tuple[float, float]:
        return the_pq(self.epsilon, self.make_server().theta)


class PureBLH(_PureLdp, _LocalHashing):
    oracle = "blh"

    def make_client(self) -> Any:
        from pure_ldp.frequency_oracles.local_hashing import LHClient

        return LHClient(self.epsilon, self.d, g=2, use_olh=self.olh, index_mapper=_identity)

    def make_server(self) -> Any:
        from pure_ldp.frequency_oracles.local_hashing import LHServer

        return LHServer(self.epsilon, self.d, g=2, use_olh=self.olh, index_mapper=_identity)


class PureOLH(PureBLH):
    oracle = "olh"
    olh = True


class PureHR(_PureLdp):
    """Hadamard response (Acharya, Sun, Zhang 2019); the server keeps every report."""

    oracle = "hr"
    streaming = False

    def __init__(self, epsilon: float, d: int) -> None:
        from pure_ldp.frequency_oracles.hadamard_response import HadamardResponseServer

        # The client needs the server's random permutation (epsilon > 1).
        self._server_proto = HadamardResponseServer(epsilon, d, index_mapper=_identity)
        super().__init__(epsilon, d)

    def make_client(self) -> Any:
        from pure_ldp.frequency_oracles.hadamard_response import HadamardResponseClient

        return HadamardResponseClient(
            self.epsilon, self.d, self._server_proto.get_hash_funcs(), index_mapper=_identity
        )

    def make_server(self) -> Any:
        server = self._server_proto
        server.reset()
        return server


# -- multi-freq-ldpy: numba clients per value; aggregators take the whole list --------------
class _MultiFreq(PeerOracle):
    library = MULTI_FREQ
    streaming = False
    clips = True
    client: Callable[..., Any]

    def perturb(self, values: Sequence[int]) -> list[Any]:
        client, d, eps, kw = self.client_fn(), self.d, self.epsilon, self.client_kwargs()
        return [client(int(v), d, eps, **kw) for v in values]

    def client_fn(self) -> Callable[..., Any]:
        raise NotImplementedError

    def client_kwargs(self) -> dict[str, Any]:
        return {}

    def aggregate(self, reports: list[Any]) -> NDArray[np.float64]:
        # Their public output is a normalized histogram; scale back to counts.
        return np.asarray(self.normalized(reports), float) * len(reports)

    def normalized(self, reports: list[Any]) -> Any:
        raise NotImplementedError


class MultiDE(_MultiFreq, _DirectEncoding):
    oracle = "de"

    def client_fn(self) -> Callable[..., Any]:
        from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Client

        return GRR_Client  # type: ignore[no-any-return]

    def normalized(self, reports: list[Any]) -> Any:
        from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_MI

        return GRR_Aggregator_MI(reports, self.d, self.epsilon)


class MultiSUE(_MultiFreq, _UnaryEncoding):
    oracle = "sue"

    def client_fn(self) -> Callable[..., Any]:
        from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Client

        return UE_Client  # type: ignore[no-any-return]

    def client_kwargs(self) -> dict[str, Any]:
        return {"optimal": self.oue}

    def normalized(self, reports: list[Any]) -> Any:
        from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Aggregator_MI

        return UE_Aggregator_MI(reports, self.epsilon, optimal=self.oue)


class MultiOUE(MultiSUE):
    oracle = "oue"
    oue = True


class MultiSHE(_MultiFreq, _SummedHistogram):
    oracle = "she"
    thresh = False

    def client_fn(self) -> Callable[..., Any]:
        from multi_freq_ldpy.pure_frequency_oracles.HE import HE_Client

        return HE_Client  # type: ignore[no-any-return]

    def normalized(self, reports: list[Any]) -> Any:
        from multi_freq_ldpy.pure_frequency_oracles.HE import HE_Aggregator_MI

        return HE_Aggregator_MI(reports, self.d, self.epsilon, use_thresh=self.thresh)


class MultiTHE(MultiSHE):
    oracle = "the"
    thresh = True

    def theory_variance(self, n: int, f: NDArray[np.float64]) -> NDArray[np.float64] | None:
        return PeerOracle.theory_variance(self, n, f)

    def pq(self) -> tuple[float, float]:
        from multi_freq_ldpy.pure_frequency_oracles.HE import find_tresh
        from scipy.optimize import minimize_scalar

        # The threshold their aggregator picks (HE_Aggregator_MI).
        best = minimize_scalar(find_tresh, bounds=[0.5, 1], method="bounded", args=(self.epsilon))
        return the_pq(self.epsilon, float(best.x))


class MultiBLH(_MultiFreq, _LocalHashing):
    oracle = "blh"

    def client_fn(self) -> Callable[..., Any]:
        from multi_freq_ldpy.pure_frequency_oracles.LH import LH_Client

        return LH_Client  # type: ignore[no-any-return]

    def client_kwargs(self) -> dict[str, Any]:
        return {"optimal": self.olh}

    def normalized(self, reports: list[Any]) -> Any:
        from multi_freq_ldpy.pure_frequency_oracles.LH import LH_Aggregator_MI

        return LH_Aggregator_MI(reports, self.d, self.epsilon, optimal=self.olh)


class MultiOLH(MultiBLH):
    oracle = "olh"
    olh = True


class MultiSS(_MultiFreq):
    oracle = "ss"

    def client_fn(self) -> Callable[..., Any]:
        from multi_freq_ldpy.pure_frequency_oracles.SS import SS_Client

        return SS_Client  # type: ignore[no-any-return]

    def normalized(self, reports: list[Any]) -> Any:
        from multi_freq_ldpy.pure_frequency_oracles.SS import SS_Aggregator_MI

        return SS_Aggregator_MI(reports, self.d, self.epsilon)

    def pq(self) -> tuple[float, float]:
        # Their subset size and probabilities (SS_Aggregator_MI).
        e, d = math.exp(self.epsilon), self.d
        k = int(max(1, np.rint(d / (e + 1))))
        p = k * e / (k * e + d - k)
        q = ((k - 1) * k * e + (d - k) * k) / ((d - 1) * (k * e + d - k))
        return p, q


_ALL: tuple[type[PeerOracle], ...] = (
    PureDE, PureSUE, PureOUE, PureSHE, PureTHE, PureBLH, PureOLH, PureHR,
    MultiDE, MultiSUE, MultiOUE, MultiSHE, MultiTHE, MultiBLH, MultiOLH, MultiSS,
)  # fmt: skip

#: Our oracle name -> the peer implementations of the same protocol.
PEERS: dict[str, list[type[PeerOracle]]] = {}
for _cls in _ALL:
    PEERS.setdefault(_cls.oracle, []).append(_cls)
