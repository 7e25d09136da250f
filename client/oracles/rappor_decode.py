"""Decoding full RAPPOR against a candidate list (the analyst's side of the protocol; numpy
only, like every other oracle's estimate, so the decode in docs/protocol.md needs no extra).

As Google's analysis does (Erlingsson et al. 2014, Sec. 4): unbiased counts of set Bloom bits
per (cohort, bit), a linear model over the candidates' Bloom patterns, a fit (least squares
when every candidate is identifiable, else non-negative after a LASSO selection), standard
errors, and a multiple-testing-corrected significance test per candidate. Every step, with
its constants, is in docs/protocol.md ("rappor", "Aggregation").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray


class Rappor(Protocol):
    """What decoding needs of a RAPPOR oracle (ldptel.client.oracles.rappor.Rappor): its
    sizes, the IRR-and-PRR probabilities of a reported bit, the candidates' Bloom design and
    the per-bit estimates. A protocol, so this module does not import the oracle's."""

    @property
    def domain_size(self) -> int: ...
    @property
    def k(self) -> int: ...
    @property
    def m(self) -> int: ...
    @property
    def p_star(self) -> float: ...
    @property
    def q_star(self) -> float: ...
    def design(self) -> NDArray[np.float64]: ...
    def bit_estimates(
        self, support: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]: ...


@dataclass(frozen=True)
class RapporFit:
    """The decoded counts of the candidates, and how sure the fit is of each.

    `least_squares`: every candidate was identifiable and fitted by ordinary least squares
    (unbiased, may be negative; its stderr is the repetition standard deviation within a few
    percent). Otherwise (`lasso`, or a design that cannot separate the candidates) the fit is
    non-negative (NNLS): 0 for candidates it did not select, biased towards 0 near it, and its
    stderr, conditional on the selection, is not calibrated.
    `estimate` is the fitted count, `stderr` its standard error (NaN if not selected),
    `pvalue` the one-sided p-value of "count > 0" (1 if not selected), `significant` whether
    it passes the Bonferroni-corrected level. Candidates that are not significant keep their
    fitted estimate: they are reported as not significant, not as zero.
    """

    estimate: NDArray[np.float64]
    stderr: NDArray[np.float64]
    pvalue: NDArray[np.float64]
    significant: NDArray[np.bool_]
    selected: NDArray[np.bool_]
    n: int
    alpha: float
    lasso: bool
    least_squares: bool


#: FISTA iterations of the non-negative LASSO (a selection step, refitted by NNLS after).
LASSO_ITERATIONS = 400


def _largest_eigenvalue(matrix: NDArray[np.float64], rng: np.random.Generator) -> float:
    """||X||_2^2 by power iteration on X'X (enough for a FISTA step size)."""
    vector: NDArray[np.float64] = np.asarray(rng.random(matrix.shape[1]) + 0.1)
    value = 0.0
    for _ in range(50):
        image = matrix.T @ (matrix @ vector)
        value = float(np.linalg.norm(image))
        if value == 0.0:
            return 0.0
        vector = np.asarray(image / value, dtype=np.float64)
    return value


def nonnegative_lasso(
    matrix: NDArray[np.float64], target: NDArray[np.float64], penalty: NDArray[np.float64]
) -> NDArray[np.float64]:
    """argmin_{x >= 0} ||X x - y||^2 / 2 + penalty . x by FISTA (Beck & Teboulle 2009)."""
    lipschitz = 1.01 * _largest_eigenvalue(matrix, np.random.default_rng(0))
    x = np.zeros(matrix.shape[1])
    if lipschitz == 0.0:
        return x
    z, t = x, 1.0
    # With fewer candidates than rows, X'X (d x d) makes each gradient one small product.
    rows, columns = matrix.shape
    gram = matrix.T @ matrix if columns <= rows else None
    correlation = matrix.T @ target
    for _ in range(LASSO_ITERATIONS):
        gradient = (
            gram @ z - correlation if gram is not None else matrix.T @ (matrix @ z) - correlation
        )
        x_next = np.maximum(0.0, z - (gradient + penalty) / lipschitz)
        t_next = (1 + math.sqrt(1 + 4 * t * t)) / 2
        z = x_next + ((t - 1) / t_next) * (x_next - x)
        x, t = x_next, t_next
    return x


def nnls(
    matrix: NDArray[np.float64], target: NDArray[np.float64], maxiter: int
) -> NDArray[np.float64]:
    """argmin ||A x - b|| over x >= 0 by Lawson and Hanson's active-set method ("Solving Least
    Squares Problems", 1974, Ch. 23), the algorithm of scipy.optimize.nnls."""
    columns = matrix.shape[1]
    x = np.zeros(columns)
    passive = np.zeros(columns, dtype=bool)
    tolerance = 10 * np.finfo(np.float64).eps * np.abs(matrix).sum(axis=0).max() * max(matrix.shape)
    gradient = matrix.T @ target
    steps = 0
    while not passive.all() and (gradient[~passive] > tolerance).any():
        passive[np.argmax(np.where(passive, -np.inf, gradient))] = True
        while True:  # the inner loop drops variables until the passive set's fit is positive
            steps += 1
            if steps > maxiter:
                raise RuntimeError("NNLS did not converge")
            trial = np.zeros(columns)
            trial[passive] = np.linalg.lstsq(matrix[:, passive], target, rcond=None)[0]
            if not passive.any() or trial[passive].min() > 0:
                x = trial
                break
            negative = passive & (trial <= 0)
            step = np.min(x[negative] / (x[negative] - trial[negative]))
            x += step * (trial - x)
            passive &= x > tolerance
            x[~passive] = 0.0
        gradient = matrix.T @ (target - matrix @ x)
    return x


def normal_sf(z: NDArray[np.float64]) -> NDArray[np.float64]:
    """P[N(0, 1) > z], elementwise (nan stays nan)."""
    return np.asarray([0.5 * math.erfc(value / math.sqrt(2)) for value in np.ravel(z)]).reshape(
        np.shape(z)
    )


def fit_candidates(
    oracle: Rappor, support: NDArray[np.int64], alpha: float, lasso: bool | None
) -> RapporFit:
    """See Rappor.fit."""
    if not 0 < alpha < 1:
        raise ValueError("alpha must be in (0, 1)")
    d = oracle.domain_size
    counts, variances, reports = oracle.bit_estimates(support)
    n = int(reports.sum())
    estimate, stderr = np.zeros(d), np.full(d, np.nan)
    pvalue, selected = np.ones(d), np.zeros(d, dtype=bool)
    use_lasso = d > oracle.m * oracle.k // 4 if lasso is None else lasso
    active = np.flatnonzero(reports > 0)
    least_squares = False
    if n > 0:
        # Rows (c, j) of cohorts with reports: E[t~_cj] = sum_v B_cjv x_v N_c / n, where x_v
        # is v's count (cohorts are uniform and independent of the value). Each row is divided
        # by sqrt(N_c s0), s0 the largest per-report variance of a bit, so its noise sd <= 1.
        gap = oracle.q_star - oracle.p_star
        s0 = max(oracle.p_star * (1 - oracle.p_star), oracle.q_star * (1 - oracle.q_star))
        s0 /= gap**2
        n_c = reports[active].astype(np.float64)
        scale = np.repeat(np.sqrt(n_c * s0), oracle.k)
        rows = (active[:, None] * oracle.k + np.arange(oracle.k)).reshape(-1)
        matrix = oracle.design()[rows] * (np.repeat(n_c, oracle.k) / n / scale)[:, None]
        target = counts[active].reshape(-1) / scale
        noise = variances[active].reshape(-1) / scale**2
        least_squares = not use_lasso and np.linalg.matrix_rank(matrix) == d
        if least_squares:
            # Every candidate identifiable: the ordinary least-squares fit, unbiased, whose
            # sandwich covariance is the repetition variance (benchmarks/rappor_calibration.py).
            chosen = np.arange(d)
            estimate = np.linalg.lstsq(matrix, target, rcond=None)[0]
        else:
            chosen, estimate = _nonnegative_fit(matrix, target, use_lasso)
        if chosen.size:
            # The fit is least squares on `chosen` (NNLS is, on its positive set): covariance
            # G^+ X' diag(noise) X G^+ with G = X'X (plug-in bit variances, a sandwich).
            columns = matrix[:, chosen]
            gram_inverse = np.linalg.pinv(columns.T @ columns)
            spread = gram_inverse @ (columns.T * noise) @ columns @ gram_inverse
            stderr[chosen] = np.sqrt(np.maximum(np.diag(spread), 0.0))
            with np.errstate(divide="ignore", invalid="ignore"):
                pvalue[chosen] = normal_sf(estimate[chosen] / stderr[chosen])
            pvalue[np.isnan(pvalue)] = 1.0
            selected[chosen] = True
    return RapporFit(
        estimate=estimate,
        stderr=stderr,
        pvalue=pvalue,
        significant=pvalue < alpha / d,
        selected=selected,
        n=n,
        alpha=alpha,
        lasso=use_lasso,
        least_squares=least_squares,
    )


def _nonnegative_fit(
    matrix: NDArray[np.float64], target: NDArray[np.float64], use_lasso: bool
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """(candidates with a positive fit, fitted counts: 0 elsewhere) of the non-negative
    fit: NNLS, after a non-negative LASSO selection if `use_lasso`."""
    d = matrix.shape[1]
    candidates = np.arange(d)
    if use_lasso:
        # Universal threshold: a candidate with no reports enters only if its correlation
        # with the residual beats sqrt(2 ln d) noise standard deviations.
        penalty = math.sqrt(2 * math.log(max(d, 2))) * np.linalg.norm(matrix, axis=0)
        candidates = np.flatnonzero(nonnegative_lasso(matrix, target, penalty) > 0)
    estimate = np.zeros(d)
    if candidates.size:
        estimate[candidates] = nnls(matrix[:, candidates], target, maxiter=50 * candidates.size)
    return np.flatnonzero(estimate > 0), estimate


def design_variance(
    oracle: Rappor, n: int, frequencies: NDArray[np.float64] | None
) -> NDArray[np.float64]:
    """See Rappor.variance: least squares on all candidates, N_c = n/m, per-bit variance from
    the true frequencies (cohort-assignment noise, a few percent at the defaults, ignored)."""
    d, m = oracle.domain_size, oracle.m
    if d > m * oracle.k:
        return np.full(d, np.inf)
    design = oracle.design()
    f = np.zeros(d) if frequencies is None else np.asarray(frequencies, dtype=np.float64)
    # P[true Bloom bit (c, j) set] = sum_v B_cjv f_v; per-report variance of t~ on that bit.
    set_probability = np.clip(design @ f, 0.0, 1.0)
    gap = oracle.q_star - oracle.p_star
    per_report = (
        set_probability * oracle.q_star * (1 - oracle.q_star)
        + (1 - set_probability) * oracle.p_star * (1 - oracle.p_star)
    ) / gap**2
    matrix = design / m  # E[t~_cj] = sum_v B_cjv x_v / m
    gram = matrix.T @ matrix
    if np.linalg.matrix_rank(gram) < d:
        return np.full(d, np.inf)
    gram_inverse = np.linalg.inv(gram)
    spread = gram_inverse @ (matrix.T * (per_report * n / m)) @ matrix @ gram_inverse
    return np.asarray(np.diag(spread), dtype=np.float64)


def alone_variance(oracle: Rappor, n: int) -> NDArray[np.float64]:
    """Per candidate, the least-squares variance of its count under f = 0 were it the only
    candidate: finite when `design_variance` is not (more candidates than m·k bits), and a
    lower bound on the null spread of a candidate the selection leaves at 0 (the LASSO path's
    stderrs are not calibrated anyway: the report says so)."""
    # One column a_v = B_v / m with iid per-bit noise w = n/m · p*(1-p*)/(q*-p*)^2 at f = 0:
    # Var = w / (a_v . a_v) = w m^2 / (bits of v over all cohorts).
    gap = oracle.q_star - oracle.p_star
    weight = n / oracle.m * oracle.p_star * (1 - oracle.p_star) / gap**2
    bits = oracle.design().sum(axis=0)
    return np.asarray(weight * oracle.m**2 / bits, dtype=np.float64)
