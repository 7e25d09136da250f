"""The base install (numpy, xxhash, requests) runs the whole client: importing ldptel.client
and using every oracle (RAPPOR's decoding included) loads none of the services' or analysts'
packages, and no ldptel module outside ldptel.client (docs/architecture.md).
Each check runs in a fresh interpreter, where sys.modules shows what was really imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap

#: Packages of the extras ([collector], [aggregator]), not of the base install.
NOT_BASE = ("scipy", "flask", "werkzeug", "gunicorn", "redis")

EVERY_ORACLE = """
import sys
import numpy as np
import ldptel.client
import ldptel.client.oracles
from ldptel.client.oracles import ORACLES

for name, cls in sorted(ORACLES.items()):
    oracle = cls(epsilon=1.0, domain_size=8)
    oracle.perturb(3)
    batch = oracle.perturb_batch(np.arange(8), np.random.default_rng(0))
    support = oracle.support(oracle.decode(oracle.encode(batch)))
    oracle.variance(8)
    oracle.audit_probabilities(0, 1)
    oracle.estimate(support, 8)
from ldptel.client import Reporter
loaded = {{m for m in sys.modules if m.startswith("ldptel.") and not m.startswith("ldptel.client")}}
print(" ".join(sorted(loaded | {{m for m in {not_base!r} if m in sys.modules}})))
"""


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout.strip()


def test_the_client_and_every_oracle_need_only_the_base_install() -> None:
    assert run_python(EVERY_ORACLE.format(not_base=NOT_BASE)) == ""


def test_the_check_sees_an_imported_package() -> None:
    # The probe itself can fail: a client path that imported scipy would be reported.
    code = EVERY_ORACLE.replace("import ldptel.client\n", "import ldptel.client\nimport scipy\n")
    assert run_python(code.format(not_base=NOT_BASE)) == "scipy"
    code = EVERY_ORACLE.replace("import ldptel.client\n", "import ldptel.store.keys\n")
    assert run_python(code.format(not_base=NOT_BASE)) == "ldptel.store ldptel.store.keys"
