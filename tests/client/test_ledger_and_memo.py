"""The privacy ledger refuses reports over the window's and the lifetime's budget (and says
which), charges every fresh report (the default), charges memoized values once only under the
opt-in exact memoization, and ledger and memo survive a restart."""

from __future__ import annotations

import math

import pytest
from live_collector import sent_reports

from ldptel.client import ReportStatus, guarantee, ledger, memo, spool
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import BudgetExhaustedError
from ldptel.client.guarantee import DEFAULT_LIFETIME_FACTOR, Budget
from ldptel.client.ledger import charge
from ldptel.client.memo import Randomizer
from ldptel.client.oracles.rappor import Rappor
from ldptel.client.statedb import open_state, transaction

LABELS = [f"item-{i}" for i in range(16)]


def test_reports_per_window_is_enforced(collector, open_reporter):
    collector.campaign(reports_per_window=2)
    reporter = open_reporter()
    assert reporter.report("colors", "red") and reporter.report("colors", "red")
    with pytest.raises(BudgetExhaustedError) as refused:
        reporter.report("colors", "red")
    assert refused.value.field == "window_reports"
    assert reporter.privacy_spent("colors").window_reports == 2
    assert reporter.stats()["spooled"] == 2  # the refused report left no trace


def test_by_default_a_spent_budget_is_a_status_and_a_log_line(collector, open_reporter, caplog):
    collector.campaign(reports_per_window=1)
    reporter = open_reporter(strict=False)
    assert reporter.report("colors", "red") is ReportStatus.SPOOLED
    with caplog.at_level("INFO", logger="ldptel.client"):
        assert reporter.report("colors", "green") is ReportStatus.BUDGET_EXHAUSTED
    assert "window_reports" in caplog.text and "green" not in caplog.text


def test_lifetime_budget_charges_every_report_and_survives_restart(
    collector, open_reporter, state_dir
):
    collector.campaign(reports_per_window=100, lifetime_epsilon=2.5)
    reporter = open_reporter()
    reporter.report("colors", "red")
    reporter.report("colors", "red")  # the same value again: a fresh randomization, charged
    assert reporter.privacy_spent("colors").lifetime_epsilon == pytest.approx(2.0)
    with pytest.raises(BudgetExhaustedError) as refused:
        reporter.report("colors", "red")  # a third would reach 3 > 2.5, whatever the value
    assert refused.value.field == "lifetime_epsilon"
    reporter.close(timeout=0)
    again = open_reporter()
    with pytest.raises(BudgetExhaustedError):
        again.report("colors", "green")
    assert again.privacy_spent("colors").lifetime_epsilon == pytest.approx(2.0)


def test_exact_memoization_counts_distinct_values_and_survives_restart(
    collector, open_reporter, state_dir
):
    collector.campaign(
        reports_per_window=100, lifetime_epsilon=2.5, memoization="exact_discloses_changes"
    )
    reporter = open_reporter()
    for _ in range(5):  # a memoized value: one epsilon, however often it is reported
        reporter.report("colors", "red")
    assert reporter.privacy_spent("colors").lifetime_epsilon == pytest.approx(1.0)
    reporter.report("colors", "green")
    with pytest.raises(BudgetExhaustedError) as refused:
        reporter.report("colors", "blue")  # a third randomization would reach 3 > 2.5
    assert refused.value.field == "lifetime_epsilon"
    reporter.close(timeout=0)
    again = open_reporter()
    with pytest.raises(BudgetExhaustedError):
        again.report("colors", "blue")
    assert again.report("colors", "green")  # still free: memoized
    assert again.privacy_spent("colors").lifetime_epsilon == pytest.approx(2.0)


def test_default_lifetime_budget_is_finite():
    config = CampaignConfig.from_dict(
        {"name": "c", "oracle": "de", "epsilon": 0.5, "domain": ["a", "b"]}
    )
    assert Budget.of(config).lifetime_epsilon == DEFAULT_LIFETIME_FACTOR * 0.5


def test_window_epsilon_is_enforced_across_configs(tmp_path):
    conn = open_state(tmp_path, (ledger.SCHEMA,))
    generous = Budget(reports_per_window=10, window_epsilon=3.0, lifetime_epsilon=100.0)
    tight = Budget(reports_per_window=10, window_epsilon=2.0, lifetime_epsilon=100.0)
    for _ in range(3):
        with transaction(conn):
            charge(conn, "c", 0, 60, 1.0, generous)
    with pytest.raises(BudgetExhaustedError) as refused, transaction(conn):
        charge(conn, "c", 0, 60, 0.5, tight)  # a new config mid-window with a lower budget
    assert refused.value.field == "window_epsilon"
    with transaction(conn):
        charge(conn, "c", 0, 60, 0.0, tight)  # a memoized report still fits
    assert ledger.spent(conn, "c", 0).window_epsilon == pytest.approx(3.0)


def olh_config(**changes):
    exact = {"memoization": "exact_discloses_changes"}
    return {"oracle": "olh", "domain": LABELS, "reports_per_window": 100, **exact, **changes}


def test_memoized_report_is_resent_identically_after_restart(collector, open_reporter):
    collector.campaign(**olh_config())
    first = open_reporter()
    first.report("colors", "item-3")
    first.report("colors", "item-7")
    assert first.flush(timeout=20)
    first.close()
    second = open_reporter()
    second.report("colors", "item-3")
    assert second.flush(timeout=20)
    batches = list(sent_reports(collector.faults.posted()).values())
    (item3_a, item7), (item3_b,) = batches
    assert item3_a == item3_b  # the same (seed, y): the memo, not a fresh draw
    assert item3_a != item7  # distinct values have independent randomizations
    assert second.privacy_spent("colors").lifetime_epsilon == pytest.approx(
        2 * second._configs.active["colors"].by_level[""].randomizer.oracle.epsilon
    )


def test_rappor_keeps_cohort_and_secret_and_charges_up_to_the_permanent_bound(tmp_path):
    config = CampaignConfig.from_dict(
        {
            "name": "r",
            "oracle": "rappor",
            "epsilon": 1.0743,
            "domain": LABELS,
            "memoization": "exact_discloses_changes",
        }
    )
    conn = open_state(tmp_path, (memo.SCHEMA, spool.SCHEMA))
    randomizer = Randomizer(config, conn, b"k" * 32)
    oracle = randomizer.oracle
    assert isinstance(oracle, Rappor)
    eps1, eps_inf = oracle.epsilon, oracle.permanent_epsilon
    costs = []
    for _ in range(6):
        with transaction(conn):
            report, cost = randomizer.spend(conn, 2)
        randomizer.committed(2, report)
        costs.append(cost)
    expected = [min(r * eps1, eps_inf) - min((r - 1) * eps1, eps_inf) for r in range(1, 7)]
    assert costs == pytest.approx(expected)
    assert sum(costs) == pytest.approx(eps_inf) and costs[-1] == 0.0
    reopened = Randomizer(config, open_state(tmp_path, ()), b"k" * 32)
    assert reopened._rappor is not None and randomizer._rappor is not None
    assert reopened._rappor.secret == randomizer._rappor.secret
    assert reopened._rappor.cohort == randomizer._rappor.cohort
    assert math.isfinite(eps_inf)


def test_memo_cost_rule_for_resent_reports(tmp_path):
    config = CampaignConfig.from_dict(
        {
            "name": "d",
            "oracle": "de",
            "epsilon": 1.0,
            "domain": LABELS,
            "memoization": "exact_discloses_changes",
        }
    )
    conn = open_state(tmp_path, (memo.SCHEMA,))
    randomizer = Randomizer(config, conn, b"k" * 32)
    draws = []
    for _ in range(3):
        with transaction(conn):
            report, cost = randomizer.spend(conn, 5)
        randomizer.committed(5, report)
        draws.append((report, cost))
    assert [cost for _, cost in draws] == pytest.approx([1.0, 0.0, 0.0])
    assert len({report for report, _ in draws}) == 1
    # A fresh process (no in-memory cache) finds the same memo on disk, and it costs
    # nothing more.
    again = Randomizer(config, conn, b"k" * 32)
    with transaction(conn):
        assert again.spend(conn, 5) == (draws[0][0], 0.0)


def test_default_mode_draws_every_report_afresh_and_charges_it(tmp_path):
    config = CampaignConfig.from_dict(
        {"name": "d", "oracle": "de", "epsilon": 1.0, "domain": LABELS}
    )
    conn = open_state(tmp_path, (memo.SCHEMA,))
    randomizer = Randomizer(config, conn, b"k" * 32)
    draws = []
    for _ in range(40):
        with transaction(conn):
            draws.append(randomizer.spend(conn, 5))
    assert [cost for _, cost in draws] == pytest.approx([1.0] * 40)
    # P[y = 5] = e/(e + 15) ~ 0.15 per draw: 40 equal draws would have probability ~1e-33.
    assert len({report for report, _ in draws}) > 1
    assert conn.execute("SELECT count(*) FROM memo").fetchone() == (0,)  # nothing stored


def test_the_sender_prunes_past_windows_but_keeps_the_lifetime_total(
    collector, open_reporter, state_dir
):
    collector.campaign(reports_per_window=10)
    conn = open_state(state_dir, (ledger.SCHEMA,))
    long_ago = 1_000_000  # a window that ended decades ago
    with transaction(conn):
        charge(conn, "colors", long_ago, 60, 1.0, Budget(10, 10.0, 10.0))
    reporter = open_reporter()
    assert reporter.report("colors", "red")
    reporter._sender._step()  # one round of the sender (which also runs in its thread)
    windows = conn.execute(
        "SELECT window_start FROM ledger_windows WHERE window_start != ?", (ledger.LIFETIME,)
    ).fetchall()
    assert (long_ago,) not in windows and len(windows) == 1  # this window's row stays
    assert reporter.privacy_spent("colors").lifetime_epsilon == pytest.approx(2.0)
    conn.close()


def test_lifetime_totals_of_an_older_state_dir_are_kept(collector, open_reporter, state_dir):
    collector.campaign(reports_per_window=10, lifetime_epsilon=2.5)
    old = open_state(state_dir, (ledger.SCHEMA,))
    with transaction(old):  # the lifetime table of the first release
        old.execute("CREATE TABLE ledger_lifetime (campaign TEXT PRIMARY KEY, epsilon REAL)")
        old.execute("INSERT INTO ledger_lifetime VALUES ('colors', 2.0)")
    old.close()
    reporter = open_reporter()
    assert reporter.privacy_spent("colors").lifetime_epsilon == pytest.approx(2.0)
    with pytest.raises(BudgetExhaustedError) as refused:
        reporter.report("colors", "red")  # 2 + 1 > 2.5
    assert refused.value.field == "lifetime_epsilon"
    tables = {name for (name,) in reporter._state.conn.execute("SELECT name FROM sqlite_master")}
    assert "ledger_lifetime" not in tables


def test_the_reporter_states_the_guarantee_its_ledger_enforces(collector, open_reporter):
    collector.campaign(reports_per_window=2, lifetime_epsilon=5.0)
    collector.campaign("memoized", memoization="exact_discloses_changes")
    reporter = open_reporter()
    sound = reporter.guarantee("colors")
    assert sound.holds_for == guarantee.ANY_HISTORIES and sound.discloses == ""
    assert (sound.window_epsilon, sound.lifetime_epsilon) == (2.0, 5.0)
    assert "between any two value histories" in sound.statement
    exact = reporter.guarantee("memoized")
    assert exact.holds_for == guarantee.SAME_PATTERN
    assert "exact_discloses_changes: the change pattern" in exact.statement
