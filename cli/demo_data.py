"""`ldptel demo`'s synthetic users: screens by a drifting Zipf law, and free-text colours with
misspellings and a long tail of names held by one user each (cli/demo.py runs them)."""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:  # the CLI imports a part only when a command needs it
    from ldptel.aggregator.model import WindowDocument
    from ldptel.aggregator.reports import Candidates


#: favorite-color: the answers most users give (Zipf over this order), the share of rare
#: answers (misspellings of them, and dictionary names held by one user each), and the
#: longest answer the campaign takes (UTF-8 bytes).
COMMON_COLORS = ("blue", "green", "red", "purple", "black", "pink", "yellow", "orange")


RARE_SHARE = 0.1


SINGLE_NAMES = 40


COLOR_MAX_LENGTH = 64


#: favorite-color with --oracle pem: PEM reports one prefix per group and has a group per 8
#: bits of max_length, and its release threshold grows as sqrt(groups) (docs/heavy-hitters.md,
#: "What it costs"): 8 bytes make 8 groups at the defaults, and hold every common colour
#: and their misspellings; the one-user names are drawn among the names that fit.
PEM_MAX_LENGTH = 8


SCREENS = (
    "home", "search", "feed", "profile", "settings", "notifications", "messages", "compose",
    "camera", "gallery", "player", "playlist", "library", "downloads", "store", "checkout",
    "cart", "orders", "wishlist", "help", "about", "login", "signup", "onboarding",
    "map", "nearby", "events", "calendar", "friends", "groups", "stories", "live",
)  # fmt: skip


def item_names(domain_size: int) -> list[str]:
    """App screens for the first 32 items, then screen-<i>."""
    return [SCREENS[i] if i < len(SCREENS) else f"screen-{i}" for i in range(domain_size)]


def zipf_values(
    n: int, domain_size: int, exponent: float, rng: np.random.Generator
) -> NDArray[np.int64]:
    """n true values with P(item i) proportional to 1 / (i + 1)^exponent."""
    weights = 1.0 / np.arange(1, domain_size + 1) ** exponent
    return rng.choice(domain_size, size=n, p=weights / weights.sum())


def misspelled(word: str, rng: np.random.Generator) -> str:
    """A typo of `word`: one letter dropped, doubled or swapped with the next."""
    at = int(rng.integers(0, len(word) - 1))
    kind = int(rng.integers(0, 3))
    if kind == 0:
        return word[:at] + word[at + 1 :]
    if kind == 1:
        return word[: at + 1] + word[at:]
    return word[:at] + word[at + 1] + word[at] + word[at + 2 :]


def color_answers(
    n: int, exponent: float, rng: np.random.Generator, max_length: int | None = None
) -> list[str]:
    """n users' free-text favourite colours: COMMON_COLORS by Zipf, and RARE_SHARE of rare
    answers: up to SINGLE_NAMES dictionary names held by exactly one user each (of at most
    `max_length` UTF-8 bytes, if given), and misspellings of the common colours (many of
    them unique)."""
    from ldptel.cli.color_names import COLOR_NAMES

    rare = round(n * RARE_SHARE)
    others = [
        name
        for name in COLOR_NAMES
        if name not in COMMON_COLORS and (max_length is None or len(name.encode()) <= max_length)
    ]
    singles = [str(name) for name in rng.choice(others, min(SINGLE_NAMES, rare // 2), False)]
    typos = [
        misspelled(COMMON_COLORS[i], rng)
        for i in rng.integers(0, len(COMMON_COLORS), rare - len(singles))
    ]
    common = [COMMON_COLORS[i] for i in zipf_values(n - rare, len(COMMON_COLORS), exponent, rng)]
    answers = common + singles + typos
    rng.shuffle(answers)
    return answers


@dataclass(frozen=True)
class Scenario:
    """What a demo run simulates: the campaign, each user's true value, the candidates an
    open-domain report estimates, and the items whose true counts are shown (None: the
    strings a "pem" report discovers, known only from the report)."""

    campaign: dict[str, Any]
    answers: list[str]
    candidates: Candidates | None
    labels: list[str] | None

    @property
    def name(self) -> str:
        return str(self.campaign["name"])

    def true_counts(self, document: WindowDocument) -> list[int]:
        """The true count of each item of the document's reports, by item index."""
        counts = Counter(self.answers)
        labels = self.labels
        if labels is None:
            labels = [item["item"] for item in document["reports"][-1]["items"]]
        return [counts[label] for label in labels]


def scenario(
    args: argparse.Namespace, campaign: dict[str, Any], rng: np.random.Generator, drift: float
) -> Scenario:
    """The users of one window: screens by a Zipf law drifting with `drift` in [0, 1]
    (`drifting_probabilities`), or free-text colours (no drift), reported against the colour
    dictionary, or discovered with none (a "pem" campaign)."""
    if args.scenario == "screens":
        names = list(campaign["domain"])
        p = drifting_probabilities(args.domain_size, args.zipf_exponent, drift)
        values = rng.choice(args.domain_size, size=args.n, p=p)
        return Scenario(campaign, [names[v] for v in values], None, names)
    if campaign["oracle"] == "pem":
        answers = color_answers(args.n, args.zipf_exponent, rng, PEM_MAX_LENGTH)
        return Scenario(campaign, answers, None, None)
    from ldptel.aggregator.reports import Candidates
    from ldptel.cli.color_names import COLOR_NAMES

    answers = color_answers(args.n, args.zipf_exponent, rng)
    candidates = Candidates(COLOR_NAMES, "the CSS colour names (cli/color_names.py)")
    return Scenario(campaign, answers, candidates, list(COLOR_NAMES))


def drifting_probabilities(domain_size: int, exponent: float, t: float) -> NDArray[np.float64]:
    """Zipf probabilities drifting linearly with t in [0, 1] towards the same law with the
    2nd and 5th items swapped: one item falls, another rises, the rest stay (a visible trend)."""
    weights = 1.0 / np.arange(1, domain_size + 1) ** exponent
    start = weights / weights.sum()
    end = start.copy()
    falling, rising = min(1, domain_size - 2), min(4, domain_size - 1)
    end[[falling, rising]] = end[[rising, falling]]
    return np.asarray((1 - t) * start + t * end, dtype=np.float64)
