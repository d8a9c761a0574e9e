"""NM402 (and NM403, defined in `nm403_precompile_read.py`): tests of the pre-compilation variables (set only
by `neuron_parallel_compile`) are folded to their value with the variable unset; a read that cannot be folded
gets a TODO."""

from __future__ import annotations

import libcst as cst

from migrator.families.environment.state import HINTS, UNKNOWN, EnvironmentFile
from migrator.families.environment.variables import PRECOMPILE_VARIABLES
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

PRECOMPILE_TEST = Rule(
    "NM402",
    Severity.INFO,
    "A test of `NEURON_EXTRACT_GRAPHS_ONLY` / `NEURON_PARALLEL_COMPILE` (set only by neuron_parallel_compile)",
    "Folded to its value with the variable unset: the branch for the graph-extraction run is removed.",
    examples=(
        Example(
            before="""\
import os

if os.environ.get("NEURON_EXTRACT_GRAPHS_ONLY"):
    max_steps = 10
else:
    max_steps = 1000
""",
            after="""\
import os

max_steps = 1000
""",
        ),
    ),
)
RULES = (PRECOMPILE_TEST,)


class PrecompileTests(Handler):
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(EnvironmentFile)

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign):
        if len(original.targets) == 1 and self.file.variable_of(original.targets[0].target) is None:
            value = self.file.fold(original.value)
            if value is not UNKNOWN:
                self.ctx.report(original.value, PRECOMPILE_TEST)
                return updated.with_changes(value=cst.parse_expression(repr(value)))
        return updated

    def leave_If(self, original: cst.If, updated: cst.If):
        value = self.file.fold(original.test)
        if value is UNKNOWN:
            return updated
        self.ctx.report(original.test, PRECOMPILE_TEST)
        if value:
            return _inline(updated.body, updated.leading_lines)
        if updated.orelse is None:
            return cst.RemoveFromParent()
        if isinstance(updated.orelse, cst.If):  # elif: becomes the if
            return updated.orelse.with_changes(leading_lines=updated.leading_lines)
        return _inline(updated.orelse.body, updated.leading_lines)

    def leave_IfExp(self, original: cst.IfExp, updated: cst.IfExp):
        value = self.file.fold(original.test)
        if value is UNKNOWN:
            return updated
        self.ctx.report(original.test, PRECOMPILE_TEST)
        return updated.body if value else updated.orelse

    def leave_Comparison(self, original: cst.Comparison, updated: cst.Comparison):
        self._unfolded_read(original)
        return updated

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript):
        self._unfolded_read(original)
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if self.ctx.qualified(original.func) == "os.getenv" or (
            isinstance(original.func, cst.Attribute) and original.func.attr.value == "get"
        ):
            self._unfolded_read(original)
        return updated

    def _unfolded_read(self, original) -> None:
        if original in self.file.handled:
            return
        if self.ctx.shown and isinstance(original, cst.Call):  # `print(os.environ.get(...))` decides nothing
            return  # (`print(os.environ[...])` raises KeyError: it does)
        variable = self.file.variable_of(original)
        if variable in PRECOMPILE_VARIABLES:
            self.ctx.todo(
                original,
                "NM403",
                f"`{variable}` is only set by neuron_parallel_compile, which TorchNeuron does not have",
                "treat it as unset and remove the code for the graph-extraction run",
                subject=variable,
            )


def _inline(block, leading_lines):
    if isinstance(block, cst.SimpleStatementSuite):
        statements = [cst.SimpleStatementLine(body=block.body)]
    else:
        statements = list(block.body)
    first = statements[0]
    statements[0] = first.with_changes(leading_lines=[*leading_lines, *first.leading_lines])
    return cst.FlattenSentinel(statements)


HANDLER = PrecompileTests
