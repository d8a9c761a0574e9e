"""NM212: checkpoint consolidation calls are removed (`save_pretrained` writes a standard checkpoint)."""

from __future__ import annotations

import libcst as cst

from migrator.families.training.state import TrainingFile
from migrator.families.training.targets import CONSOLIDATION_FUNCTIONS, HINTS, TRIGGERS
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

CONSOLIDATION = Rule(
    "NM212",
    Severity.WARNING,
    "Checkpoint consolidation (`consolidate_model_parallel_checkpoints_to_unified_checkpoint`, ...)",
    "Removed: `save_pretrained` already gathers TP/FSDP shards into a standard checkpoint. Checkpoints "
    "written by optimum-neuron before the migration still need one consolidation run with optimum-neuron.",
    examples=(
        Example(
            before="""\
from optimum.neuron.distributed import consolidate_model_parallel_checkpoints_to_unified_checkpoint

# Gather the shards into one checkpoint.
consolidate_model_parallel_checkpoints_to_unified_checkpoint("out", "out/unified")
print("done")
""",
            after="""\

# Gather the shards into one checkpoint.
print("done")
""",
        ),
    ),
)
RULES = (CONSOLIDATION,)


def _statement_call(line: cst.SimpleStatementLine | None) -> cst.Call | None:
    """The call a simple statement consists of, if any."""
    if line is not None and len(line.body) == 1 and isinstance(line.body[0], cst.Expr):
        value = line.body[0].value
        return value if isinstance(value, cst.Call) else None
    return None


class Consolidation(Handler):
    CALLS = CONSOLIDATION_FUNCTIONS
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        call = _statement_call(original)
        if call is not None and self.ctx.qualified(call.func) in CONSOLIDATION_FUNCTIONS:
            self.ctx.report(call, CONSOLIDATION)
            return cst.RemoveFromParent()
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not isinstance(updated, cst.Call) or len(original.args) != len(updated.args):
            return updated  # replaced or restructured by an earlier rule
        qualified = self.ctx.qualified(original.func)
        if qualified in CONSOLIDATION_FUNCTIONS and _statement_call(self.ctx.line) is not original:
            self.file.kept.add(qualified)
            self.ctx.todo(
                original,
                CONSOLIDATION,
                "its result is used",
                "save_pretrained now writes a standard checkpoint, so read that instead (checkpoints written "
                "by optimum-neuron still need this call, run with optimum-neuron)",
            )
        return updated


HANDLER = Consolidation
