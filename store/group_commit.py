"""Group commit: the script calls of concurrent requests go to Redis as one pipeline, in one
round trip on one connection, each caller still waiting for its own reply.

Why: a request's own round trip to Redis (redis-py's pool checkout, one send() and one
recv(), the wait in the event loop) costs more CPU than the ingest script itself
(benchmarks/README.md, "The collector against a bare Flask app"). Sharing it among the
requests in flight is the database technique of the same name (Gawlick and Kinkade, "Varieties
of concurrency control in IMS/VS Fast Path", 1985).

The first caller leads: it sends every call waiting, its own included, and hands the lead to
the first caller that arrived meanwhile (who sends the next group), so no caller waits for
more than the round trip in flight and its own. Each reply, or error, reaches its own caller
only: a script that fails fails its own request. A lost connection fails the whole group
with the error, as it would have failed each request alone; its scripts may or may not have
run, which the idempotency marks make safe to retry (docs/collector.md).

Threads or gevent greenlets (patched `threading`): the same code.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.commands.core import Script
from redis.exceptions import NoScriptError

#: The most calls in one pipeline: a bound on the memory and the time of one round trip.
MAX_GROUP = 256


@dataclass
class Reply:
    """A script's reply, and how many replicas acknowledged the writes so far (WAIT; 0 when
    not asked)."""

    value: Any
    acknowledged: int


@dataclass
class _Call:
    keys: Sequence[str]
    args: Sequence[Any]
    done: threading.Event = field(default_factory=threading.Event)
    lead: bool = False
    reply: Reply | None = None
    error: BaseException | None = None


class GroupCommit:
    """`script` run for concurrent callers in shared round trips on `client`, followed by
    one WAIT for `wait_replicas` replicas (up to `wait_timeout_ms`) when asked."""

    def __init__(
        self,
        client: redis.Redis,
        script: Script,
        *,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 1000,
    ) -> None:
        self.client = client
        self.script = script
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self._lock = threading.Lock()
        self._waiting: list[_Call] = []
        self._leading = False

    def run(self, keys: Sequence[str], args: Sequence[Any]) -> Reply:
        """The script's reply for these keys and arguments (its error raised)."""
        call = _Call(keys, args)
        with self._lock:
            self._waiting.append(call)
            call.lead = not self._leading
            self._leading = True
        if not call.lead:
            call.done.wait()
        if call.lead:  # first, or handed the lead while waiting
            self._lead()
        if call.error is not None:
            raise call.error
        assert call.reply is not None
        return call.reply

    def _lead(self) -> None:
        """Send the calls waiting (the leader's among them), then hand the lead on."""
        with self._lock:
            group, self._waiting = self._waiting[:MAX_GROUP], self._waiting[MAX_GROUP:]
        try:
            self._send(group)
        except BaseException as error:  # a killed leader fails its group too
            for call in group:
                call.error = error if isinstance(error, Exception) else redis.ConnectionError()
            raise
        finally:
            with self._lock:
                if self._waiting:
                    self._waiting[0].lead = True
                    self._waiting[0].done.set()
                else:
                    self._leading = False
            for call in group:
                call.done.set()

    def _send(self, group: list[_Call]) -> None:
        """One pipeline of the group's scripts (and the WAIT); a script Redis does not have
        yet (a new or restarted server) is loaded and its calls sent again."""
        pending = group
        for _ in range(2):
            pipe = self.client.pipeline(transaction=False)
            for call in pending:
                pipe.evalsha(self.script.sha, len(call.keys), *call.keys, *call.args)
            if self.wait_replicas:
                pipe.wait(self.wait_replicas, self.wait_timeout_ms)
            replies = pipe.execute(raise_on_error=False)
            acknowledged = replies.pop() if self.wait_replicas else 0
            if isinstance(acknowledged, Exception):
                raise acknowledged
            missing = []
            for call, value in zip(pending, replies, strict=True):
                if isinstance(value, NoScriptError):
                    missing.append(call)
                elif isinstance(value, Exception):
                    call.error = value
                else:
                    call.reply = Reply(value, int(acknowledged))
            if not missing:
                return
            self.client.script_load(self.script.script)
            pending = missing
        for call in pending:
            call.error = NoScriptError("the script was not kept by Redis")
