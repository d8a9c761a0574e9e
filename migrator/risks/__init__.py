"""Compile risks (NM8xx): what makes TorchNeuron recompile or hang. Each rule is a module with its definition
and its `find(code)`, which reads a file's code as `usercode.reading` parses it (Python, notebook cells, shell
commands); the checklist lists what they find. No rule rewrites: each names the codes whose rewrite removes
the risk (`fixed_by`), so the checklist shows a risk the migrator already handles as a check."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from migrator.risks.base import Risk
from migrator.rules import Rule
from usercode.reading import Code

# Each has `RULES` (its rule) and `find(code)` (what it finds in one file); each is named once, here.
RISK_MODULES: tuple[ModuleType, ...] = tuple(
    import_module(f"{__name__}.{name}")
    for name in (
        "nm801_unpadded_prompts",
        "nm802_unpadded_training",
        "nm803_padding_free",
        "nm804_no_pad_multiple",
        "nm805_dynamic_compile",
        "nm806_mark_dynamic",
        "nm807_dynamic_batch",
        "nm808_automatic_dynamic",
        "nm809_async_load",
    )
)
RULES: tuple[Rule, ...] = tuple(rule for module in RISK_MODULES for rule in module.RULES)


def find_risks(code: Code) -> list[Risk]:
    """Every compile risk of one file, in file order (cell, line, code)."""
    found = [risk for module in RISK_MODULES for risk in module.find(code)]
    return sorted(found, key=lambda risk: (risk.cell or 0, risk.line, risk.rule.code))
