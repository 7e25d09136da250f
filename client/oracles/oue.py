"""Optimized unary encoding (Wang et al., USENIX Security 2017, Sec. 4.3).

Wire form: {"bits": base64 of the d packed bits} (docs/protocol.md, "Bit vectors").
"""

from __future__ import annotations

import math

from ldptel.client.oracles.unary import UnaryEncoding


class OptimizedUnaryEncoding(UnaryEncoding):
    """OUE: the true bit is reported as 1 with p = 1/2, every other bit with
    q = 1 / (e^eps + 1)."""

    name = "oue"

    @staticmethod
    def probabilities(epsilon: float) -> tuple[float, float]:
        # Wang et al. 2017, eq. (11): p = 1/2 and q = 1/(e^eps + 1) minimize the variance;
        # q is written with e^(-eps) so a large eps cannot overflow.
        shrink = math.exp(-epsilon)
        return 0.5, shrink / (1 + shrink)
