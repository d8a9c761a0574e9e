"""The rule registry: finds every rule module in its kind's package, and builds the table of rules.

A rule is a module named after its code, `nm<code>_<what>.py`, in the package of its kind (`rules.KINDS`),
whatever its family; nothing else lists it, so a new module there is registered (`make new-rule` writes one).
Each has `RULES` (its one rule) and what decides it:
- Python rewrites, `migrator/families/<family>/`: `HANDLER`, a `transform.Handler` (None: a rule another
  module's handler decides, or the family's scan, `families/leftovers/marking.py`, after the walk). A family's
  `state` tracker is found too;
- shell launchers, `migrator/shell/`: `MATCHER`, a mixin of `shell.rewrite.ShellRewriter` that declares the
  events of the walk it takes (`HOOKS`; the rewriter finds the modules the same way, `rules.rule_modules`), or
  None where another module's matcher decides the rule;
- notebook cells, `migrator/notebook_rules/`: functions taking the events of the reading of cells they declare
  (`HOOKS`; `migrator/notebook.py` finds them the same way);
- compile risks, `migrator/risks/`: `find(code)`, what it finds in one file (`reports/inventory.py`).
No rule module imports another or this one: a handler reports another module's code by `ctx.rule(code)`.
"""

from __future__ import annotations

import pkgutil
from importlib import import_module
from types import ModuleType

from migrator.risks.base import Risk
from migrator.rules import KINDS, Rule, is_rule_module, rule_modules
from migrator.transform import Handler
from usercode.reading import Code

# The Python walk calls the handlers at each node in this order; it matters only where two rules touch the same
# node (a later rule gets what an earlier one returned). NM901 first: its TODO goes above an import before any
# other rule's. Then XLA idioms (device, step, collectives), environment, training, inference, leftovers: a
# family's `state` tracker before its rules (they read what it tracked), then its rules by code, except those
# `RUN_FIRST` names.
PYTHON_FAMILIES = ("manual", "xla", "environment", "training", "inference", "leftovers")
RUN_FIRST = {
    # Statement removals before nm202 inserts statements ahead of a line; nm206 adds to nm202's calls.
    "training": ("nm212_consolidation", "nm215_trn_config_assignment"),
}


def _family_modules(family: str) -> tuple[ModuleType, ...]:
    """A family's modules that hold rules or a handler: `state`, `RUN_FIRST`, then its rule modules by code."""
    package = f"{KINDS['python']}.{family}"
    names = sorted(info.name for info in pkgutil.iter_modules(import_module(package).__path__))
    first = [name for name in ("state", *RUN_FIRST.get(family, ())) if name in names]
    coded = [name for name in names if is_rule_module(name) and name not in first]
    modules = [import_module(f"{package}.{name}") for name in (*first, *coded)]
    return tuple(module for module in modules if hasattr(module, "RULES"))


PYTHON_RULE_MODULES: tuple[ModuleType, ...] = tuple(
    module for family in PYTHON_FAMILIES for module in _family_modules(family)
)
PYTHON_HANDLERS: tuple[type[Handler], ...] = tuple(
    module.HANDLER for module in PYTHON_RULE_MODULES if module.HANDLER is not None
)
SHELL_RULE_MODULES = rule_modules(KINDS["shell"])
NOTEBOOK_RULE_MODULES = rule_modules(KINDS["notebook"])
RISK_MODULES = rule_modules(KINDS["risk"])

SHELL_RULES: tuple[Rule, ...] = tuple(rule for module in SHELL_RULE_MODULES for rule in module.RULES)
PYTHON_RULES: dict[str, Rule] = {rule.code: rule for module in PYTHON_RULE_MODULES for rule in module.RULES}


def find_risks(code: Code) -> list[Risk]:
    """Every compile risk of one file, in file order (cell, line, code)."""
    found = [risk for module in RISK_MODULES for risk in module.find(code)]
    return sorted(found, key=lambda risk: (risk.cell or 0, risk.line, risk.rule.code))


def _table() -> tuple[dict[str, Rule], dict[str, str]]:
    rules: dict[str, Rule] = {}
    homes: dict[str, str] = {}
    modules = (*PYTHON_RULE_MODULES, *SHELL_RULE_MODULES, *NOTEBOOK_RULE_MODULES, *RISK_MODULES)
    for module in modules:
        for rule in module.RULES:
            if rule.code in homes:  # one home each: a module lists only the rules it defines
                raise ValueError(f"rule {rule.code} listed by {homes[rule.code]} and {module.__name__}")
            rules[rule.code], homes[rule.code] = rule, module.__name__
    return dict(sorted(rules.items())), homes


RULES, RULE_MODULES = (
    _table()
)  # code -> rule; code -> the module that defines it (`migrator.shell.nm461_flags`)
