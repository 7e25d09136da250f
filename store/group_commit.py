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

On a Redis Cluster there is one group per master (`NodeGroups`), each call sent to the master
of its first key's slot (the ingest script's keys share one hash tag).

Threads or gevent greenlets (patched `threading`): the same code.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import hiredis
import redis
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.exceptions import NoScriptError, ResponseError

from ldptel.store.connection import FAILOVER_ERRORS, RedisClient, node_client, refresh_slots

#: The most calls in one pipeline: a bound on the memory and the time of one round trip.
MAX_GROUP = 256


@dataclass(frozen=True)
class Wait:
    """A WAIT after each round: for `replicas` replicas (0: none), up to `timeout_ms`."""

    replicas: int = 0
    timeout_ms: int = 1000


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
    """`script` run for concurrent callers in shared round trips on `client`, each round
    followed by one `wait` when it asks for replicas."""

    def __init__(self, client: redis.Redis, script: Script, wait: Wait = Wait()) -> None:
        self.client = client
        self.script = script
        self.wait = wait
        self._lock = threading.Lock()
        self._waiting: list[_Call] = []
        self._leading = False
        self._connection: Any = None  # a redis.Connection (redis-py leaves it untyped)

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
        """One round trip of the group's scripts (and the WAIT); a script Redis does not
        have yet (a new or restarted server) is loaded and its calls sent again."""
        pending = group
        for _ in range(2):
            commands = [
                ("EVALSHA", self.script.sha, len(c.keys), *c.keys, *c.args) for c in pending
            ]
            if self.wait.replicas:
                commands.append(("WAIT", self.wait.replicas, self.wait.timeout_ms))
            replies = self._round_trip(commands)
            acknowledged = replies.pop() if self.wait.replicas else 0
            missing = []
            for call, value in zip(pending, replies, strict=True):
                if isinstance(value, NoScriptError):
                    missing.append(call)
                elif isinstance(value, Exception):  # its own error first (MOVED on a replica)
                    call.error = value
                elif isinstance(acknowledged, Exception):  # stored, not known to be copied
                    call.error = acknowledged
                else:
                    call.reply = Reply(value, int(acknowledged))
            if not missing:
                return
            self.client.script_load(self.script.script)
            pending = missing
        for call in pending:
            call.error = NoScriptError("the script was not kept by Redis")

    def _round_trip(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """The commands' replies (an error reply as its exception), in order, sent at once on
        the leaders' own connection. It is held, not checked out of the pool per round (the
        checkout's locks and health poll cost as much as the send). A connection lost or
        timed out is reconnected and the round sent again as the client's Retry says, as
        redis-py's own pipelines do: a script that ran is answered from its mark then."""
        if self._connection is None:
            self._connection = self.client.connection_pool.get_connection()
        connection = self._connection

        def exchange() -> list[Any]:
            connection.send_packed_command(pack(commands))
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(connection.read_response())
                except ResponseError as error:
                    replies.append(error)
            return replies

        replies: list[Any] = connection.retry.call_with_retry(
            exchange, lambda error: connection.disconnect()
        )
        return replies


def pack(commands: list[tuple[Any, ...]]) -> list[bytes]:
    """The commands in Redis's protocol, as one buffer: hiredis's packer called directly
    (redis-py's `pack_commands` checks every argument's type in a generator first: a third of
    a script call's client CPU). Arguments are str, bytes, int or float, as redis-py takes."""
    try:
        return [b"".join([hiredis.pack_command(command) for command in commands])]
    except TypeError as error:
        raise redis.DataError(str(error)) from error


class NodeGroups:
    """A GroupCommit per Redis server: one for one server; on a Redis Cluster one per
    master, each call sent to the master of its first key's slot. There, after MOVED, ASK
    or a lost master (a failover) the slot map is read again and the call sent once more; a
    second failure is raised. (A script followed by WAIT must go to the master itself: WAIT
    counts the writes of its own connection, and a cluster client would send it to every
    node on other connections.)"""

    def __init__(self, client: RedisClient, script: Script, wait: Wait = Wait()) -> None:
        self.client = client
        self.script = script
        self.wait = wait
        # Checked once: RedisCluster's metaclass is typing's Protocol one, slow in isinstance.
        self._single = None if isinstance(client, RedisCluster) else client
        # By node client: a master gone from the slot map takes its group with it.
        self._groups: weakref.WeakKeyDictionary[redis.Redis, GroupCommit] = (
            weakref.WeakKeyDictionary()
        )

    def run(self, keys: Sequence[str], args: Sequence[Any]) -> Reply:
        """The script's reply for these keys and arguments (its error raised)."""
        moved = False
        while True:
            try:
                single = self._single
                node = single if single is not None else node_client(self.client, keys[0])
                return self._group(node).run(keys, args)
            except FAILOVER_ERRORS:
                if moved or self._single is not None:
                    raise  # one server: its connection's Retry has retried already
                refresh_slots(self.client)
                moved = True

    def _group(self, node: redis.Redis) -> GroupCommit:
        group = self._groups.get(node)
        if group is None:
            group = self._groups.setdefault(node, GroupCommit(node, self.script, self.wait))
        return group
