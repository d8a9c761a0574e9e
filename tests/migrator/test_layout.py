"""The migrator's layout holds: every rule module is registered and named after its first code (the imports
between modules and packages: tests/test_layout.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from migrator.registry import PYTHON_RULE_MODULES, SHELL_RULE_MODULES
from migrator.risks import RISK_MODULES
from migrator.shell.rewrite import ShellRewriter

PACKAGE = Path(__file__).resolve().parents[2] / "migrator"


def test_every_rule_module_is_registered_and_named_after_its_code() -> None:
    registered = {Path(module.__file__).resolve() for module in PYTHON_RULE_MODULES}
    on_disk = set(PACKAGE.glob("families/*/nm*.py"))
    assert sorted(str(path) for path in on_disk - registered) == []
    for module in PYTHON_RULE_MODULES:
        name = Path(module.__file__).stem
        if name.startswith("nm"):
            assert name.startswith(module.RULES[0].code.lower() + "_"), name
        assert hasattr(module, "HANDLER"), name


def test_every_shell_rule_module_is_registered_named_after_its_code_and_matched() -> None:
    registered = {Path(module.__file__).resolve() for module in SHELL_RULE_MODULES}
    on_disk = set(PACKAGE.glob("shell/nm*.py"))
    assert sorted(str(path) for path in on_disk ^ registered) == []
    for module in SHELL_RULE_MODULES:
        name = Path(module.__file__).stem
        assert name.startswith(module.RULES[0].code.lower() + "_"), name
        # Its matcher is part of the one walk: a module whose MATCHER the rewriter lacks decides nothing.
        assert module.MATCHER in ShellRewriter.__mro__, name
    # No two matchers define the same method: one would silently shadow the other.
    methods = [
        name for module in SHELL_RULE_MODULES for name in vars(module.MATCHER) if not name.startswith("__")
    ]
    assert sorted({name for name in methods if methods.count(name) > 1}) == []


def test_every_risk_module_is_registered_named_after_its_code_and_finds() -> None:
    """A compile risk (NM8xx) is one module: its rule and its `find(code)` together."""
    registered = {Path(module.__file__).resolve() for module in RISK_MODULES}
    assert sorted(str(path) for path in set(PACKAGE.glob("risks/nm*.py")) ^ registered) == []
    for module in RISK_MODULES:
        name = Path(module.__file__).stem
        assert [rule.code.lower() for rule in module.RULES] == [name[:5]], name
        assert callable(module.find), name


def test_the_xla_catch_all_leaves_alone_every_call_a_rule_of_the_family_declares(monkeypatch) -> None:
    """NM318 reads what the XLA rules declare (`CALLS`, `STATEMENTS`, `DECIDES`), not a list of its own: a new
    rule's call gets no catch-all TODO above the line the rule just rewrote."""
    import types

    from migrator import registry
    from migrator.engine import migrate_python
    from migrator.families.xla.state import declared_calls
    from migrator.transform import Handler

    source = "import torch_xla.core.xla_model as xm\n\nxm.set_replication(1)\n"
    assert [f.code for f in migrate_python(source)[1] if not f.fixed] == ["NM318"]

    class NewRule(Handler):
        CALLS = frozenset({"torch_xla.core.xla_model.set_replication"})

    module = types.ModuleType("migrator.families.xla.nm399_replication")
    module.RULES, module.HANDLER = (), NewRule
    monkeypatch.setattr(registry, "PYTHON_RULE_MODULES", (*registry.PYTHON_RULE_MODULES, module))
    declared_calls.cache_clear()
    try:
        assert "torch_xla.core.xla_model.set_replication" in declared_calls().rewritten
        # (the import it leaves is a leftover: this stand-in rule rewrites nothing)
        assert "NM318" not in [f.code for f in migrate_python(source)[1]]
    finally:
        declared_calls.cache_clear()


def test_the_guide_names_every_helper_and_shows_a_real_rule_module() -> None:
    guide = (PACKAGE.parent / "docs" / "writing-rules.md").read_text()
    helpers = [
        node.name
        for node in ast.parse((PACKAGE / "cst_helpers.py").read_text()).body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")
    ]
    assert [name for name in helpers if f"`{name}`" not in guide] == []
    assert (PACKAGE / "families" / "xla" / "nm311_compile_backend.py").read_text() in guide
