"""The migrator's layout holds: every rule module lives in its kind's package, is named after its code and
found there (no list to edit) and lists only the rules it defines. Which module may import which (no rule
module imports another nor the registry, no cycle): tests/test_layout.py."""

from __future__ import annotations

import ast
from pathlib import Path

from migrator import notebook
from migrator.registry import (
    KINDS,
    NOTEBOOK_RULE_MODULES,
    PYTHON_RULE_MODULES,
    RISK_MODULES,
    RULE_MODULES,
    SHELL_RULE_MODULES,
)
from migrator.shell import rewrite
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
    # Each code in the module named after it: a module defines one rule (a walk that decides several codes
    # lives in the first one's module and reports the others by code).
    assert {code: home for code, home in RULE_MODULES.items() if not _named_after(home, code)} == {}
    for module in (*PYTHON_RULE_MODULES, *SHELL_RULE_MODULES, *NOTEBOOK_RULE_MODULES, *RISK_MODULES):
        # (a family's `state` tracker defines none)
        assert len(module.RULES) == (module.__name__.rpartition(".")[2] != "state"), module.__name__
    for module in PYTHON_RULE_MODULES:
        assert hasattr(module, "HANDLER"), module.__name__
    for module in RISK_MODULES:
        assert [rule.code.lower() for rule in module.RULES] == [module.__name__.rpartition(".")[2][:5]]
        assert callable(module.find), module.__name__


def _named_after(module: str, code: str) -> bool:
    return module.rpartition(".")[2].startswith(code.lower() + "_")


def test_every_rule_is_listed_by_the_module_that_defines_it() -> None:
    """`docs/reference/rules.md` links each code to its home: a module that re-exported a rule would take it over."""
    for code, home in RULE_MODULES.items():
        assert f'"{code}"' in (PACKAGE.parent / (home.replace(".", "/") + ".py")).read_text(), (code, home)


def test_every_shell_matcher_and_notebook_rule_takes_known_events() -> None:
    # The rewriter takes its matchers from the modules the registry finds (one discovery, no list to edit).
    assert rewrite.RULE_MODULES == SHELL_RULE_MODULES
    for module in SHELL_RULE_MODULES:
        # None: a rule another module's matcher decides (in one look at the same commands).
        assert module.MATCHER is None or module.MATCHER in ShellRewriter.__mro__, module.__name__
    for matcher in rewrite.MATCHERS:
        # A matcher takes walk events by declaring them; each names one of its own methods.
        hooks = vars(matcher)["HOOKS"]
        assert set(hooks) <= set(rewrite.EVENTS), matcher
        assert [name for name in hooks.values() if name not in vars(matcher)] == [], matcher
    for module in NOTEBOOK_RULE_MODULES:
        # A notebook rule takes events of the reading of cells (`migrator/notebook.py`) by its own functions.
        assert set(module.HOOKS) <= set(notebook._HOOKS), module.__name__
        assert all(callable(getattr(module, name)) for name in module.HOOKS.values()), module.__name__
    # No two matchers define the same method: one would silently shadow the other.
    methods = [name for matcher in rewrite.MATCHERS for name in vars(matcher) if not name.startswith("__")]
    assert sorted({name for name in methods if methods.count(name) > 1} - {"HOOKS"}) == []


def test_the_xla_catch_all_leaves_alone_every_call_a_rule_of_the_family_declares(monkeypatch) -> None:
    """NM318 reads what the XLA rules of the walk declare (`CALLS`, `STATEMENTS`, `DECIDES`), not a list of its
    own: a new rule's call gets no catch-all TODO above the line the rule just rewrote."""
    from migrator import engine
    from migrator.families.xla.state import declared_calls
    from migrator.transform import Handler

    source = "import torch_xla.core.xla_model as xm\n\nxm.set_replication(1)\n"
    # NM501: the import's own TODO, which waits for NM318's.
    assert [f.code for f in engine.migrate_python(source)[1] if not f.fixed] == ["NM501", "NM318"]

    class NewRule(Handler):
        CALLS = frozenset({"torch_xla.core.xla_model.set_replication"})

    NewRule.__module__ = "migrator.families.xla.nm399_replication"
    handlers = (*engine.PYTHON_HANDLERS, NewRule)
    monkeypatch.setattr(engine, "PYTHON_HANDLERS", handlers)
    assert "torch_xla.core.xla_model.set_replication" in declared_calls(handlers).rewritten
    # (the import it leaves is a leftover: this stand-in rule rewrites nothing)
    assert "NM318" not in [f.code for f in engine.migrate_python(source)[1]]


def test_the_guide_names_every_helper_and_shows_a_real_rule_module() -> None:
    guide = (PACKAGE.parent / "docs" / "contributing" / "writing-rules.md").read_text()
    helpers = [
        node.name
        for node in ast.parse((PACKAGE / "cst_helpers.py").read_text()).body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")
    ]
    assert [name for name in helpers if f"`{name}`" not in guide] == []
    assert (PACKAGE / "families" / "xla" / "nm311_compile_backend.py").read_text() in guide
