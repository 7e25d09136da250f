"""The central guarantee a report enjoys when the collector strips who sent what (shuffling).

Feldman, McMillan, Talwar, "Hiding Among the Clones", FOCS 2021, Theorem 3.1: if n users each
send one report from the same eps0-LDP randomizer and the analyst sees only the multiset, then
for any delta in (0, 1] with eps0 <= log(n / (16 log(2/delta))) the result is (eps, delta)-DP
with eps <= log(1 + (e^eps0 - 1)/(e^eps0 + 1) * (8 sqrt(e^eps0 log(4/delta)) / sqrt(n)
+ 8 e^eps0 / n)).
"""

from __future__ import annotations

import math

from ldptel.aggregator.model import Central


def default_delta(n: int) -> float:
    """delta well below 1/n: at most 1e-6 and at most 1/(10 n)."""
    return min(1e-6, 1.0 / (10 * max(n, 1)))


def shuffle_amplification(local_epsilon: float, n: int, delta: float | None = None) -> Central:
    """The amplified (epsilon, delta) for n users of an eps0-LDP randomizer, or, when the
    theorem's precondition fails, the local epsilon itself with the reason."""
    delta = default_delta(n) if delta is None else delta
    limit = math.log(n / (16 * math.log(2 / delta))) if n > 0 else -math.inf
    if local_epsilon > limit:
        reason = (
            f"the bound needs local epsilon <= log(n / (16 log(2/delta))) = {limit:.3g} "
            f"for n = {n} and delta = {delta:.3g}; only the local guarantee holds"
        )
        return _central(local_epsilon, n, None, reason)
    e = math.exp(local_epsilon)
    factor = (e - 1) / (e + 1)
    spread = 8 * math.sqrt(e * math.log(4 / delta)) / math.sqrt(n) + 8 * e / n
    amplified = math.log1p(factor * spread)
    if amplified >= local_epsilon:  # near the precondition's edge the bound gains nothing
        reason = "the bound is no smaller than the local epsilon for this n"
        return _central(local_epsilon, n, None, reason)
    return _central(local_epsilon, n, (amplified, delta), "")


def _central(
    local_epsilon: float, n: int, amplified: tuple[float, float] | None, reason: str
) -> Central:
    """The result; without `amplified` (epsilon, delta) only the local guarantee holds."""
    epsilon, delta = (local_epsilon, 0.0) if amplified is None else amplified
    return {
        "bound": "Feldman, McMillan, Talwar (FOCS 2021), Theorem 3.1",
        "local_epsilon": local_epsilon,
        "n_users": n,
        "delta": delta,
        "applies": amplified is not None,
        "epsilon": epsilon,
        "reason": reason,
    }
