"""One log format for every service (store/logs.py): JSON lines with time, level and logger;
gunicorn's own lines share it, and its access log (client addresses) stays off."""

from __future__ import annotations

import io
import json
import logging
import logging.config
from datetime import datetime, timezone

import pytest

from ldptel.client.errors import ParameterError
from ldptel.store import logs


def test_a_record_is_one_json_line_with_time_level_and_logger() -> None:
    formatter = logs.JsonFormatter()
    plain = logging.LogRecord("ldptel.x", logging.WARNING, __file__, 1, "%d shards", (3,), None)
    event = logging.LogRecord("ldptel.y", logging.INFO, __file__, 1, {"status": 202}, (), None)
    line = json.loads(formatter.format(plain))
    assert (line["level"], line["logger"], line["message"]) == ("WARNING", "ldptel.x", "3 shards")
    assert datetime.fromisoformat(line["time"]).utcoffset() is not None  # UTC, explicit
    assert json.loads(formatter.format(event))["status"] == 202  # fields, not a string
    assert "\n" not in formatter.format(plain)


def test_the_level_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LDPTEL_LOG_LEVEL", "debug")
    assert logs.level() == "DEBUG"
    monkeypatch.setenv("LDPTEL_LOG_LEVEL", "chatty")
    with pytest.raises(ParameterError) as error:
        logs.level()
    assert error.value.field == "LDPTEL_LOG_LEVEL"


def test_gunicorn_logs_as_json_without_an_access_log() -> None:
    # The config's handlers write to a buffer here, not to the process's stderr: a handler
    # left on a test's captured stderr outlived the capture and broke the run's last lines.
    stream = io.StringIO()
    config = logs.gunicorn_logconfig()
    for handler in config["handlers"].values():
        handler["stream"] = stream
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        logging.config.dictConfig(config)
        logging.getLogger("gunicorn.error").info("Listening at: http://127.0.0.1:8080")
        logging.getLogger("gunicorn.access").info('203.0.113.7 "GET / HTTP/1.1" 200')
    finally:
        for handler in root.handlers:
            if handler not in saved_handlers:
                handler.close()
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
    # Other threads of earlier tests may log meanwhile: only gunicorn's lines are checked.
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    gunicorn = [line for line in lines if line["logger"].startswith("gunicorn")]
    assert [line["logger"] for line in gunicorn] == ["gunicorn.error"]


def test_the_direct_line_is_the_line_logging_writes(capsys: pytest.CaptureFixture[str]) -> None:
    # logs.info writes without a LogRecord when the logger's one handler is json_handler's;
    # any other set-up (a host's or a test's handler) gets the record through logging.
    logger = logging.getLogger("ldptel.test.direct")
    logger.addHandler(logs.json_handler())
    logger.setLevel(logging.INFO)
    logger.propagate = False
    fields = {"method": "POST", "status": 202, "ms": 0.5, "duplicate": False}
    try:
        capsys.readouterr()
        logs.info(logger, fields)
        direct = capsys.readouterr().err
        logger.info(fields)
        logged = capsys.readouterr().err
        extra = io.StringIO()
        handler = logging.StreamHandler(extra)
        handler.setFormatter(logs.JsonFormatter())
        logger.addHandler(handler)
        logs.info(logger, fields)
        through_logging = capsys.readouterr().err
        logger.setLevel(logging.WARNING)
        logs.info(logger, fields)
        quiet = capsys.readouterr().err
    finally:
        logger.handlers.clear()
    for text in (direct, logged, through_logging):
        assert text.endswith("\n") and text.count("\n") == 1
    lines = [json.loads(text) for text in (direct, logged)]
    for line in lines:
        line.pop("time")
    assert lines[0] == lines[1] == {"level": "INFO", "logger": "ldptel.test.direct", **fields}
    assert list(json.loads(direct)) == list(json.loads(logged))  # the same keys, in order
    assert datetime.fromisoformat(json.loads(direct)["time"]).utcoffset() is not None
    assert json.loads(extra.getvalue())["status"] == 202  # the other handler got it too
    assert quiet == ""


@pytest.mark.parametrize(
    "created",
    [0.0, 1_700_000_000.0, 1_700_000_000.0005, 1_700_000_000.9995, 1_700_000_000.9999996,
     1_798_018_912.5239995, 4_102_444_799.999],
)  # fmt: skip
def test_the_time_is_datetimes_iso_8601_to_the_millisecond(created: float) -> None:
    # Made from a per-second cache; the same text as datetime's, rounding and carry included.
    expected = datetime.fromtimestamp(created, timezone.utc).isoformat(timespec="milliseconds")
    assert logs.utc_time(created) == expected
