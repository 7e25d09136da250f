"""An open-domain campaign's candidate list (its dictionary): the strings every window report
estimates and lists when they clear the release threshold, kept in Redis beside the
campaign so that the aggregator's scheduled passes, `ldptel report`, the collector's report
API and the dashboard all show the same strings.

It is not part of the campaign's config: clients never see it, and choosing which strings to
estimate is post-processing of the reports (no privacy cost), so changing it changes no
config id. Set with `ldptel aggregator candidates NAME FILE` (cli/candidates.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ldptel.store import keys
from ldptel.store.connection import RedisClient


@dataclass(frozen=True)
class StoredCandidates:
    """A campaign's candidate list and where it came from (e.g. "file colors.txt")."""

    values: tuple[str, ...]
    source: str


def save(client: RedisClient, name: str, values: list[str], source: str) -> None:
    """Replace the campaign's list (values already checked: check_candidates)."""
    body = json.dumps({"values": values, "source": source}, ensure_ascii=False)
    client.set(keys.candidates(name), body.encode())


def load(client: RedisClient, name: str) -> StoredCandidates | None:
    """The campaign's list, or None when none is set."""
    raw = client.get(keys.candidates(name))
    if raw is None:
        return None
    data = json.loads(raw)
    return StoredCandidates(tuple(str(v) for v in data["values"]), str(data["source"]))


def clear(client: RedisClient, name: str) -> bool:
    """Remove the campaign's list; False if it had none."""
    return bool(client.delete(keys.candidates(name)))
