"""What a report sends, and the epsilon the ledger charges for it, per memoization mode.

The campaign's `memoization` chooses (docs/client.md, "Longitudinal privacy"):

- "none", the default: every report is a fresh draw of the oracle's law from the OS CSPRNG
  (RAPPOR: a fresh PRR and IRR, its one-report law eps_1), charged its epsilon. Nothing is
  reused, so the reports of one install are independent given its value history and, by
  sequential composition (Dwork & Roth 2014, Thm. 3.16), any two histories of T reports are
  at most the sum of the charges apart. The charge depends only on the oracle and the privacy
  level (both public), so a refusal by the ledger reveals nothing about the values.
- "exact_discloses_changes", an explicit opt-in with a weaker promise: a value's report is
  drawn once per (config, level, value) and resent (the exact memoization of Ding,
  Kulkarni, Yekhanin, NeurIPS 2017); RAPPOR derives its PRR from HMAC(secret, value) and
  draws a fresh IRR (Erlingsson et al., CCS 2014). The first report of a value costs eps
  (RAPPOR: the r-th costs min(r eps_1, eps_inf) - min((r-1) eps_1, eps_inf)) and repeats
  nothing more. This holds only between histories with the same change pattern (which reports
  came from the same value): resent bytes disclose that pattern exactly (A,B,A,B against
  A,A,A,A: an infinite loss), RAPPOR's IRRs disclose it more with every report.

Fresh draws cannot make a stable value's repeats free: A,A,...,A against A,B,A,B,... drifts
apart with every fresh report of the value. "tree" (ldptel.client.tree, client/tree_memo.py)
can: its reports follow one sampled change, not the value, so a horizon of T reports costs
epsilon between any two histories (Erlingsson et al., SODA 2019).

Numeric campaigns (ldptel.client.numeric) report a number: each report clips, rounds it to
the mechanism's grid with a fresh alpha and randomizes it afresh, charged its epsilon, as
above. They take no exact memoization: Ding, Kulkarni, Yekhanin's (NeurIPS 2017, Sec. 3) keeps
one secret rounding point per install, and which reports then repeat discloses how close two
values are (campaign.NUMERIC_MEMO_REFUSED).

Memo keys are keyed hashes of (config id, privacy level, value index, or an
open-domain campaign's text), so the state file holds no value in clear; the memo is never
sent. Nothing is drawn ahead: a config costs nothing to load, the first report of a value
draws its randomization (benchmarks/client_overhead.py).
A user who changes privacy level gets fresh randomizations at the new level's epsilon.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3

import numpy as np

from ldptel.client import tree_memo
from ldptel.client.campaign import CampaignConfig, Mechanism
from ldptel.client.discovery.pem import PrefixExtendingMethod
from ldptel.client.errors import ParameterError
from ldptel.client.memoization import MEMO_EXACT
from ldptel.client.multi.wire import BreakdownReports
from ldptel.client.numeric import NumericMechanism
from ldptel.client.oracles.base import FrequencyOracle, WireReport
from ldptel.client.oracles.keys import KeyMechanism
from ldptel.client.oracles.rappor import Rappor, RapporClient
from ldptel.client.randomness import SecureRandom
from ldptel.client.statedb import transaction
from ldptel.client.tree_wire import TreeReports

SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS memo (key BLOB PRIMARY KEY, report TEXT, spent REAL NOT NULL)
  WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rappor_clients (
  config_id TEXT PRIMARY KEY, secret BLOB NOT NULL, cohort INTEGER NOT NULL
) WITHOUT ROWID;
"""
    + tree_memo.SCHEMA
)


_INSERT_NEW = "INSERT OR IGNORE INTO memo VALUES (?, ?, ?)"
_SELECT = "SELECT report, spent FROM memo WHERE key = ?"
_ADD_SPENT = "UPDATE memo SET spent = spent + ? WHERE key = ?"


#: A value as a randomizer takes it: the index of a label, a number (numeric campaigns), or
#: (open-domain campaigns, whose mechanism is a key mechanism) the text itself, in NFC
#: (CampaignConfig.open_value).
Value = int | float | str
#: What a value is memoized under: a label's index, or a text.
MemoIndex = int | str


#: The characters json.dumps writes as they are ("ensure_ascii": printable ASCII but the
#: quote and the backslash).
_JSON_PLAIN = bytes(range(0x20, 0x7F)).replace(b'"', b"").replace(b"\\", b"")


def wire_json(report: WireReport) -> str:
    """A wire report as compact JSON (what the spool stores and the sender concatenates):
    json.dumps(report, separators=(",", ":")), the same text. A flat report of ints and
    plain texts (base64 bit vectors: a 65,536-bit OUE report is 10,924 characters, which
    json.dumps scans at ~3 ns each) is joined directly after one C pass over its texts."""
    parts = []
    for name, value in report.items():
        if type(value) is int:
            text = str(value)
        elif type(value) is str and _plain(value):
            text = f'"{value}"'
        else:
            return json.dumps(report, separators=(",", ":"))
        if type(name) is not str or not _plain(name):
            return json.dumps(report, separators=(",", ":"))
        parts.append(f'"{name}":{text}')
    return "{" + ",".join(parts) + "}"


def _plain(text: str) -> bool:
    """Whether json.dumps writes `text` as it is (between quotes)."""
    return text.isascii() and not text.encode("ascii").translate(None, _JSON_PLAIN)


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
        oracle = config.level_mechanism(level)
        if oracle is None:
            raise ParameterError("level", f"{level!r} does not report under this config")
        self.config = config
        self.config_id = config.config_id
        self.level = level
        self.exact = config.memoization == MEMO_EXACT
        #: What memo keys and RAPPOR's client secret are per: the config, and the level.
        self._scope = f"{self.config_id}:{level}" if level else self.config_id
        self.oracle: Mechanism = oracle
        #: BLAKE2b keyed with the memo secret, copied per key (keying once saves a block).
        self._keyed = hashlib.blake2b(key=memo_secret, digest_size=16)
        self._rng = SecureRandom()
        self._final: dict[MemoIndex, str] = {}  # exact mode: values whose memo can never change
        self._rappor: RapporClient | None = None
        #: eps_1, the epsilon of one fresh report (RAPPOR: PRR and IRR), and the bound of all
        #: reports of one value under exact memoization (RAPPOR: eps_inf; others: eps_1).
        self.per_report = self.permanent = self.oracle.epsilon
        if isinstance(self.oracle, Rappor):
            self._rappor = _rappor_client(conn, self.oracle, self._scope)
            self.permanent = self.oracle.permanent_epsilon
        #: Memoization "tree": the install's horizon state (client/tree_memo.py).
        self._tree = None
        if isinstance(self.oracle, TreeReports):
            shape, seconds = self.oracle.shape, config.window_seconds
            self._tree = tree_memo.TreeMemo(shape, seconds, self._scope)

    def _digest(self, message: str) -> bytes:
        keyed = self._keyed.copy()  # = blake2b(message, key=memo_secret, digest_size=16)
        keyed.update(message.encode())
        return keyed.digest()

    def key(self, index: MemoIndex) -> bytes:
        # A text (open domain) after "s:", so it never reads as an index of another config.
        value = f"s:{index}" if isinstance(index, str) else str(index)
        return self._digest(f"{self._scope}:{value}")

    @staticmethod
    def memo_index(value: Value) -> MemoIndex:
        """What a value is memoized under: a label's index or a text itself."""
        return value if isinstance(value, str) else int(value)

    def spend(
        self, conn: sqlite3.Connection, value: Value, window: int | None = None
    ) -> tuple[str, float]:
        """The report to send for `value` (a label's index, a number or a text) in `window`
        (needed by memoization "tree") and the epsilon it costs, with its memo written in
        exact or tree mode (inside the caller's transaction, which charges the ledger that
        cost; call `committed` after COMMIT)."""
        if self._tree is not None:
            assert window is not None and not isinstance(value, str)
            return self._tree.spend(conn, int(value), window)
        if not self.exact:
            return self._fresh(value), self.per_report
        index = self.memo_index(value)
        final = self._final.get(index)
        if final is not None:
            return final, 0.0
        key = self.key(index)
        row = conn.execute(_SELECT, (key,)).fetchone()
        spent = 0.0 if row is None else float(row[1])
        if self._rappor is not None:
            assert isinstance(index, int)  # RAPPOR has a domain
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

    def committed(self, value: Value, report: str) -> None:
        """After COMMIT: in exact mode a value whose bound is reached resends its memo from
        memory."""
        if self.exact and self._rappor is None:
            self._final[self.memo_index(value)] = report

    def _fresh(self, value: Value) -> str:
        """A fresh draw of the one-report law (RAPPOR: a new PRR for this install's cohort,
        not the HMAC-derived one, and a new IRR; a number: clipped, rounded with a fresh
        alpha, randomized; an open-domain text: the oracle's report of its item key)."""
        if isinstance(self.oracle, NumericMechanism):
            assert not isinstance(value, str)
            return wire_json(self.oracle.perturb(float(value), self._rng))
        if isinstance(value, str):  # open domains: a key mechanism, or PEM's group and sketch
            if isinstance(self.oracle, PrefixExtendingMethod):
                return wire_json(self.oracle.perturb(value, self._rng))
            assert isinstance(self.oracle, KeyMechanism)
            return wire_json(self.oracle.perturb_string(value, self._rng))
        index = int(value)
        if self._rappor is not None:
            values = np.array([index], dtype=np.int64)
            cohort = np.array([self._rappor.cohort], dtype=np.int64)
            batch = self._rappor.oracle.perturb_cohorts(values, cohort, self._rng)
            return wire_json(self._rappor.oracle.encode(batch)[0])
        # A label's index, or a breakdown row's joint index (BreakdownReports.perturb).
        assert isinstance(self.oracle, FrequencyOracle | BreakdownReports)
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
