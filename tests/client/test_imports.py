"""The base install (numpy, xxhash, requests) runs the whole client: importing ldptel.client
and using every oracle's client-side path loads none of the services' or analysts' packages.
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
    if name != "rappor":  # RAPPOR's estimate is the analyst's decoding (scipy's NNLS)
        oracle.estimate(support, 8)
print(" ".join(sorted(m for m in {not_base!r} if m in sys.modules)))
"""

RAPPOR_WITHOUT_SCIPY = """
import sys
sys.modules["scipy"] = None  # as if scipy were not installed
import numpy as np
from ldptel.client.oracles import make_oracle

oracle = make_oracle("rappor", epsilon=1.0, domain_size=8)
support = oracle.support(oracle.perturb_batch(np.arange(8), np.random.default_rng(0)))
try:
    oracle.estimate(support, 8)
except ImportError as error:
    print(error)
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


def test_rappor_decoding_without_scipy_says_which_extra_to_install() -> None:
    assert "install ldptel[aggregator]" in run_python(RAPPOR_WITHOUT_SCIPY)


def test_the_check_sees_an_imported_package() -> None:
    # The probe itself can fail: a client path that imported scipy would be reported.
    code = EVERY_ORACLE.replace("import ldptel.client\n", "import ldptel.client\nimport scipy\n")
    assert run_python(code.format(not_base=NOT_BASE)) == "scipy"
