"""Symmetric unary encoding, i.e. basic one-time RAPPOR (Wang et al., USENIX Security 2017,
Sec. 4.2; Erlingsson et al., CCS 2014, without the Bloom filter and the instantaneous step).

Wire form: {"bits": base64 of the d packed bits} (docs/protocol.md, "Bit vectors").
"""

from __future__ import annotations

import math

from ldptel.client.oracles.unary import UnaryEncoding


class SymmetricUnaryEncoding(UnaryEncoding):
    """SUE: the true bit is reported as 1 with p = e^(eps/2) / (e^(eps/2) + 1), every other
    bit with q = 1 - p (each bit is randomized response with eps/2)."""

    name = "sue"

    @staticmethod
    def probabilities(epsilon: float) -> tuple[float, float]:
        # Wang et al. 2017, eq. (9); written with e^(-eps/2) so a large eps cannot overflow.
        shrink = math.exp(-epsilon / 2)
        return 1 / (1 + shrink), shrink / (1 + shrink)
