"""Redis key names (DESIGN.md, "Redis data model"). The `{campaign:shard}` hash tag keeps a
shard's stream, window state, checkpoint and lease in one Redis Cluster slot."""

from __future__ import annotations

PREFIX = "ldptel"


def campaign(name: str) -> str:
    """Hash: current config id, retired flag, created time."""
    return f"{PREFIX}:campaign:{name}"


def campaigns() -> str:
    """Set of all campaign names."""
    return f"{PREFIX}:campaigns"


def config(config_id: str) -> str:
    """String: canonical JSON of an immutable config."""
    return f"{PREFIX}:config:{config_id}"


def stream(name: str, shard: int) -> str:
    """Stream of validated, randomized report batches of one shard."""
    return f"{PREFIX}:{{{name}:{shard}}}:reports"


def checkpoint(name: str, shard: int) -> str:
    """String: id of the last stream entry whose support is in the window state."""
    return f"{PREFIX}:{{{name}:{shard}}}:checkpoint"


def lease(name: str, shard: int) -> str:
    """String with TTL: the worker that owns the shard."""
    return f"{PREFIX}:{{{name}:{shard}}}:lease"


def window_state(name: str, shard: int, config_id: str, window: int, level: str = "") -> str:
    """Hash: n and the support vector of (campaign, config, window, level) in one shard."""
    suffix = f":{level}" if level else ""
    return f"{PREFIX}:{{{name}:{shard}}}:state:{config_id}:{window}{suffix}"


def window_cells(name: str, shard: int, config_id: str, window: int, level: str = "") -> str:
    """String: the packed support vector of a large window state (aggregator/state.py), one
    big-endian int64 per cell, as BITFIELD INCRBY i64 writes them."""
    suffix = f":{level}" if level else ""
    return f"{PREFIX}:{{{name}:{shard}}}:cells:{config_id}:{window}{suffix}"


def window_log(name: str, shard: int, config_id: str, window: int, level: str = "") -> str:
    """String: the report log of a window state whose mechanism keeps its reports
    (aggregator/state.py, "Report log"): the packed reports, appended step by step."""
    suffix = f":{level}" if level else ""
    return f"{PREFIX}:{{{name}:{shard}}}:log:{config_id}:{window}{suffix}"


def state_index(name: str, shard: int) -> str:
    """Sorted set: "<config_id>:<window>:<level>" members of the shard's window states,
    scored by window start (written with the state, so report building finds them)."""
    return f"{PREFIX}:{{{name}:{shard}}}:states"


def pruned_states(name: str, shard: int) -> str:
    """Set: state members whose window state was deleted (ldptel aggregator prune); a later
    entry of such a state is quarantined, never counted into a new, partial state."""
    return f"{PREFIX}:{{{name}:{shard}}}:pruned"


def pending_reports(name: str, shard: int) -> str:
    """Hash: state member -> version, bumped with every applied delta; a member leaves only
    once a report built after that version is stored (so a crash never skips a report)."""
    return f"{PREFIX}:{{{name}:{shard}}}:pending"


def quarantine(name: str, shard: int) -> str:
    """Stream of entries the aggregator could not decode, kept for inspection."""
    return f"{PREFIX}:{{{name}:{shard}}}:quarantine"


def report(name: str, window: int) -> str:
    """String: the JSON report of one window."""
    return f"{PREFIX}:report:{name}:{window}"


def report_index(name: str) -> str:
    """Hash: window start -> version of its stored report (bumped by every save), so readers
    list a campaign's reports and know when a cached one was rebuilt."""
    return f"{PREFIX}:report-index:{name}"


def candidates(name: str) -> str:
    """String: an open-domain campaign's candidate list (its dictionary) as JSON, estimated
    in every window report the aggregator builds (store/candidates.py)."""
    return f"{PREFIX}:candidates:{name}"


def report_lock(name: str, window: int) -> str:
    """String with TTL: the worker building the report of one window (one builder at a time,
    so a slower builder cannot overwrite a newer report)."""
    return f"{PREFIX}:report-lock:{name}:{window}"


def export_backlog(sink: str) -> str:
    """Set of "<campaign>:<window>": the windows a sink after the store still owes a write
    (aggregator/sinks/exports.py)."""
    return f"{PREFIX}:export-backlog:{sink}"


def idempotency(name: str, shard: int, key: str) -> str:
    """String with TTL: marks a client batch as stored. The batch's shard is derived from its
    idempotency key, so the mark and the XADD share a slot and commit in one transaction."""
    return f"{PREFIX}:{{{name}:{shard}}}:idem:{key}"


def token(token_hash: str) -> str:
    """Hash: the app an ingest token belongs to, keyed by the token's SHA-256 (hex); the
    token itself is never stored."""
    return f"{PREFIX}:{{token:{token_hash}}}"


def refused(token_hash: str, window: int) -> str:
    """Counter with TTL: requests of one ingest token refused before the ingest script (a
    gzip bomb, a bad body, batch or report) in one fixed rate-limit window; in the token's
    slot (collector/auth.py, RefusalLimit)."""
    return f"{PREFIX}:{{token:{token_hash}}}:refused:{window}"


def rate(name: str, shard: int, token_hash: str, window: int) -> str:
    """Counter with TTL: requests of one ingest token to one campaign shard in one fixed
    rate-limit window. It shares the shard's slot, so the ingest script counts and stores in
    one round trip."""
    return f"{PREFIX}:{{{name}:{shard}}}:rate:{token_hash}:{window}"


def dashboard_session(session_hash: str) -> str:
    """String with TTL: an open dashboard session, keyed by the SHA-256 (hex) of the
    cookie's random id; the id itself is never stored (dashboard/access.py)."""
    return f"{PREFIX}:dashboard:session:{session_hash}"
