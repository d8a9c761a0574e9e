"""The migrator's layout holds: every rule module lives in its kind's package, is named after its first code
and found there (no list to edit), lists only the rules it defines, imports no other rule module nor the
registry, and no module imports another in a circle (imports inside functions count)."""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

from migrator.registry import (
    KINDS,
    NOTEBOOK_RULE_MODULES,
    PYTHON_RULE_MODULES,
    RISK_MODULES,
    RULE_MODULES,
    SHELL_RULE_MODULES,
)
from migrator.shell.rewrite import ShellRewriter

PACKAGE = Path(__file__).resolve().parents[2] / "migrator"
RULE_FILES = {
    "python": "families/*/nm*.py",
    "shell": "shell/nm*.py",
    "notebook": "notebook_rules/nm*.py",
    "risk": "risks/nm*.py",
}


def _files(modules) -> set[Path]:
    return {Path(module.__file__).resolve() for module in modules}


def test_every_rule_module_is_found_in_its_package_and_named_after_its_first_code() -> None:
    assert RULE_FILES.keys() == KINDS.keys()
    found = {
        "python": _files(
            module for module in PYTHON_RULE_MODULES if module.__name__.rpartition(".")[2][:2] == "nm"
        ),
        "shell": _files(SHELL_RULE_MODULES),
        "notebook": _files(NOTEBOOK_RULE_MODULES),
        "risk": _files(RISK_MODULES),
    }
    for kind, pattern in RULE_FILES.items():
        assert sorted(map(str, set(PACKAGE.glob(pattern)) ^ found[kind])) == [], kind
    for module in (*PYTHON_RULE_MODULES, *SHELL_RULE_MODULES, *NOTEBOOK_RULE_MODULES, *RISK_MODULES):
        name = module.__name__.rpartition(".")[2]
        if name.startswith("nm"):
            assert name.startswith(module.RULES[0].code.lower() + "_"), name
    for module in PYTHON_RULE_MODULES:
        assert hasattr(module, "HANDLER"), module.__name__
    for module in RISK_MODULES:
        assert [rule.code.lower() for rule in module.RULES] == [module.__name__.rpartition(".")[2][:5]]
        assert callable(module.find), module.__name__


def test_every_rule_is_listed_by_the_module_that_defines_it() -> None:
    """`docs/rules.md` links each code to its home: a module that re-exported a rule would take it over."""
    for code, home in RULE_MODULES.items():
        assert f'"{code}"' in (PACKAGE.parent / (home.replace(".", "/") + ".py")).read_text(), (code, home)


def test_every_shell_matcher_is_part_of_the_walk() -> None:
    for module in SHELL_RULE_MODULES:
        # Its matcher is part of the one walk: a module whose MATCHER the rewriter lacks decides nothing.
        assert module.MATCHER in ShellRewriter.__mro__, module.__name__
    # No two matchers define the same method: one would silently shadow the other.
    methods = [
        name for module in SHELL_RULE_MODULES for name in vars(module.MATCHER) if not name.startswith("__")
    ]
    assert sorted({name for name in methods if methods.count(name) > 1}) == []


def _imports(path: Path, modules: Collection[str]) -> set[str]:
    """Modules of the package (`modules`) that `path` imports, anywhere in it (inside functions too):
    `from migrator.shell import edits` imports `migrator.shell.edits`, `from migrator.rules import Rule`
    imports `migrator.rules`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("migrator"):
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("migrator"))
    return found & set(modules)


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _is_rule_module(name: str) -> bool:
    leaf = name.rpartition(".")[2]
    return leaf[:2] == "nm" and leaf[2:5].isdigit()


def test_no_rule_module_imports_another_rule_module_or_the_registry() -> None:
    """A rule reports another module's code by `ctx.rule(code)`; what several rules share is in a data module of
    the family (`families/xla/names.py`, `families/training/precision.py`)."""
    modules = _modules()
    wrong = {
        name: sorted(
            imported
            for imported in _imports(path, modules)
            if _is_rule_module(imported) or imported == "migrator.registry"
        )
        for name, path in modules.items()
        if _is_rule_module(name)
    }
    assert {name: imported for name, imported in wrong.items() if imported} == {}


def test_no_import_cycles() -> None:
    modules = _modules()
    graph = {name: _imports(path, modules) - {name} for name, path in modules.items()}
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, " -> ".join([*path, name])
        if name in done:
            return
        for imported in graph[name]:
            visit(imported, (*path, name))
        done.add(name)

    for name in graph:
        visit(name, ())


def test_the_xla_catch_all_leaves_alone_every_call_a_rule_of_the_family_declares(monkeypatch) -> None:
    """NM318 reads what the XLA rules of the walk declare (`CALLS`, `STATEMENTS`, `DECIDES`), not a list of its
    own: a new rule's call gets no catch-all TODO above the line the rule just rewrote."""
    from migrator import engine
    from migrator.families.xla.state import declared_calls
    from migrator.transform import Handler

    source = "import torch_xla.core.xla_model as xm\n\nxm.set_replication(1)\n"
    assert [f.code for f in engine.migrate_python(source)[1] if not f.fixed] == ["NM318"]

    class NewRule(Handler):
        CALLS = frozenset({"torch_xla.core.xla_model.set_replication"})

    NewRule.__module__ = "migrator.families.xla.nm399_replication"
    handlers = (*engine.PYTHON_HANDLERS, NewRule)
    monkeypatch.setattr(engine, "PYTHON_HANDLERS", handlers)
    assert "torch_xla.core.xla_model.set_replication" in declared_calls(handlers).rewritten
    # (the import it leaves is a leftover: this stand-in rule rewrites nothing)
    assert "NM318" not in [f.code for f in engine.migrate_python(source)[1]]


def test_the_guide_names_every_helper_and_shows_a_real_rule_module() -> None:
    guide = (PACKAGE.parent / "docs" / "writing-rules.md").read_text()
    helpers = [
        node.name
        for node in ast.parse((PACKAGE / "cst_helpers.py").read_text()).body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")
    ]
    assert [name for name in helpers if f"`{name}`" not in guide] == []
    assert (PACKAGE / "families" / "xla" / "nm311_compile_backend.py").read_text() in guide
