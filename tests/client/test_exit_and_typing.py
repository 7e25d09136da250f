"""The SDK as an app meets it: a process that exits without close() still delivers its
reports (atexit, bounded by exit_timeout, as posthog-python and sentry-sdk do), and the app's
own mypy sees Reporter's real signature, so misspelt methods and mistyped settings fail."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from live_collector import SilentServer, stored_reports
from test_sender import cache_the_config

import ldptel

VALUES = ["red", "green", "blue", "cyan", "pink"]


def run_app(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )


def test_reports_of_a_process_that_exits_without_close_are_delivered(
    collector, token, state_dir, redis_client
):
    config = collector.campaign(reports_per_window=100)
    app = run_app(
        f"""
        from ldptel.client import Reporter
        reporter = Reporter({collector.url!r}, {token!r}, state_dir={str(state_dir)!r},
                            max_batch_age=3600, batch_size=1000)  # nothing due before exit
        for value in {VALUES!r}:
            assert reporter.report("colors", value)
        """
    )
    assert app.returncode == 0, app.stderr
    assert len(stored_reports(redis_client, config)) == 5


def test_exit_waits_at_most_exit_timeout_and_leaves_the_rest_spooled(
    collector, redis_client, open_reporter, state_dir
):
    config = collector.campaign(reports_per_window=100)
    cache_the_config(collector, open_reporter)
    silent = SilentServer()
    try:
        # The request would wait 60 s for an answer; subprocess.run's timeout is 60 s too.
        app = run_app(
            f"""
            from ldptel.client import Reporter
            reporter = Reporter({silent.url!r}, "t", state_dir={str(state_dir)!r},
                                timeout=60, exit_timeout=0.5)
            assert reporter.report("colors", "green")
            """
        )
        assert app.returncode == 0, app.stderr
        assert len(silent.heads) == 1  # it tried, at exit
    finally:
        silent.close()
    # The batch it was posting was released at exit: the next Reporter sends it at once.
    assert open_reporter().flush(timeout=20)
    assert len(stored_reports(redis_client, config)) == 2


APP = """\
from ldptel.client import BudgetExhaustedError, LdptelError, Reporter, ReportStatus

reporter = Reporter("https://collector.example", "token", batch_size="five")
reporter.reportt("screens", "home")
status: ReportStatus = reporter.report("screens", "home")
spooled: bool = bool(status)
errors: tuple[type[LdptelError], ...] = (BudgetExhaustedError,)
numeric: ReportStatus = reporter.report("latency", 3.7)
reporter.report("latency", [3.7])
"""


def test_the_apps_mypy_sees_reporters_signature(tmp_path: Path):
    app = tmp_path / "app.py"
    app.write_text(APP)
    # mypy does not follow the editable install's import hook: point it at the package, and
    # follow it as mypy follows an installed wheel (site-packages/ldptel, with its py.typed):
    # silently, its errors ignored and its function bodies not checked (mypy's build.py,
    # is_silent_import_module). Its signatures are read all the same; the bodies are the
    # project's own mypy run's business, and checking them here took 5 of this test's 6 s.
    source = Path(ldptel.__file__).resolve().parent.parent
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\n\n[mypy-ldptel.*]\nfollow_imports = silent\n")
    command = [sys.executable, "-m", "mypy", "--config-file", str(config), "--no-incremental"]
    run = subprocess.run(
        [*command, str(app)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(source)},
    )
    errors = [line for line in run.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["3", "4", "9"], run.stdout
    assert 'incompatible type "str"; expected "int"' in errors[0]
    assert '"Reporter" has no attribute "reportt"' in errors[1]
    expected = 'incompatible type "list[float]"; expected "str | float | Mapping[str, str]"'
    assert expected in errors[2]


def test_the_typed_keyword_settings_are_exactly_the_settings():
    from ldptel.client.settings import Settings, SettingsArgs

    assert set(SettingsArgs.__annotations__) == set(Settings.__dataclass_fields__)
