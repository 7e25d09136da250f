"""The central guarantee a report enjoys when the collector strips who sent what (shuffling):
the numerical bound of Feldman, McMillan, Talwar (FOCS 2021), ldptel.client.shuffle, with
their Theorem 3.1's closed form beside it for comparison."""

from __future__ import annotations

from ldptel.aggregator.model import Central
from ldptel.client.shuffle import closed_form_epsilon, default_delta, shuffled_epsilon

#: A central epsilon is claimed only if it is below this fraction of the local one.
GAIN = 0.99
BOUND = "Feldman, McMillan, Talwar (FOCS 2021), numerical bound (Thm. 3.2)"


def shuffle_amplification(local_epsilon: float, n: int, delta: float | None = None) -> Central:
    """The amplified (epsilon, delta) for n users of an eps0-LDP randomizer, or, when shuffling
    gains nothing at this n, the local epsilon itself with the reason."""
    delta = default_delta(n) if delta is None else delta
    amplified = shuffled_epsilon(local_epsilon, n, delta)
    applies = amplified < GAIN * local_epsilon
    return {
        "bound": BOUND,
        "local_epsilon": local_epsilon,
        "n_users": n,
        "delta": delta if applies else 0.0,
        "applies": applies,
        "epsilon": amplified if applies else local_epsilon,
        "closed_form_epsilon": closed_form_epsilon(local_epsilon, n, delta),
        "reason": "" if applies else f"shuffling {n:,} users' reports gains less than 1%",
    }
