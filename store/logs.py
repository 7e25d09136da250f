"""One log format for every ldptel service (collector, its gunicorn, the aggregator): one JSON
object per line on stderr with `time` (UTC, ISO 8601, milliseconds), `level`, `logger`, then
either `message` or the fields of a mapping logged as the message (`log.info({"event": ...})`),
so a log shipper needs no parser per service."""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import sys
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

#: The level of every ldptel logger unless told otherwise (INFO, WARNING, ...).
LEVEL_VARIABLE = "LDPTEL_LOG_LEVEL"


#: One encoder for every line (json.dumps with options builds a new one per call).
_ENCODE = json.JSONEncoder(separators=(",", ":"), default=str).encode


def utc_time(created: float) -> str:
    """Unix seconds as the `time` of a line: ISO 8601, UTC, milliseconds."""
    second = math.floor(created)
    micro = round((created - second) * 1_000_000)  # as datetime rounds: exact subtraction
    second, micro = second + micro // 1_000_000, micro % 1_000_000
    return f"{_utc_second(second)}.{micro // 1000:03d}+00:00"


@functools.lru_cache(maxsize=1)
def _utc_second(second: int) -> str:
    """The date and time of a whole second: made once per second, not once per line."""
    return datetime.fromtimestamp(second, timezone.utc).isoformat(timespec="seconds")[:-6]


class JsonFormatter(logging.Formatter):
    """A record as one JSON line: time, level, logger, then the message or its fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": utc_time(record.created),
            "level": record.levelname,
            "logger": record.name,
        }
        if isinstance(record.msg, Mapping):
            line.update(record.msg)
        else:
            line["message"] = record.getMessage()
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return _ENCODE(line)


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """JSON lines to whatever sys.stderr is when a record is written (a test or a host
    application may swap it after the handler was made)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(JsonFormatter())

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        """Ignored: the stream is always the current sys.stderr."""


def json_handler() -> logging.Handler:
    return StderrHandler()


def info(logger: logging.Logger, fields: Mapping[str, Any]) -> None:
    """`logger.info(fields)`. When the logger's one handler is a StderrHandler (json_handler,
    no filters, not propagating: as the collector sets up its access log) the same JSON line
    is written to stderr without a LogRecord, whose making (thread and process lookups,
    the handler's lock) costs several times the line itself, and more under gevent."""
    if not logger.isEnabledFor(logging.INFO):
        return
    handlers = logger.handlers
    direct = (
        len(handlers) == 1
        and type(handlers[0]) is StderrHandler
        and handlers[0].level <= logging.INFO
        and not handlers[0].filters
        and not logger.filters
        and not logger.propagate
    )
    if not direct:
        logger.info(fields)
        return
    line = {"time": utc_time(time.time()), "level": "INFO", "logger": logger.name, **fields}
    try:
        sys.stderr.write(_ENCODE(line) + "\n")  # the whole line at once, as StreamHandler
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken stderr: logging's own error report
        logger.info(fields)


def level(default: str = "INFO") -> str:
    """$LDPTEL_LOG_LEVEL, else `default`; an unknown name is an error naming the variable."""
    name = os.environ.get(LEVEL_VARIABLE, default).upper()
    if not isinstance(logging.getLevelName(name), int):
        from ldptel.client.errors import ParameterError

        raise ParameterError(LEVEL_VARIABLE, f"unknown log level {name!r}")
    return name


def configure(level_name: str | None = None) -> None:
    """JSON lines on stderr for the root logger (so every library's records share the format),
    at `level_name` if given (a flag such as --quiet), else $LDPTEL_LOG_LEVEL, else INFO;
    calling it again replaces its own handler only."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, StderrHandler)]:
        root.removeHandler(handler)
    root.addHandler(json_handler())
    root.setLevel(level_name or level())


def gunicorn_logconfig(default_level: str = "INFO") -> dict[str, Any]:
    """gunicorn's `logconfig_dict`: its error log and ours as JSON lines on stderr."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonFormatter"}},
        "handlers": {"console": handler, "error_console": handler},
        "root": {"level": level(default_level), "handlers": ["console"]},
        "loggers": {
            "gunicorn.error": {"level": "INFO", "handlers": [], "propagate": True},
            # Off: its lines carry the client's address (the app logs each request itself).
            "gunicorn.access": {"level": "CRITICAL", "handlers": [], "propagate": False},
        },
    }
