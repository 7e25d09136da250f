"""Memoized randomization: a value reported again reuses its permanent randomization.

Two kinds, per oracle (the longitudinal bounds are in docs/client.md):

- Full RAPPOR keeps its own design (Erlingsson et al., CCS 2014): the permanent randomized
  response is derived from HMAC(secret, value) with a secret and cohort per client and
  config, persisted here; every report draws a fresh instantaneous randomized response. The
  r-th report of one value costs min(r eps_1, eps_inf) - min((r-1) eps_1, eps_inf).
- Every other oracle memoizes its whole perturbed report per (config, value) and resends
  the same bytes (the exact, simplest form of Ding, Kulkarni, Yekhanin, NeurIPS 2017): an
  observer of any number of reports sees one randomized report per distinct value, so the
  first report of a value costs eps and each repeat costs nothing.

Both fit one rule, with eps_1 = eps_inf = eps for the resent reports: the next report of a
value costs min(spent + eps_1, eps_inf) - spent, where `spent` is persisted per value.
Memo keys are keyed hashes of (config id, privacy level, value index), so the state file
holds no label in clear; the memo is never sent. A user who changes privacy level gets fresh,
independent randomizations at the new level's epsilon (and the ledger charges them): reusing
the old level's report would break the new level's promise, and a report correlated with it
would not compose (docs/personalized-privacy.md).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3

import numpy as np

from ldptel.client.campaign import CampaignConfig
from ldptel.client.errors import ParameterError
from ldptel.client.oracles import FrequencyOracle
from ldptel.client.oracles.base import WireReport
from ldptel.client.oracles.rappor import Rappor, RapporClient
from ldptel.client.randomness import SecureRandom
from ldptel.client.statedb import transaction

#: Domains up to this size get every value's memo drawn ahead, in one vectorized batch, when
#: the config is loaded; a draw becomes the memo only when its value is first reported.
PREDRAW_MAX = 4096

SCHEMA = """
CREATE TABLE IF NOT EXISTS memo (key BLOB PRIMARY KEY, report TEXT, spent REAL NOT NULL)
  WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rappor_clients (
  config_id TEXT PRIMARY KEY, secret BLOB NOT NULL, cohort INTEGER NOT NULL
) WITHOUT ROWID;
"""


_INSERT_NEW = "INSERT OR IGNORE INTO memo VALUES (?, ?, ?)"
_SELECT = "SELECT report, spent FROM memo WHERE key = ?"
_ADD_SPENT = "UPDATE memo SET spent = spent + ? WHERE key = ?"


def wire_json(report: WireReport) -> str:
    """A wire report as compact JSON (what the spool stores and the sender concatenates)."""
    return json.dumps(report, separators=(",", ":"))


class Randomizer:
    """One config's oracle at one privacy level ("" = the config has none) with this
    client's memo (call its methods under the state lock)."""

    def __init__(
        self,
        config: CampaignConfig,
        conn: sqlite3.Connection,
        memo_secret: bytes,
        level: str = "",
    ) -> None:
        oracle = config.level_oracle(level)
        if oracle is None:
            raise ParameterError("level", f"{level!r} does not report under this config")
        self.config = config
        self.config_id = config.config_id
        self.level = level
        #: What memo keys and RAPPOR's client secret are per: the config, and the level.
        self._scope = f"{self.config_id}:{level}" if level else self.config_id
        self.oracle: FrequencyOracle = oracle
        #: BLAKE2b keyed with the memo secret, copied per key (keying once saves a block).
        self._keyed = hashlib.blake2b(key=memo_secret, digest_size=16)
        self._rng = SecureRandom()
        self._final: dict[int, str] = {}  # values whose memo can never change again
        self._candidates: list[str] | None = None
        self._rappor: RapporClient | None = None
        if isinstance(self.oracle, Rappor):
            self.per_report = self.oracle.epsilon
            self.permanent = self.oracle.permanent_epsilon
            self._rappor = _rappor_client(conn, self.oracle, self._scope)
        else:
            self.per_report = self.permanent = self.oracle.epsilon
            if config.domain_size <= PREDRAW_MAX:
                self.predraw()

    def predraw(self) -> None:
        """Draw a candidate memo for every value (forgotten after a fork; see `forget`)."""
        batch = self.oracle.perturb_batch(np.arange(self.config.domain_size), self._rng)
        self._candidates = [wire_json(report) for report in self.oracle.encode(batch)]

    def forget_candidates(self) -> None:
        self._candidates = None

    def key(self, index: int) -> bytes:
        keyed = self._keyed.copy()  # = blake2b(message, key=memo_secret, digest_size=16)
        keyed.update(f"{self._scope}:{index}".encode("ascii"))
        return keyed.digest()

    def spend(self, conn: sqlite3.Connection, index: int) -> tuple[str, float]:
        """The report to send for value `index` and the epsilon it costs, with its memo
        written (inside the caller's transaction, which charges the ledger that cost; call
        `committed` after COMMIT)."""
        final = self._final.get(index)
        if final is not None:
            return final, 0.0
        key = self.key(index)
        if self._candidates is not None:  # most likely a new memo: one statement, no read
            report = self._candidates[index]  # costs per_report = permanent, its whole bound
            if conn.execute(_INSERT_NEW, (key, report, self.per_report)).rowcount:
                return report, self.per_report
            # else drawn before (an earlier run, another process): read it below
        row = conn.execute(_SELECT, (key,)).fetchone()
        spent = 0.0 if row is None else float(row[1])
        if self._rappor is not None:
            report = wire_json(self._rappor.report(index, self._rng))
        elif row is not None:
            report = str(row[0])
        else:
            report = self._fresh(index)
        cost = max(min(spent + self.per_report, self.permanent) - spent, 0.0)
        if row is None:
            stored = None if self._rappor is not None else report
            conn.execute(_INSERT_NEW, (key, stored, cost))
        elif cost > 0.0:
            conn.execute(_ADD_SPENT, (cost, key))
        return report, cost

    def committed(self, index: int, report: str) -> None:
        """After COMMIT: a value whose bound is reached resends its memo from memory."""
        if self._rappor is None:
            self._final[index] = report

    def _fresh(self, index: int) -> str:
        if self._candidates is not None:
            return self._candidates[index]
        return wire_json(self.oracle.perturb(index, self._rng))


def _rappor_client(conn: sqlite3.Connection, oracle: Rappor, scope: str) -> RapporClient:
    """This client's RAPPOR secret and cohort for one config and level (`scope`, stored in
    the config_id column), created once, then persisted."""
    fresh = RapporClient.create(oracle)
    with transaction(conn):
        conn.execute(
            "INSERT OR IGNORE INTO rappor_clients VALUES (?, ?, ?)",
            (scope, fresh.secret, fresh.cohort),
        )
        secret, cohort = conn.execute(
            "SELECT secret, cohort FROM rappor_clients WHERE config_id = ?", (scope,)
        ).fetchone()
    return RapporClient(oracle, bytes(secret), int(cohort))
