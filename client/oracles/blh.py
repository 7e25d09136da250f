"""Binary local hashing (Wang et al., USENIX Security 2017, Sec. 4.4): local hashing into
g = 2 buckets, so a report is a seed and one bit. Wire form: {"seed": int, "y": 0 or 1}."""

from __future__ import annotations

from collections.abc import Sequence

from ldptel.client.oracles.local_hashing import LocalHashing


class BinaryLocalHashing(LocalHashing):
    """BLH: p* = e^eps / (e^eps + 1), q* = 1/2."""

    name = "blh"

    def __init__(
        self,
        *,
        epsilon: float,
        domain_size: int,
        labels: Sequence[str] | None = None,
        p: float | None = None,
    ) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size, g=2, labels=labels, p=p)
