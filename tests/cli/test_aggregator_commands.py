"""`ldptel aggregator run`, `ldptel report` and `ldptel demo` as a user runs them."""

from __future__ import annotations

import csv
import io
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldptel.aggregator.model import from_json
from ldptel.cli.main import main

sys.path.insert(0, str(Path(__file__).parents[1] / "aggregator"))
from stream_entries import make_config, register, simulate
from waiting import scaled, wait_for

WINDOW = 1_700_006_400
#: CSV proportion column -> the count it divides by n
PROPORTIONS = {"proportion": "estimate", "proportion_stderr": "stderr",
               "proportion_ci_low": "ci_low", "proportion_ci_high": "ci_high"}  # fmt: skip


@pytest.fixture
def campaign(redis_client: Any) -> Any:
    config = make_config(shards=2)
    register(redis_client, config)
    values = np.random.default_rng(0).choice(8, size=3000, p=[0.5, 0.2, 0.1, 0.1, 0.1, 0, 0, 0])
    simulate(redis_client, config, values, window=WINDOW)
    return config


def test_aggregator_run_once_then_report_as_table_json_and_html(
    campaign: Any, redis_url: str, capsys: Any, tmp_path: Path
) -> None:
    assert main(["aggregator", "run", "--once", "--quiet", "--redis-url", redis_url]) == 0
    assert "aggregated 3,000 reports" in capsys.readouterr().out

    assert main(["report", campaign.name, "--redis-url", redis_url]) == 0
    table = capsys.readouterr().out
    assert "n = 3,000" in table and "95% CI" in table and "item0" in table

    assert main(["report", campaign.name, "--redis-url", redis_url, "--json"]) == 0
    document = from_json(capsys.readouterr().out)  # the report model, every field checked
    assert document["reports"][0]["n"] == 3000

    assert main(["report", campaign.name, "--window", "2023-11-15", "--redis-url", redis_url,
                 "--consistency", "clip", "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["reports"][0]["consistency"] == "clip"

    page = tmp_path / "r.html"
    assert main(["report", campaign.name, "--redis-url", redis_url, "--html", str(page)]) == 0
    assert "<svg" in page.read_text()
    assert capsys.readouterr().out == f"wrote {page}\n"

    assert main(["report", campaign.name, "--list", "--redis-url", redis_url]) == 0
    assert capsys.readouterr().out.startswith(f"{WINDOW}  2023-11-15T00:00:00Z")
    assert main(["report", campaign.name, "--list", "--json", "--redis-url", redis_url]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "campaign": campaign.name,
        "windows": [{"start": "2023-11-15T00:00:00Z", "start_unix": WINDOW}],
    }


def test_a_campaign_with_reports_waiting_says_to_run_the_aggregator(
    campaign: Any, redis_url: str, capsys: Any
) -> None:
    assert main(["report", campaign.name, "--redis-url", redis_url]) == 2
    assert capsys.readouterr().err.endswith(
        "not yet aggregated: run `ldptel aggregator run --once`\n"
    )
    run = ["aggregator", "run", "--once", "--quiet", "--json", "--redis-url", redis_url]
    assert main(run) == 0
    totals = json.loads(capsys.readouterr().out)
    assert (totals["reports"], totals["quarantined"], totals["reports_built"]) == (3000, 0, 1)
    assert main(["report", campaign.name, "--redis-url", redis_url]) == 0


def test_the_csv_report_holds_the_json_reports_numbers_and_their_proportions(
    campaign: Any, redis_url: str, capsys: Any, tmp_path: Path
) -> None:
    report = ["report", campaign.name, "--redis-url", redis_url]
    assert main(["aggregator", "run", "--once", "--quiet", "--redis-url", redis_url]) == 0
    capsys.readouterr()
    assert main([*report, "--json"]) == 0
    (expected,) = from_json(capsys.readouterr().out)["reports"]
    assert main([*report, "--csv", "-"]) == 0
    printed = capsys.readouterr().out
    written = tmp_path / "r.csv"
    assert main([*report, "--csv", str(written)]) == 0
    assert capsys.readouterr().out == f"wrote {written}\n"
    assert written.read_bytes().decode() == printed  # byte for byte (RFC 4180 CRLF rows)

    rows = list(csv.DictReader(io.StringIO(printed)))
    # Every item once, largest estimate first, with the JSON's numbers to the last bit.
    assert [row["item"] for row in rows] == [
        item["item"] for item in sorted(expected["items"], key=lambda i: -i["estimate"])
    ]
    items: dict[str, Any] = {item["item"]: item for item in expected["items"]}
    n = expected["n"]
    for row in rows:
        item = items[row["item"]]
        assert (row["campaign"], row["config_id"], row["level"], row["combined"]) == (
            campaign.name, expected["config_id"], "", "false"
        )  # fmt: skip
        assert (row["window_start"], int(row["n"]), float(row["epsilon"])) == (
            expected["window"]["start"], n, expected["epsilon"]
        )  # fmt: skip
        assert int(row["index"]) == item["index"]
        assert row["significant"] == str(item["significant"]).lower()
        for column in ("estimate", "stderr", "ci_low", "ci_high", "consistent"):
            assert float(row[column]) == item[column]
        for column, count in PROPORTIONS.items():
            assert float(row[column]) == item[count] / n
    assert sum(float(row["proportion"]) for row in rows) == pytest.approx(
        sum(item["estimate"] for item in expected["items"]) / n
    )


def test_the_parquet_report_holds_the_csv_reports_rows_typed(
    campaign: Any, redis_url: str, capsys: Any, tmp_path: Path
) -> None:
    pq = pytest.importorskip("pyarrow.parquet")  # the test extra installs it
    report = ["report", campaign.name, "--redis-url", redis_url]
    assert main(["aggregator", "run", "--once", "--quiet", "--redis-url", redis_url]) == 0
    capsys.readouterr()
    assert main([*report, "--csv", "-"]) == 0
    csv_rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    written = tmp_path / "r.parquet"
    assert main([*report, "--parquet", str(written)]) == 0
    assert capsys.readouterr().out == f"wrote {written} ({len(csv_rows):,} rows)\n"

    table = pq.read_table(written)
    assert table.column_names == list(csv_rows[0])
    assert table.num_rows == len(csv_rows) == 8  # items 0..7, each once
    assert str(table.schema.field("estimate").type) == "double"
    assert str(table.schema.field("significant").type) == "bool"
    # cell by cell, for every report kind: tests/aggregator/test_parquet_export.py
    assert table.column("item").to_pylist() == [row["item"] for row in csv_rows]
    assert table.column("estimate").to_pylist() == [float(row["estimate"]) for row in csv_rows]

    assert main([*report, "--parquet", "/nonexistent/dir/r.parquet"]) == 2
    assert capsys.readouterr().err.startswith("ldptel report: error: parquet: cannot write ")


def test_report_errors_are_one_line(redis_client: Any, redis_url: str, capsys: Any) -> None:
    assert main(["report", "nope", "--redis-url", redis_url]) == 2
    assert "unknown campaign" in capsys.readouterr().err
    register(redis_client, make_config())
    assert main(["report", "screens", "--redis-url", redis_url]) == 2
    assert "no data yet" in capsys.readouterr().err
    assert main(["report", "screens", "--window", "soon", "--redis-url", redis_url]) == 2
    assert "window" in capsys.readouterr().err
    far = ["--window", "99999999999999999"]
    assert main(["report", "screens", *far, "--redis-url", redis_url]) == 2
    assert "window: must be between 1970 and the year 9999" in capsys.readouterr().err
    assert main(["aggregator", "run", "--every", "0", "--redis-url", redis_url]) == 2
    capsys.readouterr()

    unwritable = ["--window", "2023-11-15", "--html", "/nonexistent/dir/r.html"]
    assert main(["report", "screens", *unwritable, "--redis-url", redis_url]) == 2
    assert capsys.readouterr().err == (
        "ldptel report: error: html: cannot write /nonexistent/dir/r.html: "
        "No such file or directory\n"
    )
    unwritable = ["--window", "2023-11-15", "--csv", "/nonexistent/dir/r.csv"]
    assert main(["report", "screens", *unwritable, "--redis-url", redis_url]) == 2
    assert capsys.readouterr().err.startswith("ldptel report: error: csv: cannot write ")

    assert main(["report", "screens", "--redis-url", "redis://127.0.0.1:1/0"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("ldptel report: error: Redis: ") and "127.0.0.1:1" in line


def test_report_finds_the_redis_of_a_collector_serving_in_this_directory(
    campaign: Any, redis_url: str, capsys: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.delenv("LDPTEL_REDIS_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".ldptel").mkdir()
    (tmp_path / ".ldptel" / "redis.url").write_text(redis_url + "\n")  # as `serve` writes it

    assert main(["aggregator", "run", "--once", "--quiet"]) == 0
    assert main(["report", campaign.name]) == 0
    assert "n = 3,000" in capsys.readouterr().out


def test_an_empty_window_says_not_enough_reports(
    campaign: Any, redis_url: str, capsys: Any
) -> None:
    assert main(["report", campaign.name, "--window", "2020-01-01", "--redis-url", redis_url]) == 0
    assert "not enough reports: n = 0" in capsys.readouterr().out


@pytest.mark.slow
def test_sigterm_stops_a_scheduled_worker_gracefully(campaign: Any, redis_url: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "ldptel.cli", "aggregator", "run", "--every", "1h",
         "--redis-url", redis_url],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    import redis

    client = redis.Redis.from_url(redis_url)

    def reported() -> bool:
        assert process.poll() is None, "the worker exited"
        return bool(client.exists(f"ldptel:report:{campaign.name}:{WINDOW}"))

    wait_for(reported, "the scheduled worker's first report")
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=scaled(60)) == 0
    assert "stopping" in process.stderr.read()  # type: ignore[union-attr]


@pytest.mark.slow
def test_the_demo_runs_end_to_end(tmp_path: Path) -> None:
    page = tmp_path / "demo.html"
    done = subprocess.run(
        [sys.executable, "-m", "ldptel.cli", "demo", "--n", "20000", "--html", str(page)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "n = 20,000" in done.stdout and "true" in done.stdout
    assert "home" in done.stdout and "<svg" in page.read_text()
    assert "users posting reports" in done.stderr  # progress per stage


@pytest.mark.slow
def test_the_demo_json_carries_true_counts(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ldptel.cli", "demo", "--n", "5000", "--oracle", "de",
         "--domain-size", "40", "--json", "--html", str(tmp_path / "d.html")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (report,) = from_json(done.stdout)["reports"]  # true_count is in the model
    assert report["oracle"] == "de" and len(report["items"]) == 40
    assert sum(item["true_count"] for item in report["items"]) == 5000


def test_a_reader_that_leaves_early_gets_no_traceback(campaign: Any, redis_url: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "ldptel.cli", "report", campaign.name, "--json",
         "--window", "2023-11-15", "--redis-url", redis_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # as `ldptel report ... | head -1` does after one line

    assert process.wait(timeout=60) == 141
    assert process.stderr.read() == b""
