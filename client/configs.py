"""Campaign configs on the client: fetched from the collector (ETag = config id), cached on
disk in the state database so that an app starting offline can report at once."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Literal

from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import LdptelError
from ldptel.client.statedb import transaction
from ldptel.client.transport import ConfigAnswer

SCHEMA = """
CREATE TABLE IF NOT EXISTS configs (
  name TEXT PRIMARY KEY, body TEXT, fetched_at REAL NOT NULL, status TEXT NOT NULL
) WITHOUT ROWID;
"""

Status = Literal["active", "retired", "unknown"]


@dataclass(frozen=True)
class Known:
    """What the client knows of a campaign: its active config, or that it is retired/unknown."""

    status: Status
    config: CampaignConfig | None
    fetched_at: float


def parse_answer(answer: ConfigAnswer) -> CampaignConfig:
    """The config of a 200 answer, checked: valid, and its id is the hash it claims.
    Raises LdptelError (field, reason) on garbage."""
    body = dict(answer.body or {})
    claimed = body.pop("config_id", None)
    config = CampaignConfig.from_dict(body)
    if config.config_id != claimed:
        raise LdptelError("config_id", "does not match the config's canonical JSON")
    return config


def load(conn: sqlite3.Connection, name: str) -> Known | None:
    """The cached state of a campaign, if any."""
    row = conn.execute(
        "SELECT body, fetched_at, status FROM configs WHERE name = ?", (name,)
    ).fetchone()
    if row is None:
        return None
    body, fetched_at, status = row
    config = None
    if status == "active":
        try:
            config = CampaignConfig.from_dict(json.loads(body))
        except (LdptelError, ValueError):
            return None  # a cache written by another version: fetch again
    return Known(status, config, float(fetched_at))


def store(conn: sqlite3.Connection, name: str, known: Known) -> None:
    body = None if known.config is None else known.config.canonical_json()
    with transaction(conn):
        conn.execute(
            "INSERT OR REPLACE INTO configs VALUES (?, ?, ?, ?)",
            (name, body, known.fetched_at, known.status),
        )
