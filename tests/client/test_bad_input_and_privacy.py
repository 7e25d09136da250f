"""Bad input gets a clear exception at the call site; a collector that is down or answers
garbage never raises into the app; only perturbed data reaches the disk and the wire; the
client imports nothing of the server side; the spool stays bounded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from live_collector import stored_reports
from waiting import wait_for

from ldptel.client import spool
from ldptel.client.errors import (
    CampaignUnavailableError,
    InvalidValueError,
    LdptelError,
    ReporterClosedError,
    UnknownCampaignError,
    ValueTypeError,
)
from ldptel.client.statedb import open_state, transaction

#: Labels distinctive enough that finding their bytes anywhere means a leak.
SECRETS = ["zebra-unicorn-4471", "quokka-narwhal-9923", "axolotl-pangolin-5518"]


def test_unknown_campaign_bad_value_wrong_type_closed(collector, open_reporter):
    collector.campaign()
    reporter = open_reporter()
    with pytest.raises(UnknownCampaignError, match="does not know 'nope'"):
        reporter.report("nope", "red")
    with pytest.raises(UnknownCampaignError):
        reporter.report("Not A Name!", "red")
    with pytest.raises(InvalidValueError, match="not in the domain"):
        reporter.report("colors", "purple")
    with pytest.raises(ValueTypeError) as wrong_type:
        reporter.report("colors", 3)
    assert isinstance(wrong_type.value, TypeError) and isinstance(wrong_type.value, LdptelError)
    reporter.close()
    with pytest.raises(ReporterClosedError):
        reporter.report("colors", "red")


def test_out_of_domain_values_map_to_the_declared_other_bucket(
    collector, redis_client, open_reporter
):
    config = collector.campaign(
        domain=["red", "green", "other"],
        other_label="other",
        reports_per_window=10,
        memoization="exact_discloses_changes",
    )
    reporter = open_reporter()
    assert reporter.report("colors", "purple") and reporter.report("colors", "other")
    assert reporter.flush(timeout=20)
    first, second = stored_reports(redis_client, config)
    assert first == second  # "purple" was reported as the memoized "other" (exact resend)
    assert reporter.privacy_spent("colors").lifetime_epsilon == pytest.approx(1.0)


def test_offline_start_uses_the_cached_config(collector, open_reporter):
    collector.campaign(reports_per_window=10)
    open_reporter().report("colors", "red")
    collector.stop()
    offline = open_reporter()  # a new process, same state_dir, no network
    assert offline.report("colors", "green")
    assert offline.stats()["spooled"] == 2


def test_no_config_yet_and_collector_down_or_garbage(collector, open_reporter, state_dir):
    collector.campaign()
    collector.faults.config_plan = ["garbage"]
    reporter = open_reporter(backoff_base=60.0)
    with pytest.raises(CampaignUnavailableError, match="invalid"):
        reporter.report("colors", "red")
    # Within the backoff the next calls fail at once, without a request (an app offline from
    # its first start is not blocked `timeout` seconds in every report()).
    with pytest.raises(CampaignUnavailableError, match=r"invalid.*asking again in"):
        reporter.report("colors", "red")
    fetches = [s for s in collector.faults.seen if s.path == "/v1/campaigns/colors"]
    assert len(fetches) == 1
    reporter._configs.unavailable["colors"] = (0.0, 1, "")  # the backoff has passed
    assert reporter.report("colors", "red")  # the next fetch is fine
    collector.stop()
    fresh = open_reporter(state_dir=state_dir.parent / "elsewhere")
    with pytest.raises(CampaignUnavailableError, match="network"):
        fresh.report("colors", "red")


def test_the_sender_survives_unexpected_errors(collector, redis_client, open_reporter, caplog):
    config = collector.campaign(reports_per_window=10)
    reporter = open_reporter()
    real_post = reporter._transport.post_batch
    calls = []

    def broken_once(*args):
        calls.append(args)
        if len(calls) == 1:
            raise RuntimeError("a bug")
        return real_post(*args)

    reporter._transport.post_batch = broken_once
    reporter.report("colors", "red")
    assert reporter.flush(timeout=30)
    assert "unexpected error" in caplog.text and len(calls) == 2
    assert len(stored_reports(redis_client, config)) == 1


def test_only_perturbed_reports_reach_disk_and_wire(collector, open_reporter, state_dir):
    for name, oracle in (("colors", "olh"), ("shapes", "de"), ("tiles", "rappor")):
        collector.campaign(name, oracle=oracle, domain=SECRETS, reports_per_window=10)
    reporter = open_reporter(batch_size=100)
    for name in ("colors", "shapes", "tiles"):
        for label in SECRETS:
            reporter.report(name, label)
    reporter._sender.checkpoint()
    state_bytes = b"".join(
        path.read_bytes()
        for path in state_dir.iterdir()
        if path.is_file()  # the state database and its WAL; configs/ holds the public domain
    )
    assert reporter.stats()["spooled"] == 9
    assert reporter.flush(timeout=20)
    bodies = b"".join(seen.body for seen in collector.faults.posted())
    assert len(collector.faults.posted()) == 3
    for label in SECRETS:
        for encoding in ("utf-8", "utf-16-le", "utf-16-be"):
            needle = label.encode(encoding)
            assert needle not in state_bytes, label
            assert needle not in bodies, label
    # ... and the search itself works: the public config cache does name them.
    assert SECRETS[0].encode() in (state_dir / "configs" / "colors.json").read_bytes()


def test_import_ldptel_client_loads_no_server_side():
    code = (
        "import sys, ldptel.client, ldptel.client.reporter; "
        "from ldptel.client import Reporter; "
        "print(sorted(m for m in ('flask', 'werkzeug', 'redis', 'scipy', 'gunicorn') "
        "if m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


def test_the_spool_drops_the_oldest_windows_first(tmp_path: Path):
    conn = open_state(tmp_path, (spool.SCHEMA,))
    with transaction(conn):
        for i in range(30):  # windows 2, 1, 0 (newest first), 10 reports each
            spool.append(conn, "c", "0123456789abcdef", (2 - i // 10) * 60, 0.0, f'{{"y":{i}}}')
    assert spool.enforce_bounds(conn, max_rows=15, max_bytes=1 << 30, max_dead_letters=10) == 15
    windows = [w for (w,) in conn.execute("SELECT window_start FROM spool")]
    assert sorted(windows) == [60] * 5 + [120] * 10
    assert dict(conn.execute("SELECT name, value FROM counters"))["dropped"] == 15


def test_the_wal_stays_bounded_offline_and_is_truncated(collector, open_reporter, state_dir):
    """Offline, nothing is sent, yet report() keeps committing: the sender must still
    checkpoint and truncate the WAL, or the file grows by every report (~2.5 KB each)."""
    from ldptel.client import sender as sender_module
    from ldptel.client import statedb

    collector.campaign(reports_per_window=100_000)
    open_reporter().report("colors", "red")  # caches the config
    collector.stop()
    limit, every = 64 * 1024, 50
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(statedb, "WAL_LIMIT", limit)
        patch.setattr(sender_module, "CHECKPOINT_EVERY", every)
        offline = open_reporter(batch_size=5000)
        for i in range(2000):  # ~5 MB of WAL if it were never truncated
            offline.report("colors", ["red", "green", "blue"][i % 3])
        wal = state_dir / f"{statedb.FILENAME}-wal"
        bound = limit + 2 * every * 4096  # the limit, plus commits between two checkpoints
        wait_for(lambda: wal.stat().st_size <= bound, f"the WAL back under {bound} bytes")
    assert offline.stats()["spooled"] == 2001


def test_checkpoint_truncates_a_large_wal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from ldptel.client import statedb

    writer = open_state(tmp_path, (spool.SCHEMA,))
    checkpointer = open_state(tmp_path, ())
    wal = tmp_path / f"{statedb.FILENAME}-wal"
    for i in range(300):
        with transaction(writer):
            spool.append(writer, "c", "0123456789abcdef", 0, 0.0, f'{{"y":{i}}}')
    grown = wal.stat().st_size
    statedb.checkpoint(checkpointer, tmp_path)  # below the limit: copied, not truncated
    assert wal.stat().st_size == grown
    monkeypatch.setattr(statedb, "WAL_LIMIT", grown // 2)
    statedb.checkpoint(checkpointer, tmp_path)
    assert wal.stat().st_size == 0
    assert spool.rows(writer) == 300
