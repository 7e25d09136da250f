"""A campaign's (epsilon, delta) lifetime budget: the ledger charges reports by optimal
composition (ldptel.client.lifetime) and refuses the first whose composition passes it; the
guarantee states the pure and the (epsilon, delta) figures of what it allows."""

from __future__ import annotations

import pytest

from ldptel.client import ledger, lifetime
from ldptel.client.accounting import composed_epsilon
from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import BudgetExhaustedError, ParameterError
from ldptel.client.guarantee import Budget, guarantee
from ldptel.client.ledger import LIFETIME, charge
from ldptel.client.statedb import open_state, transaction


def config_of(**changes: object) -> CampaignConfig:
    data = {"name": "c", "oracle": "de", "epsilon": 0.1, "domain": ["a", "b", "c"], **changes}
    return CampaignConfig.from_dict(data)


def test_a_lifetime_of_10_and_1e_6_allows_346_reports_of_0_1(collector, open_reporter):
    collector.campaign(epsilon=0.1, reports_per_window=400, lifetime_epsilon=10.0,
                       lifetime_delta=1e-6)  # fmt: skip
    reporter = open_reporter()
    for _ in range(346):  # adding epsilons would stop at 100
        reporter.report("colors", "red")
    with pytest.raises(BudgetExhaustedError) as refused:
        reporter.report("colors", "red")
    assert refused.value.field == "lifetime_epsilon"
    assert "(epsilon 10, delta 1e-06)" in str(refused.value)
    assert reporter.privacy_spent("colors").lifetime_epsilon == pytest.approx(34.6)


def test_several_epsilons_compose_and_the_first_report_past_the_budget_is_refused(tmp_path):
    conn = open_state(tmp_path, (ledger.SCHEMA, lifetime.SCHEMA))
    budget = Budget(10_000, 1e9, lifetime_epsilon=5.0, lifetime_delta=1e-6)
    accepted: list[float] = []
    costs = [0.1, 0.3] * 200
    for cost in costs:
        try:
            with transaction(conn):
                charge(conn, "c", 0, 60, cost, budget)
        except BudgetExhaustedError:
            break
        accepted.append(cost)
    counts = [(0.1, accepted.count(0.1)), (0.3, accepted.count(0.3))]
    assert composed_epsilon(counts, 1e-6) <= 5.0
    refused = costs[len(accepted)]
    more = [(e, k + (e == refused)) for e, k in counts]
    assert composed_epsilon(more, 1e-6) > 5.0
    assert sum(accepted) > 5.0  # past what adding epsilons allows
    assert ledger.spent(conn, "c", 0).lifetime_epsilon == pytest.approx(sum(accepted))


def test_reports_charged_before_a_delta_count_as_their_sum(tmp_path):
    conn = open_state(tmp_path, (ledger.SCHEMA, lifetime.SCHEMA))
    pure = Budget(10_000, 1e9, lifetime_epsilon=100.0)
    for _ in range(30):
        with transaction(conn):
            charge(conn, "c", 0, 60, 0.1, pure)
    with transaction(conn):
        charge(conn, "c", 0, 60, 0.1, Budget(10_000, 1e9, 100.0, lifetime_delta=1e-6))
    rows = sorted(conn.execute("SELECT epsilon, reports FROM ledger_charges"))
    assert rows == [(0.1, 1), (pytest.approx(3.0), 1)]
    assert conn.execute(
        "SELECT epsilon FROM ledger_windows WHERE window_start = ?", (LIFETIME,)
    ).fetchone() == (pytest.approx(3.1),)


def test_the_guarantee_states_both_lifetime_figures():
    promise = guarantee(config_of(lifetime_epsilon=10.0, lifetime_delta=1e-6))
    assert promise.lifetime_reports == 346 and promise.lifetime_delta == 1e-6
    assert promise.lifetime_epsilon == pytest.approx(34.6)  # by adding epsilons, delta 0
    assert promise.lifetime_composed_epsilon is not None
    assert 9.9 < promise.lifetime_composed_epsilon <= 10.0
    assert promise.accountant == lifetime.OPTIMAL
    assert "(9.99, 1e-06)-differentially private" in promise.statement
    assert "34.6-differentially private (delta 0)" in promise.statement
    # Without a delta the ledger adds epsilons, and the composed figure is stated beside it.
    plain = guarantee(config_of(lifetime_epsilon=10.0))
    assert (plain.lifetime_reports, plain.lifetime_epsilon) == (100, 10.0)
    assert plain.accountant == lifetime.BASIC and plain.lifetime_delta == lifetime.STATED_DELTA
    assert plain.lifetime_composed_epsilon == pytest.approx(composed_epsilon([(0.1, 100)], 1e-6))


def test_no_gain_from_epsilon_one_half():
    promise = guarantee(config_of(epsilon=0.5, lifetime_epsilon=10.0, lifetime_delta=1e-6))
    assert promise.lifetime_reports == 20  # = 10 / 0.5


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"lifetime_delta": 0}, r"in \(0, 1\)"),
        ({"lifetime_delta": 1.0}, r"in \(0, 1\)"),
        ({"lifetime_delta": True}, r"in \(0, 1\)"),
        ({"lifetime_delta": "1e-6"}, r"in \(0, 1\)"),
        ({"lifetime_delta": 1e-6, "memoization": "exact_discloses_changes"}, "afresh"),
    ],
)
def test_lifetime_delta_is_validated(changes, reason):
    with pytest.raises(ParameterError, match=reason) as refused:
        config_of(**changes)
    assert refused.value.field == "lifetime_delta"


def test_without_lifetime_delta_the_config_and_its_id_are_unchanged():
    config = config_of()
    assert "lifetime_delta" not in config.to_dict()
    assert config_of(lifetime_delta=1e-6).config_id != config.config_id
