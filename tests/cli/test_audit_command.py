"""`ldptel audit` as a user runs it: measured vs claimed epsilon, exit 0 when the claim
holds, 1 when it is violated, 2 (one line) for bad parameters."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from ldptel_command import ldptel, one_line_error

AUDIT = ["--oracle", "de", "--epsilon", "1", "--domain-size", "16", "--samples", "20000"]


def test_an_honest_oracle_passes_with_exit_0() -> None:
    result = ldptel("audit", *AUDIT, "--seed", "1")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "claimed epsilon                1.0000" in out
    assert "exact (from the parameters)    1.0000  over 240 ordered input pairs" in out
    assert "verdict: ok" in out


def test_json_reports_every_measurement() -> None:
    result = ldptel("audit", *AUDIT, "--seed", "1", "--json", "--pairs", "2")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["oracle"] == "de" and data["verdict"] == "ok" and data["violated"] is False
    assert data["claimed_epsilon"] == pytest.approx(1.0)
    assert data["exact_epsilon"] == pytest.approx(1.0)
    assert data["sampled_lower_bound"] < 1.0 < data["sampled_epsilon"] + 0.2
    assert (data["samples"], data["sampled_pairs"], data["exact_pairs"]) == (20_000, 4, 240)
    assert data["seed"] == 1 and data["domain_size"] == 16


@pytest.mark.parametrize("name", ["olh", "oue", "sue", "blh"])
def test_other_oracles_and_parameters_pass(name: str) -> None:
    result = ldptel("audit", *AUDIT[2:], "--oracle", name, "--seed", "2", "--pairs", "1")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_violated_claim_exits_1() -> None:
    # The real command, with an oracle registered (in this process only) whose perturb
    # is built for epsilon 2 but which claims epsilon 1.
    script = textwrap.dedent(
        """
        import sys
        from ldptel.client.oracles import ORACLES
        from ldptel.client.oracles.de import DirectEncoding
        from ldptel.cli.main import main

        class Overclaiming(DirectEncoding):
            name = "overclaiming"
            def __init__(self, *, epsilon, domain_size):
                super().__init__(epsilon=epsilon + 1.0, domain_size=domain_size)
            @property
            def epsilon(self):
                return self.requested_epsilon - 1.0

        ORACLES["overclaiming"] = Overclaiming
        sys.exit(main(sys.argv[1:]))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, "audit", *AUDIT[2:], "--oracle", "overclaiming"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "verdict: VIOLATED" in result.stdout


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--epsilon", "0"], "epsilon"),
        (["--epsilon", "nan"], "epsilon"),
        (["--domain-size", "1"], "domain_size"),
        (["--oracle", "nope"], "oracle"),
        (["--samples", "5"], "samples"),
        (["--confidence", "1.5"], "confidence"),
        (["--param", "=3"], "param"),
    ],
)
def test_bad_parameters_give_one_line_and_exit_2(args: list[str], field: str) -> None:
    merged = list(AUDIT)
    for option, value in zip(args[::2], args[1::2], strict=True):
        if option in merged:
            merged[merged.index(option) + 1] = value
        else:
            merged += [option, value]
    one_line_error(ldptel("audit", *merged), "audit", field)


def test_rappor_states_its_permanent_bound_beside_the_measured_one_report_epsilon() -> None:
    args = [*AUDIT[2:], "--oracle", "rappor", "--domain-size", "4", "--seed", "3", "--pairs", "1"]
    result = ldptel("audit", *args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "claimed epsilon                1.0000  (one report)" in result.stdout
    data = json.loads(ldptel("audit", *args, "--json").stdout)
    assert f"permanent bound                {data['permanent_epsilon']:.4f}" in result.stdout
    assert data["permanent_epsilon"] > data["claimed_epsilon"]
