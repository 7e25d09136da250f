"""Group commit (store/group_commit.py): concurrent callers of a script share round trips to
Redis, and each still gets its own reply or its own error."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from waiting import scaled, wait_for

from ldptel.store.group_commit import GroupCommit, NodeGroups, Wait

ECHO = """
if ARGV[1] == 'bad' then return redis.error_reply('ERR refused by the script') end
redis.call('INCR', KEYS[1])
return {KEYS[1], ARGV[1]}
"""


class Gated(redis.Redis):
    """A client whose connections wait for `gate` before they send, so that callers pile up
    behind the first; it counts the round trips sent and can fail them."""

    gate: threading.Event
    rounds: int
    failures: int  # how many more rounds are lost (ConnectionError before they are sent)


def gated_connection(client: Gated) -> type[redis.Connection]:
    class GatedConnection(redis.Connection):
        def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            if b"EVALSHA" in b"".join([command] if isinstance(command, bytes) else command):
                client.gate.wait(scaled(30))  # a round of scripts (not the handshake)
                client.rounds += 1
                if client.failures > 0:
                    client.failures -= 1
                    raise redis.ConnectionError("reset by peer")
            super().send_packed_command(command, check_health)

    return GatedConnection


@pytest.fixture
def gated(redis_url: str, redis_client: Any) -> Iterator[Gated]:
    client = Gated.from_url(redis_url, retry=Retry(NoBackoff(), 1))  # as the collector's
    client.gate, client.rounds, client.failures = threading.Event(), 0, 0
    client.script_load(ECHO)  # as a served collector's first batch has done
    client.connection_pool.connection_class = gated_connection(client)
    client.connection_pool.reset()  # its connections made again, of that class
    yield client
    client.gate.set()
    client.close()


def callers(group: GroupCommit, args: list[str]) -> tuple[list[threading.Thread], dict[str, Any]]:
    """One thread per argument calling the script; their outcomes (reply or error) by
    argument, once joined."""
    outcomes: dict[str, Any] = {}

    def call(arg: str) -> None:
        try:
            outcomes[arg] = group.run([f"count:{arg}"], [arg]).value
        except Exception as error:  # the outcome under test
            outcomes[arg] = error

    threads = [threading.Thread(target=call, args=(arg,)) for arg in args]
    for thread in threads:
        thread.start()
    return threads, outcomes


def pile_up(group: GroupCommit, gated: Gated, args: list[str]) -> dict[str, Any]:
    """The first caller leads and is held at the gate while the others queue behind it."""
    threads, outcomes = callers(group, args)
    wait_for(lambda: len(group._waiting) == len(args) - 1, "the callers queued")
    gated.gate.set()
    for thread in threads:
        thread.join(scaled(30))
    return outcomes


def test_callers_waiting_behind_a_round_trip_share_the_next_one(gated: Gated) -> None:
    group = GroupCommit(gated, gated.register_script(ECHO))
    args = [f"a{i}" for i in range(12)]
    outcomes = pile_up(group, gated, args)
    assert outcomes == {arg: [f"count:{arg}".encode(), arg.encode()] for arg in args}
    assert gated.rounds == 2  # the leader's own, then the 11 that waited, together
    assert all(int(gated.get(f"count:{arg}") or 0) == 1 for arg in args)  # each ran once


def test_a_script_error_fails_only_its_own_caller(gated: Gated) -> None:
    group = GroupCommit(gated, gated.register_script(ECHO))
    outcomes = pile_up(group, gated, ["a", "bad", "c"])
    assert isinstance(outcomes["bad"], redis.ResponseError)
    assert "refused by the script" in str(outcomes["bad"])
    assert outcomes["a"] == [b"count:a", b"a"] and outcomes["c"] == [b"count:c", b"c"]


def test_a_lost_connection_fails_the_group_and_the_next_caller_leads_again(gated: Gated) -> None:
    group = GroupCommit(gated, gated.register_script(ECHO))
    gated.failures = 100  # more than the client's Retry tries
    outcomes = pile_up(group, gated, ["a", "b", "c"])
    assert all(isinstance(outcome, redis.ConnectionError) for outcome in outcomes.values())
    gated.failures = 0
    assert group.run(["count:d"], ["d"]).value == [b"count:d", b"d"]


def test_a_script_redis_no_longer_has_is_loaded_and_run_again(gated: Gated) -> None:
    gated.gate.set()
    group = GroupCommit(gated, gated.register_script(ECHO))
    gated.script_flush()
    assert group.run(["count:a"], ["a"]).value == [b"count:a", b"a"]
    assert int(gated.get("count:a") or 0) == 1


def test_wait_reports_the_replicas_that_acknowledged(gated: Gated) -> None:
    gated.gate.set()
    group = GroupCommit(gated, gated.register_script(ECHO), Wait(replicas=1, timeout_ms=10))
    reply = group.run(["count:a"], ["a"])
    assert reply.value == [b"count:a", b"a"] and reply.acknowledged == 0  # no replica here


def test_a_round_lost_once_is_sent_again(gated: Gated) -> None:
    gated.gate.set()
    group = GroupCommit(gated, gated.register_script(ECHO))
    gated.failures = 1
    assert group.run(["count:a"], ["a"]).value == [b"count:a", b"a"]
    assert gated.rounds == 2 and int(gated.get("count:a") or 0) == 1


def test_on_a_cluster_each_master_has_its_group_and_its_wait(cluster_client: Any) -> None:
    script = cluster_client.register_script(ECHO)
    groups = NodeGroups(cluster_client, script, Wait(replicas=1, timeout_ms=5000))
    names = [f"{{tag{i}}}:count" for i in range(12)]  # spread over the three masters
    threads, outcomes = [], {}

    def call(name: str) -> None:
        outcomes[name] = groups.run([name], ["x"])

    for name in names:
        threads.append(threading.Thread(target=call, args=(name,)))
        threads[-1].start()
    for thread in threads:
        thread.join(scaled(30))
    assert {name: outcome.value for name, outcome in outcomes.items()} == {
        name: [name.encode(), b"x"] for name in names
    }
    assert all(outcome.acknowledged == 1 for outcome in outcomes.values())  # its replica
    assert len({cluster_client.get_node_from_key(name).name for name in names}) == 3
    assert len(groups._groups) == 3
