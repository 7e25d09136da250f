"""The wheel is complete: built from a copy of the sources, installed into a fresh venv, every
module of every package imports from it (not from the repo), the data files are inside, and
the `ldptel` console script runs.

The fresh venv is a plain one (no system site-packages). The wheel goes in with `--no-deps`;
its dependencies come from this venv's site-packages, appended to sys.path by a `.pth` line,
so nothing is downloaded. That directory holds only the editable install's finder, which is
never activated there (`.pth` files are read in site directories only, not in directories
that a `.pth` line adds), and the test checks that every ldptel module comes from the wheel.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: Source folder -> import package (ldptel/ links each one in, docs/architecture.md).
PARTS = ("client", "store", "collector", "aggregator", "analysis", "dashboard", "cli")
PACKAGES = {part: f"ldptel.{part}" for part in PARTS}
DATA_FILES = [
    "ldptel/collector/openapi.yaml",
    "ldptel/aggregator/report_template.html",
    "ldptel/aggregator/report.css",
    "ldptel/dashboard/page.html",
    "ldptel/dashboard/dashboard.css",
    "ldptel/dashboard/filter.js",
    "ldptel/dashboard/breakdown.css",
    "ldptel/dashboard/breakdown.js",
    "ldptel/client/py.typed",
    "ldptel/collector/py.typed",
    "ldptel/aggregator/py.typed",
    "ldptel/store/py.typed",
    "ldptel/analysis/py.typed",
    "ldptel/dashboard/py.typed",
    "ldptel/py.typed",
]

# Runs inside the fresh venv: import every module of the wheel, report where each came from.
IMPORT_ALL = """
import importlib, json, sys
from importlib import resources
names = json.loads(sys.argv[1])
files = {name: importlib.import_module(name).__file__ for name in names}
data = {
    "openapi": len(resources.files("ldptel.collector").joinpath("openapi.yaml").read_bytes()),
    "template": len(
        resources.files("ldptel.aggregator").joinpath("report_template.html").read_bytes()
    ),
}
editable = [type(f).__module__ for f in sys.meta_path if "editable" in type(f).__module__]
print(json.dumps({"files": files, "data": data, "path": sys.path, "editable": editable}))
"""


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=240, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def source_modules() -> list[str]:
    """Every module the source tree maps into the ldptel namespace."""
    names = ["ldptel"]
    for folder, package in PACKAGES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            if "__pycache__" in parts or parts[-1] == "__main__":  # __main__ runs the CLI
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names.append(".".join((package, *parts)))
    return names


def copy_sources(target: Path) -> None:
    """What the wheel is built from, outside the shared working tree (no build/ left there)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in (*PACKAGES, "ldptel"):
        shutil.copytree(REPO / folder, target / folder, ignore=ignore, symlinks=True)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, target / name)


@pytest.mark.slow
def test_the_wheel_installs_alone_and_every_module_imports_from_it(tmp_path: Path) -> None:
    source, dist, venv, work = (tmp_path / d for d in ("src", "dist", "venv", "work"))
    copy_sources(source)
    work.mkdir()
    built = run(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist,
                source, cwd=source)  # fmt: skip
    # PEP 639 metadata: setuptools prints no deprecation box, the wheel carries the licence.
    assert "deprecat" not in (built.stdout + built.stderr).lower()
    [wheel] = dist.glob("ldptel-*.whl")
    members = set(zipfile.ZipFile(wheel).namelist())
    missing = [f for f in DATA_FILES if f not in members]
    assert not missing, f"data files missing from the wheel: {missing}"
    [metadata] = [m for m in members if m.endswith(".dist-info/METADATA")]
    headers = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "License-Expression: Apache-2.0" in headers and "License-File: LICENSE" in headers
    assert any(m.endswith(".dist-info/licenses/LICENSE") for m in members)

    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=work)
    python = venv / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
        "--quiet", wheel, cwd=work)  # fmt: skip
    fresh_site = Path(
        run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=work)
        .stdout.strip()
    )  # fmt: skip
    dependencies = Path(sysconfig.get_path("purelib")).resolve()
    (fresh_site / "zz_dependencies.pth").write_text(f"{dependencies}\n")

    names = source_modules()
    found = json.loads(run(python, "-c", IMPORT_ALL, json.dumps(names), cwd=work).stdout)
    assert found["editable"] == []
    # '' is the subprocess's working directory (`work`, outside the repo).
    entries = {Path(p).resolve() for p in found["path"] if p}
    in_repo = {p for p in entries if p.is_relative_to(REPO)}
    assert in_repo <= {dependencies}, f"the repo leaked onto sys.path: {in_repo}"
    outside = {n: f for n, f in found["files"].items() if not Path(f).is_relative_to(fresh_site)}
    assert not outside, f"modules not imported from the wheel: {outside}"
    assert found["data"]["openapi"] > 0 and found["data"]["template"] > 0

    usage = run(venv / "bin" / "ldptel", "--help", cwd=work).stdout
    assert "collector" in usage
    version = run(venv / "bin" / "ldptel", "--version", cwd=work).stdout
    assert version.strip() == "ldptel 0.1.0"


@pytest.mark.slow
def test_the_readmes_wheel_command_builds_the_wheel(tmp_path: Path) -> None:
    # The README's one-line build, as written, on a copy of the sources (no build/ left here).
    readme = (REPO / "README.md").read_text()
    [command] = re.findall(r"^(\.venv/bin/python -m pip wheel [^#\n]*?)\s*#", readme, re.M)
    copy_sources(tmp_path)
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])
    subprocess.run(["bash", "-euc", command], cwd=tmp_path, check=True, timeout=240)
    assert [wheel.name for wheel in (tmp_path / "dist").glob("*.whl")] == [
        "ldptel-0.1.0-py3-none-any.whl"
    ]


def test_every_source_folder_is_a_listed_package() -> None:
    """A folder of modules missing from [tool.setuptools] packages would not ship (fast check;
    the wheel test above catches it too, more slowly)."""
    import tomllib

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    listed = set(pyproject["tool"]["setuptools"]["packages"])
    folders = set()
    for folder, package in PACKAGES.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = path.parent.relative_to(REPO / folder).parts
            if "__pycache__" not in parts:
                folders.add(".".join((package, *parts)))
    assert folders <= listed, f"not in pyproject packages: {sorted(folders - listed)}"
