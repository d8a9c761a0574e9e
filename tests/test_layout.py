"""The repository's layout holds: each top-level package imports only the packages it may (the command lines
above the libraries, data flowing into reports), and no module imports itself back through others, at any
depth. Every import counts, those inside functions included: a cycle hidden in a function still ties the two
modules together."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Each package -> the packages of ours it may import. The command lines import anything; usercode (the one
# reader of users' code) and standin (the stand-in device) import none.
ALLOWED = {
    "commands": {"usercode", "migrator", "try_run", "compat_matrix", "standin", "reports"},
    "try_run": {"usercode", "standin", "compat_matrix"},
    "compat_matrix": {"standin"},
    "migrator": {"usercode"},
    "reports": {"migrator", "compat_matrix", "usercode"},
    "usercode": set(),
    "standin": set(),
}
# The rule modules' imports of other rules and of the registry, which the work on one way to register a rule
# (issue 27, item 3) removes: until it lands they are left out of the cycle test, and
# `test_no_rule_imports_another_rule_or_the_registry` says they are still there.
RULE_MODULE_GLOBS = ("migrator/families/*/nm*.py", "migrator/shell/nm*.py", "migrator/risks/nm*.py")


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
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & MODULES.keys()
            found |= submodules or {node.module}
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found & MODULES.keys()


GRAPH = {name: _imports(path) - {name} for name, path in MODULES.items()}


def _is_rule_module(name: str) -> bool:
    path = MODULES[name].relative_to(ROOT)
    return any(path.match(pattern) for pattern in RULE_MODULE_GLOBS)


def _rule_edges() -> list[str]:
    """Imports of a rule module by a rule module, or of the registry by one."""
    return sorted(
        f"{name} -> {imported}"
        for name, imported_names in GRAPH.items()
        if _is_rule_module(name)
        for imported in imported_names
        if _is_rule_module(imported) or imported == "migrator.registry"
    )


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
    left_out = set(_rule_edges())
    graph = {
        name: {imported for imported in imported_names if f"{name} -> {imported}" not in left_out}
        for name, imported_names in GRAPH.items()
    }
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, " -> ".join([*path[path.index(name) :], name])
        if name in done:
            return
        for imported in sorted(graph[name]):
            visit(imported, (*path, name))
        done.add(name)

    for name in sorted(graph):
        visit(name, ())


@pytest.mark.xfail(
    strict=True,
    reason="issue 27 item 3 (the `rules` session: one way to register a rule) removes the rule -> rule and "
    "rule -> registry imports; this marker goes when it lands",
)
def test_no_rule_imports_another_rule_or_the_registry() -> None:
    assert _rule_edges() == []


def test_an_import_inside_a_function_counts(tmp_path) -> None:
    module = tmp_path / "module.py"
    module.write_text("def load():\n    from usercode import shell\n    import migrator.registry\n")
    assert _imports(module) == {"usercode.shell", "migrator.registry"}
