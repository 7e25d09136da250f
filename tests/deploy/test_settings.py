"""Every setting has one environment variable, derived from the settings' fields, documented
in the one table of docs/operations.md; secrets come from the environment or a file."""

from __future__ import annotations

import dataclasses
import re
import secrets
from pathlib import Path

import pytest
from deploy_kit import ROOT, documented_variables

from ldptel.client.errors import ParameterError
from ldptel.collector.serve import ServeOptions
from ldptel.collector.settings import (
    MIN_SECRET_BITS,
    SECRETS,
    CollectorConfig,
    env_name,
    from_env,
    secret_bits,
)


def test_every_collector_setting_has_a_documented_variable() -> None:
    fields = [f.name for f in dataclasses.fields(CollectorConfig)]
    fields += [f.name for f in dataclasses.fields(ServeOptions)]
    missing = {env_name(name) for name in fields} - documented_variables()
    assert missing == set()


def variables_the_code_reads() -> set[str]:
    """Every LDPTEL_* name: the settings' fields (and secrets' _FILE), and those the code
    spells out."""
    fields = [f.name for f in dataclasses.fields(CollectorConfig)]
    fields += [f.name for f in dataclasses.fields(ServeOptions)]
    named = {env_name(name) for name in fields}
    named |= {env_name(name) + "_FILE" for name in SECRETS}
    for folder in ("cli", "collector", "aggregator", "store", "dashboard"):
        for path in (ROOT / folder).rglob("*.py"):
            named |= set(re.findall(r"\bLDPTEL_[A-Z_]*[A-Z]\b", path.read_text()))
    return named | {"GUNICORN_CMD_ARGS"}


def test_the_table_documents_exactly_the_variables_the_code_reads() -> None:
    assert variables_the_code_reads() - documented_variables() == set()
    assert documented_variables() - variables_the_code_reads() == set()  # nothing stale


def test_variables_set_every_kind_of_setting() -> None:
    environ = {
        "LDPTEL_RATE_LIMIT": "0",
        "LDPTEL_TOKEN_CACHE_SECONDS": "0.5",
        "LDPTEL_MAX_BODY_BYTES": "1024",
        "LDPTEL_ANALYST_TOKEN": "",  # empty: none
        "LDPTEL_REDIS_URL": "redis://redis:6379/0",
    }
    config = CollectorConfig.from_environ(environ)
    assert (config.rate_limit, config.token_cache_seconds, config.max_body_bytes) == (0, 0.5, 1024)
    assert config.analyst_token is None and config.redis_url == "redis://redis:6379/0"
    options = from_env(
        ServeOptions, {"LDPTEL_PORT": "9000", "LDPTEL_DATA_DIR": "/d"}, ServeOptions()
    )
    assert (options.port, options.data_dir, options.workers) == (9000, Path("/d"), 2)


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({"LDPTEL_RATE_LIMIT": "many"}, "LDPTEL_RATE_LIMIT"),
        ({"LDPTEL_TOKEN_CACHE_SECONDS": "-1"}, "token_cache_seconds"),
        ({"LDPTEL_REDIS_WAIT_REPLICAS": "-1"}, "redis_wait_replicas"),
        ({"LDPTEL_REDIS_WAIT_TIMEOUT_SECONDS": "5"}, "redis_wait_timeout_seconds"),  # >= socket
        ({"LDPTEL_ADMIN_TOKEN_FILE": "/nonexistent/token"}, "LDPTEL_ADMIN_TOKEN_FILE"),
        ({"LDPTEL_ADMIN_TOKEN": "a", "LDPTEL_ADMIN_TOKEN_FILE": "/x"}, "LDPTEL_ADMIN_TOKEN"),
    ],
)
def test_a_bad_variable_is_an_error_naming_it(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(ParameterError) as error:
        CollectorConfig.from_environ(environ)
    assert error.value.field == variable


def test_a_secret_comes_from_its_file(tmp_path: Path) -> None:
    secret = tmp_path / "admin_token"
    secret.write_text("s3cret-admin-token-from-a-file\n")
    config = CollectorConfig.from_environ({"LDPTEL_ADMIN_TOKEN_FILE": str(secret)})
    assert config.admin_token == "s3cret-admin-token-from-a-file"
    secret.write_text("\n")
    with pytest.raises(ParameterError, match="empty"):
        CollectorConfig.from_environ({"LDPTEL_ADMIN_TOKEN_FILE": str(secret)})


@pytest.mark.parametrize(
    "weak",
    [
        "a",
        "admin",
        "x" * 40,  # one character: a pattern
        "abababab" * 4,  # two
        "0123456789" * 3,  # 30 digits: 100 bits
        secrets.token_hex(15),  # 30 hex digits: 120 bits
        "abcdefghijklmnopqrstuvwxy",  # 25 lowercase letters: 118 bits
        secrets.token_urlsafe(16)[:21],  # 21 url-safe characters: 126 bits
    ],
)
@pytest.mark.parametrize("name", ["ADMIN", "ANALYST"])
def test_a_weak_secret_refuses_to_start_naming_its_variable(
    weak: str, name: str, tmp_path: Path
) -> None:
    variable = f"LDPTEL_{name}_TOKEN"
    with pytest.raises(ParameterError, match="too weak") as error:
        CollectorConfig.from_environ({variable: weak})
    assert error.value.field == variable
    secret = tmp_path / "secret"
    secret.write_text(weak + "\n")
    with pytest.raises(ParameterError, match=f"{variable}_FILE") as error:
        CollectorConfig.from_environ({f"{variable}_FILE": str(secret)})
    assert error.value.field == variable


@pytest.mark.parametrize(
    "strong", [secrets.token_urlsafe(16), secrets.token_urlsafe(32), secrets.token_hex(16)]
)
def test_a_generated_secret_is_accepted(strong: str) -> None:
    config = CollectorConfig.from_environ({"LDPTEL_ADMIN_TOKEN": strong})
    assert config.admin_token == strong
    assert secret_bits(strong) >= MIN_SECRET_BITS
