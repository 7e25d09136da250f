"""Campaign configs on the client: fetched from the collector (ETag = config id), cached on
disk (`state_dir/configs/<name>.json`, apart from the state database, which so holds no label
of any domain) so that an app starting offline can report at once."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import LdptelError
from ldptel.client.memoization import MEMO_EXACT, NUMERIC_MEMO_REFUSED
from ldptel.client.transport import ConfigAnswer

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
    config = CampaignConfig.from_dict(body, stored=True).identified_as(claimed)
    if config is None:
        raise LdptelError("config_id", "does not match the config's canonical JSON")
    if memo_refused(config):
        raise LdptelError("memoization", NUMERIC_MEMO_REFUSED)
    return config


def memo_refused(config: CampaignConfig) -> bool:
    """A numeric config with exact memoization, stored before it was refused: never used."""
    return config.numeric and config.memoization == MEMO_EXACT


def _path(state_dir: Path, name: str) -> Path:
    return state_dir / "configs" / f"{name}.json"  # name matches NAME_PATTERN: a safe file name


def load(state_dir: Path, name: str) -> Known | None:
    """The cached state of a campaign, if any (None if absent or unreadable)."""
    try:
        data = json.loads(_path(state_dir, name).read_text("utf-8"))
        status = data["status"]
        if status not in ("active", "retired"):
            return None
        config = None
        if status == "active":
            # Files written before they held the id hold configs under legacy ids.
            stored = CampaignConfig.from_dict(data["config"], stored=True)
            config = stored.identified_as(data.get("config_id", stored.legacy_config_id))
            # Cached by an SDK from before the refusal: fetch again (parse_answer refuses it).
            if config is None or memo_refused(config):
                return None
        return Known(status, config, float(data["fetched_at"]))
    except (OSError, ValueError, KeyError, TypeError, LdptelError):
        return None  # never cached, or written by another version: fetch again


def store(state_dir: Path, name: str, known: Known) -> None:
    """Cache the campaign's state (atomically: a crash leaves the old file or the new)."""
    path = _path(state_dir, name)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    config = None if known.config is None else known.config.to_dict()
    data: dict[str, object] = {
        "status": known.status,
        "fetched_at": known.fetched_at,
        "config": config,
    }
    if known.config is not None:
        data["config_id"] = known.config.config_id  # a legacy id is not the config's hash
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data, sort_keys=True), "utf-8")
    os.replace(temporary, path)
