"""NM212: checkpoint consolidation calls are removed (`save_pretrained` writes a standard checkpoint)."""

from __future__ import annotations

import ast

import libcst as cst

from migrator.cst_helpers import argument, source_code
from migrator.families.training.state import TrainingFile
from migrator.families.training.targets import CONSOLIDATION_FUNCTIONS, HINTS, TRIGGERS
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

CONSOLIDATION = Rule(
    "NM212",
    Severity.WARNING,
    "Checkpoint consolidation (`consolidate_model_parallel_checkpoints_to_unified_checkpoint`, ...)",
    "Removed: `save_pretrained` already gathers TP/FSDP shards into a standard checkpoint. Checkpoints "
    "written by optimum-neuron before the migration still need one consolidation run with optimum-neuron. "
    "A call whose output folder the script reads afterwards stays, with a TODO: nothing else writes it.",
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


def _read_elsewhere(code: str, output: cst.BaseExpression) -> bool:
    """Whether the module reads the consolidation's output folder anywhere but in the call: the same variable
    or expression loaded again, or one of its string parts in another string. Anything else (a call with
    no literal part, a subscript) counts as read: nothing proves it is not. Runs only on a consolidation
    call, so one `ast` walk of the module is cheap."""
    expression = ast.parse(source_code(output).strip(), mode="eval").body
    text = ast.unparse(expression)
    parts = [node.value for node in ast.walk(expression) if isinstance(node, ast.Constant)]
    parts = [part for part in parts if isinstance(part, str) and part.strip("/.")]
    if not isinstance(expression, (ast.Name, ast.Attribute, ast.Constant)) and not parts:
        return True
    try:
        module = ast.parse(code)
    except SyntaxError:  # libcst reads some code that this Python's ast does not
        return True
    loads = strings = 0
    for node in ast.walk(module):
        if isinstance(node, ast.Constant):
            strings += isinstance(node.value, str) and any(part in node.value for part in parts)
        elif type(node) is type(expression) and not isinstance(
            getattr(node, "ctx", None), (ast.Store, ast.Del)
        ):
            loads += ast.unparse(node) == text
    return loads > 1 or strings > len(parts)


class Consolidation(Handler):
    CALLS = CONSOLIDATION_FUNCTIONS
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        call = _statement_call(original)
        if call is None:
            return updated
        qualified = self.ctx.qualified(call.func)
        if qualified not in CONSOLIDATION_FUNCTIONS:
            return updated
        output = argument(call, 1, "output_dir")
        if output is not None and _read_elsewhere(self.ctx.code, output):
            self.file.kept.add(qualified)
            self.ctx.todo(
                call,
                CONSOLIDATION,
                f"the script reads `{source_code(output)}` (the folder this call writes) afterwards, and "
                "nothing else writes it",
                "save_pretrained / the Trainer's checkpoint is now a standard checkpoint: read that folder "
                "instead, then delete this call",
            )
            return updated
        self.ctx.report(call, CONSOLIDATION)
        return cst.RemoveFromParent()

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
