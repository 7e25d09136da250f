"""The gunicorn worker's answer socket (collector/worker.py HeadWithBody): gunicorn's header
block goes out with the body's first bytes, in order, and nothing held is ever lost."""

from __future__ import annotations

from typing import Any

from ldptel.collector.worker import HeadWithBody


class Recorder:
    """A socket that records what is done with it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def sendall(self, data: bytes, flags: int = 0) -> None:
        self.calls.append(("sendall", bytes(data)))

    def shutdown(self, how: int) -> None:
        self.calls.append(("shutdown", how))

    def send(self, data: bytes) -> int:
        self.calls.append(("send", bytes(data)))
        return len(data)


def test_the_header_block_goes_out_with_the_first_body_bytes_in_one_send() -> None:
    sock = Recorder()
    answer = HeadWithBody(sock)
    answer.sendall(b"HTTP/1.1 202 Accepted\r\n\r\n")
    assert sock.calls == []
    answer.sendall(memoryview(b'{"accepted":1}'))
    answer.sendall(b"more")
    answer.flush()
    assert sock.calls == [
        ("sendall", b'HTTP/1.1 202 Accepted\r\n\r\n{"accepted":1}'),
        ("sendall", b"more"),
    ]


def test_a_header_block_without_a_body_goes_out_at_the_flush() -> None:
    sock = Recorder()
    answer = HeadWithBody(sock)
    answer.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")
    answer.flush()
    answer.flush()
    assert sock.calls == [("sendall", b"HTTP/1.1 204 No Content\r\n\r\n")]


def test_anything_else_done_with_the_socket_sends_what_is_held_first() -> None:
    sock = Recorder()
    answer = HeadWithBody(sock)
    answer.sendall(b"head")
    answer.shutdown(1)
    answer.send(b"x")
    assert sock.calls == [("sendall", b"head"), ("shutdown", 1), ("send", b"x")]


def test_an_early_hints_block_keeps_its_place_before_the_answer() -> None:
    sock = Recorder()
    answer = HeadWithBody(sock)
    for part in (b"103 hints|", b"200 head|", b"body"):
        answer.sendall(part)
    answer.flush()
    assert b"".join(data for _, data in sock.calls) == b"103 hints|200 head|body"


def test_a_client_gone_before_the_flush_is_not_an_error() -> None:
    class Gone(Recorder):
        def sendall(self, data: bytes, flags: int = 0) -> None:
            raise BrokenPipeError

    answer = HeadWithBody(Gone())
    answer.sendall(b"head")
    answer.flush()  # no exception
