"""The worker's sinks (aggregator/sinks/): the store first, then exports such as the Parquet
files per window, on a real redis-server and real aggregation passes. An export's files hold
`ldptel report NAME --window W --csv`'s rows, are never duplicated by a rerun, and an export
that fails costs the store nothing and is written on a later pass."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stream_entries import make_config, register, simulate

from ldptel.aggregator.metrics import AggregatorMetrics
from ldptel.aggregator.model import WindowDocument
from ldptel.aggregator.reports import load_window
from ldptel.aggregator.sinks import ParquetSink
from ldptel.aggregator.worker import Worker
from ldptel.cli.main import main
from ldptel.client.campaign import CampaignConfig
from ldptel.store import keys
from ldptel.store import reports as stored_reports

pq = pytest.importorskip("pyarrow.parquet")  # the test extra installs it
ds = pytest.importorskip("pyarrow.dataset")
WINDOWS = (1_700_006_400, 1_700_092_800)  # two consecutive days


def as_csv(value: object) -> str:
    """A Parquet cell as the CSV writes it: nulls empty, booleans lower case."""
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


def fill(client: Any, config: CampaignConfig, n: int, seed: int) -> None:
    """`n` reports in each of WINDOWS: a skewed categorical law or latencies in a range."""
    rng = np.random.default_rng(seed)
    for window in WINDOWS:
        if config.numeric:
            values = rng.uniform(0.0, 2000.0, n)
        else:
            values = rng.choice(8, size=n, p=[0.4, 0.2, 0.1, 0.1, 0.1, 0.1, 0, 0])
        simulate(client, config, values, window=window, batch_size=250, seed=seed + window)


@pytest.fixture
def campaigns(redis_client: Any) -> list[CampaignConfig]:
    """A categorical campaign on two shards and a numeric one, with reports in both WINDOWS."""
    configs = [
        make_config("screens", shards=2),
        make_config("latency", oracle="sw", range=[0.0, 2000.0]),
    ]
    for seed, config in enumerate(configs):
        register(redis_client, config)
        fill(redis_client, config, 1000, seed)
    return configs


def csv_rows(redis_url: str, name: str, window: int, capsys: Any) -> list[dict[str, str]]:
    """The rows `ldptel report NAME --window W --csv -` prints."""
    capsys.readouterr()
    assert (
        main(["report", name, "--window", str(window), "--csv", "-", "--redis-url", redis_url]) == 0
    )
    return list(csv.DictReader(io.StringIO(capsys.readouterr().out)))


def file_rows(path: Path) -> list[dict[str, str]]:
    return [{k: as_csv(v) for k, v in row.items()} for row in pq.read_table(path).to_pylist()]


def parquet_files(root: Path) -> list[str]:
    """Every file under root (hidden ones included), relative, sorted."""
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())


def test_each_windows_file_holds_the_csv_rows_of_that_window(
    redis_client: Any, redis_url: str, campaigns: list[CampaignConfig], tmp_path: Path, capsys: Any
) -> None:
    sink = ParquetSink(tmp_path / "exports")
    stats = Worker(redis_client, exports=[sink]).run_pass()
    assert (stats.reports_built, stats.export_failures) == (4, 0)
    assert parquet_files(sink.root) == [
        f"{config.name}/window_unix={window}/part-0.parquet"
        for config in sorted(campaigns, key=lambda c: c.name)
        for window in WINDOWS
    ]
    for config in campaigns:
        for window in WINDOWS:
            expected = csv_rows(redis_url, config.name, window, capsys)
            assert len(expected) >= 8  # every item of a categorical window; a mean and buckets
            assert file_rows(sink.path(config.name, window)) == expected
    for config in campaigns:  # one campaign's windows, read as pandas.read_parquet reads
        table = pq.read_table(sink.root / config.name)
        assert table.column_names[-1] == "window_unix"  # the hive partition, as a column
        assert sorted(set(table.column("window_unix").to_pylist())) == list(WINDOWS)
        assert set(table.column("campaign").to_pylist()) == {config.name}
    whole = ds.dataset(sink.root, partitioning="hive").to_table(filter=ds.field("n") > 0)
    assert whole.num_rows > 0 and "window_unix" in whole.column_names


def test_a_rerun_replaces_a_windows_file_and_never_adds_one(
    redis_client: Any, redis_url: str, campaigns: list[CampaignConfig], tmp_path: Path, capsys: Any
) -> None:
    sink = ParquetSink(tmp_path / "exports")
    worker = Worker(redis_client, exports=[sink])
    worker.run_pass()
    files = parquet_files(sink.root)
    screens = campaigns[0]
    simulate(redis_client, screens, np.zeros(500, dtype=int), window=WINDOWS[1], seed=99)
    stats = worker.run_pass()
    assert (stats.reports, stats.reports_built) == (500, 1)
    assert parquet_files(sink.root) == files  # replaced in place
    rows = file_rows(sink.path(screens.name, WINDOWS[1]))
    assert rows == csv_rows(redis_url, screens.name, WINDOWS[1], capsys)
    assert {row["n"] for row in rows} == {"1500"}
    # The same document delivered again (a retry after a crash) leaves the same files.
    document = load_window(redis_client, screens.name, WINDOWS[1])
    assert document is not None
    sink.write(document)
    sink.write(document)
    assert parquet_files(sink.root) == files
    assert file_rows(sink.path(screens.name, WINDOWS[1])) == rows
    assert Worker(redis_client, exports=[sink]).run_pass().reports_built == 0


def without_build_time(document: WindowDocument | None) -> dict[str, Any]:
    """A document but for when it and its reports were built (the document and each report
    carry built_at)."""
    assert document is not None
    reports = [
        {k: v for k, v in report.items() if k != "built_at"} for report in document["reports"]
    ]
    return {"campaign": document["campaign"], "window": document["window"], "reports": reports}


def test_a_failing_export_costs_the_store_nothing_and_is_written_later(
    redis_client: Any,
    reference_client: Any,
    redis_url: str,
    campaigns: list[CampaignConfig],
    tmp_path: Path,
    capsys: Any,
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the export directory should be")
    sink = ParquetSink(blocker / "exports")
    metrics = AggregatorMetrics(stale_seconds=60)
    stats = Worker(redis_client, exports=[sink], metrics=metrics).run_pass()
    assert (stats.reports, stats.reports_built, stats.export_failures) == (4000, 4, 4)
    failures = metrics.registry.get_sample_value(
        "ldptel_aggregator_export_failures_total", {"sink": sink.name}
    )
    assert failures == 4
    # The store holds what a worker without exports stores, once: same documents, version 1.
    for seed, config in enumerate(campaigns):
        register(reference_client, config)
        fill(reference_client, config, 1000, seed)
    Worker(reference_client).run_pass()
    for config in campaigns:
        for window in WINDOWS:
            assert without_build_time(load_window(redis_client, config.name, window)) == (
                without_build_time(load_window(reference_client, config.name, window))
            )
        assert stored_reports.versions(redis_client, config.name) == dict.fromkeys(WINDOWS, 1)
    backlog = {m.decode() for m in redis_client.smembers(keys.export_backlog(sink.name))}
    assert backlog == {f"{c.name}:{w}" for c in campaigns for w in WINDOWS}
    # Still failing: retried from the backlog, nothing rebuilt, aggregation goes on.
    simulate(redis_client, campaigns[0], np.ones(300, dtype=int), window=WINDOWS[0], seed=7)
    stats = Worker(redis_client, exports=[sink]).run_pass()
    assert (stats.reports, stats.reports_built, stats.export_failures) == (300, 1, 4)
    assert stored_reports.versions(redis_client, campaigns[0].name)[WINDOWS[0]] == 2
    # Fixed: the next pass writes every owed window from its stored document.
    blocker.unlink()
    stats = Worker(redis_client, exports=[sink]).run_pass()
    assert (stats.reports_built, stats.exports_redelivered, stats.export_failures) == (0, 4, 0)
    assert redis_client.scard(keys.export_backlog(sink.name)) == 0
    for config in campaigns:
        for window in WINDOWS:
            expected = csv_rows(redis_url, config.name, window, capsys)
            assert file_rows(sink.path(config.name, window)) == expected
        assert stored_reports.versions(redis_client, config.name)[WINDOWS[1]] == 1


class Killed(BaseException):
    """A worker killed after the store saved a window, before its export wrote it."""


def test_a_worker_killed_between_the_store_and_the_export_leaves_the_window_owed(
    redis_client: Any, redis_url: str, campaigns: list[CampaignConfig], tmp_path: Path, capsys: Any
) -> None:
    sink = ParquetSink(tmp_path / "exports")

    class DiesBeforeWriting:
        name = sink.name

        def write(self, document: WindowDocument) -> None:
            raise Killed

    with pytest.raises(Killed):
        Worker(redis_client, exports=[DiesBeforeWriting()]).run_pass()
    assert redis_client.scard(keys.export_backlog(sink.name)) == 1
    assert not sink.root.exists()
    stats = Worker(redis_client, exports=[sink]).run_pass()
    assert stats.exports_redelivered == 1  # the killed one's window; the others built anew
    assert stats.reports_built == 3
    for config in campaigns:
        for window in WINDOWS:
            expected = csv_rows(redis_url, config.name, window, capsys)
            assert file_rows(sink.path(config.name, window)) == expected


def test_an_owed_window_whose_stored_report_no_longer_reads_is_dropped(
    redis_client: Any, tmp_path: Path, caplog: Any
) -> None:
    sink = ParquetSink(tmp_path)
    stored_reports.save(redis_client, "old", WINDOWS[0], b'{"campaign": "old"}')
    redis_client.sadd(keys.export_backlog(sink.name), f"old:{WINDOWS[0]}")
    stats = Worker(redis_client, exports=[sink]).run_pass()  # does not raise
    assert (stats.exports_redelivered, stats.export_failures) == (0, 0)
    assert redis_client.scard(keys.export_backlog(sink.name)) == 0
    assert "stored report cannot be read" in caplog.text
    assert parquet_files(tmp_path) == []


def test_a_window_without_rows_has_no_file(redis_client: Any, tmp_path: Path) -> None:
    config = make_config("sparse")
    register(redis_client, config)
    simulate(redis_client, config, np.zeros(20, dtype=int), window=WINDOWS[0])  # < min_reports
    sink = ParquetSink(tmp_path)
    assert Worker(redis_client, exports=[sink]).run_pass().reports_built == 1
    assert parquet_files(tmp_path) == []


def test_the_cli_exports_from_the_flag_or_the_environment(
    redis_client: Any,
    redis_url: str,
    campaigns: list[CampaignConfig],
    tmp_path: Path,
    capsys: Any,
    monkeypatch: Any,
) -> None:
    run = ["aggregator", "run", "--once", "--quiet", "--json", "--redis-url", redis_url]
    monkeypatch.setenv("LDPTEL_AGGREGATOR_PARQUET_DIR", str(tmp_path / "from-env"))
    assert main(run) == 0
    totals = json.loads(capsys.readouterr().out)
    assert (totals["reports_built"], totals["export_failures"]) == (4, 0)
    assert len(parquet_files(tmp_path / "from-env")) == 4
    simulate(redis_client, campaigns[1], np.full(300, 5.0), window=WINDOWS[0], seed=3)
    assert main([*run, "--parquet-dir", str(tmp_path / "from-flag")]) == 0  # the flag wins
    assert json.loads(capsys.readouterr().out)["reports_built"] == 1
    assert parquet_files(tmp_path / "from-flag") == [
        f"latency/window_unix={WINDOWS[0]}/part-0.parquet"
    ]
