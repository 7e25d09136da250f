"""Open-domain campaigns from the command line: `ldptel report --candidates FILE` and
`ldptel demo --scenario favorite-color`, where free-text answers with a long tail of rare
and misspelled ones are reported against a public dictionary of colour names, or (with
`--oracle pem`) discovered with no dictionary at all."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from ldptel_command import ldptel, one_line_error

from ldptel.aggregator.model import from_json
from ldptel.cli.demo_data import COMMON_COLORS, PEM_MAX_LENGTH, color_answers
from ldptel.cli.main import main

sys.path.insert(0, str(Path(__file__).parents[1] / "aggregator"))
from stream_entries import append, register

from ldptel.client.campaign import CampaignConfig
from ldptel.client.hashing import item_keys

WINDOW = 1_700_006_400


def test_report_lists_the_candidates_that_clear_the_release_threshold(
    redis_client: Any, redis_url: str, capsys: Any, tmp_path: Path
) -> None:
    config = CampaignConfig.from_dict(
        {"name": "answers", "oracle": "hcms", "epsilon": 4, "max_length": 20,
         "params": {"k": 64, "m": 256}}
    ).as_created()  # fmt: skip
    register(redis_client, config)
    words = ["yes"] * 1500 + ["no"] * 500 + [f"maybe {i}" for i in range(500)]
    oracle = config.build_open()
    append(redis_client, config, oracle.perturb_keys(item_keys(words), np.random.default_rng(1)),
           window=WINDOW)  # fmt: skip
    assert main(["aggregator", "run", "--once", "--quiet", "--redis-url", redis_url]) == 0
    capsys.readouterr()
    listed = tmp_path / "candidates.txt"
    listed.write_text("yes\nno\n\nmaybe 1\nmaybe 2\nnever\n", encoding="utf-8")

    assert main(["report", "answers", "--redis-url", redis_url, "--candidates", str(listed),
                 "--json"]) == 0  # fmt: skip
    saved = capsys.readouterr().out
    (report,) = from_json(saved)["reports"]
    assert [item["item"] for item in report["items"]] == ["yes", "no"]
    assert report["discovery"]["candidates"] == 5 and report["discovery"]["threshold"] > 0
    # An earlier window's discoveries as the candidates (here: the same window's).
    (tmp_path / "found.json").write_text(saved, encoding="utf-8")
    assert main(["report", "answers", "--redis-url", redis_url, "--candidates-from",
                 str(tmp_path / "found.json"), "--json"]) == 0  # fmt: skip
    (again,) = from_json(capsys.readouterr().out)["reports"]
    assert [item["item"] for item in again["items"]] == ["yes", "no"]
    assert again["discovery"]["source"] == "discovered in 2023-11-15T00:00:00Z"

    assert main(["report", "answers", "--redis-url", redis_url, "--candidates", str(listed)]) == 0
    table = capsys.readouterr().out
    assert "2 of 5 candidates (file candidates.txt) discovered" in table
    assert "release threshold" in table and "costs no privacy" in table

    assert main(["report", "answers", "--redis-url", redis_url]) == 0  # no candidates
    assert "no candidates given, so nothing is listed" in capsys.readouterr().out
    bad = tmp_path / "bad.txt"
    bad.write_text("ok\nnul\x00here\n", encoding="utf-8")
    one_line_error(
        ldptel("report", "answers", "--redis-url", redis_url, "--candidates", str(bad)),
        "report",
        "candidates",
    )


def test_a_stored_candidate_list_is_in_every_window_the_aggregator_builds(
    redis_client: Any, redis_url: str, capsys: Any, tmp_path: Path
) -> None:
    """`ldptel aggregator candidates NAME FILE` keeps the campaign's dictionary in Redis: the
    stored reports of the windows with state are rebuilt with it at once, later passes and
    `ldptel report` (no --candidates) use it, and --clear removes it."""
    from ldptel.aggregator.reports import load_window

    config = CampaignConfig.from_dict(
        {"name": "answers", "oracle": "hcms", "epsilon": 4, "max_length": 20,
         "params": {"k": 64, "m": 256}}
    ).as_created()  # fmt: skip
    register(redis_client, config)
    words = ["yes"] * 1500 + ["no"] * 500 + [f"maybe {i}" for i in range(500)]
    oracle = config.build_open()
    for day in range(2):
        rng = np.random.default_rng(day)
        append(redis_client, config, oracle.perturb_keys(item_keys(words), rng),
               window=WINDOW + day * 86_400)  # fmt: skip
    assert main(["aggregator", "run", "--once", "--quiet", "--redis-url", redis_url]) == 0
    stored = load_window(redis_client, "answers", WINDOW)
    assert stored is not None and stored["reports"][0]["discovery"]["candidates"] == 0
    listed = tmp_path / "dictionary.txt"
    listed.write_text("yes\nno\nmaybe 1\nnever\n", encoding="utf-8")
    capsys.readouterr()

    assert main(["aggregator", "candidates", "answers", str(listed), "--json",
                 "--redis-url", redis_url]) == 0  # fmt: skip
    assert capsys.readouterr().out.strip() == (
        '{"campaign": "answers", "candidates": 4, "windows_rebuilt": 2}'
    )
    for day in range(2):
        stored = load_window(redis_client, "answers", WINDOW + day * 86_400)
        assert stored is not None
        (report,) = stored["reports"]
        assert report["discovery"]["candidates"] == 4
        assert report["discovery"]["source"] == "file dictionary.txt"
        assert [item["item"] for item in report["items"]] == ["yes", "no"]
    assert main(["report", "answers", "--redis-url", redis_url]) == 0
    assert "2 of 4 candidates (file dictionary.txt) discovered" in capsys.readouterr().out
    assert main(["aggregator", "candidates", "answers", "--redis-url", redis_url]) == 0
    assert capsys.readouterr().out == "yes\nno\nmaybe 1\nnever\n"

    assert main(["aggregator", "candidates", "answers", "--clear", "--redis-url", redis_url]) == 0
    assert "0 candidates; 2 window reports rebuilt" in capsys.readouterr().out
    stored = load_window(redis_client, "answers", WINDOW)
    assert stored is not None and stored["reports"][0]["items"] == []
    numeric = CampaignConfig.from_dict(
        {"name": "latency", "oracle": "sw", "epsilon": 1, "range": [0, 10]}
    ).as_created()
    register(redis_client, numeric)
    one_line_error(
        ldptel("aggregator", "candidates", "latency", str(listed), "--redis-url", redis_url),
        "aggregator",
        "campaign",
    )


def test_favorite_color_finds_the_common_answers_and_lists_no_rare_one(tmp_path: Path) -> None:
    page = tmp_path / "colors.html"
    done = subprocess.run(
        [sys.executable, "-m", "ldptel.cli", "demo", "--scenario", "favorite-color",
         "--n", "3000", "--epsilon", "4", "--sdk-users", "5", "--json", "--html", str(page)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (report,) = from_json(done.stdout)["reports"]
    truth = Counter(color_answers(3000, 1.1, np.random.default_rng(2024)))  # the demo's users
    listed = {item["item"]: item for item in report["items"]}
    threshold = report["discovery"]["threshold"]

    # Found: every answer whose count is 4 stderr above the threshold (missed w.p. < 4e-5).
    stderr = max(item["stderr"] for item in listed.values())
    assert {c for c, count in truth.items() if count > threshold + 4 * stderr} <= set(listed)
    assert len(listed) >= 5
    # Never listed: names held by one user (40 of them among the 148 candidates).
    assert all(truth[name] > 1 for name in listed)
    assert sum(1 for name in report["items"] if truth[name["item"]] == 1) == 0
    assert all(item["true_count"] == truth[name] for name, item in listed.items())
    assert report["discovery"]["candidates"] == 148
    assert "release threshold" in page.read_text() and "costs no privacy" in page.read_text()


def test_favorite_color_with_pem_discovers_the_common_answers_with_no_dictionary(
    tmp_path: Path,
) -> None:
    # n = 100,000 users at epsilon 4: PEM's 8 groups of 12,500 users put the release
    # threshold near 1,450 users, and the rarest common colour (orange, 3,590 users) about
    # 5 stderr (about 420) above it; a one-user answer is listed with probability at most
    # the stated expected false discoveries (0.05). The run is seeded.
    page = tmp_path / "discovered.html"
    done = subprocess.run(
        [sys.executable, "-m", "ldptel.cli", "demo", "--scenario", "favorite-color",
         "--oracle", "pem", "--epsilon", "4", "--sdk-users", "5", "--json", "--html",
         str(page)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (report,) = from_json(done.stdout)["reports"]
    assert report["oracle"] == "pem" and report["n"] == 100_000
    truth = Counter(color_answers(100_000, 1.1, np.random.default_rng(2024), PEM_MAX_LENGTH))
    assert sum(1 for count in truth.values() if count == 1) >= 40  # the tail is there
    listed = {item["item"]: item for item in report["items"]}
    discovery = report["discovery"]
    assert discovery["source"] == "pem" and discovery["expected_false_discoveries"] <= 0.05

    assert set(COMMON_COLORS) <= set(listed)  # found with no candidate list
    assert all(truth[name] > 1 for name in listed)  # no one-user answer
    for name, item in listed.items():
        assert item["true_count"] == truth[name]
        assert item["estimate"] > discovery["threshold"]
    assert "(pem) discovered" in page.read_text() and "costs no privacy" in page.read_text()
