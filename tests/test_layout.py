"""The repository's layout holds: each top-level package imports only the packages it may (the command lines
above the libraries, data flowing into reports), and no module imports itself back through others, at any
depth. Every import counts, those inside functions included: a cycle hidden in a function still ties the two
modules together."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Each package -> the packages of ours it may import. The command lines import anything; usercode (the one
# reader of users' code) and standin (the stand-in device) import none.
ALLOWED = {
    "commands": {"usercode", "migrator", "try_run", "compat_matrix", "standin", "reports"},
    "try_run": {"usercode", "standin", "compat_matrix"},
    "compat_matrix": {"standin", "usercode"},
    "migrator": {"usercode"},
    "reports": {"migrator", "compat_matrix", "usercode"},
    "usercode": set(),
    "standin": set(),
}


def _modules() -> dict[str, Path]:
    modules = {}
    for package in ALLOWED:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """The modules of ours that `path` imports, anywhere in it (inside functions too): `from a.b import c`
    imports `a.b.c` when that is a module, else `a.b`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found & MODULES.keys()


GRAPH = {name: _imports(path) - {name} for name, path in MODULES.items()}


def _is_rule_module(name: str) -> bool:
    leaf = name.rpartition(".")[2]
    return leaf[:2] == "nm" and leaf[2:5].isdigit()


def test_each_package_imports_only_what_it_may() -> None:
    crossings = sorted(
        f"{name} -> {imported}"
        for name, imported_names in GRAPH.items()
        for imported in imported_names
        if (source := name.split(".")[0]) != (target := imported.split(".")[0])
        and target not in ALLOWED[source]
    )
    assert crossings == []


def test_no_module_imports_itself_back() -> None:
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, " -> ".join([*path[path.index(name) :], name])
        if name in done:
            return
        for imported in sorted(GRAPH[name]):
            visit(imported, (*path, name))
        done.add(name)

    for name in sorted(GRAPH):
        visit(name, ())


def test_no_rule_module_imports_another_rule_module_or_the_registry() -> None:
    """A rule reports another module's code by `ctx.rule(code)`; what several rules share is in a data module of
    the family (`families/xla/names.py`, `families/training/precision.py`)."""
    wrong = sorted(
        f"{name} -> {imported}"
        for name, imported_names in GRAPH.items()
        if _is_rule_module(name)
        for imported in imported_names
        if _is_rule_module(imported) or imported == "migrator.registry"
    )
    assert wrong == []


def test_an_import_inside_a_function_counts(tmp_path) -> None:
    module = tmp_path / "module.py"
    module.write_text(
        "def load():\n    from usercode import shell\n    from standin import sim_backend, SWITCH\n"
    )
    assert _imports(module) == {"usercode.shell", "standin.sim_backend", "standin"}
