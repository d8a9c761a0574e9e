"""NM212: checkpoint consolidation calls are removed (`save_pretrained` writes a standard checkpoint)."""

from __future__ import annotations

import ast

import libcst as cst

from migrator.cst_helpers import argument, source_code
from migrator.families.training.state import TrainingFile
from migrator.families.training.targets import CONSOLIDATION_FUNCTIONS, HINTS, TRIGGERS
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler
from usercode.python import ast_nodes

CONSOLIDATION = Rule(
    "NM212",
    Severity.WARNING,
    "Checkpoint consolidation (`consolidate_model_parallel_checkpoints_to_unified_checkpoint`, ...)",
    "Removed: `save_pretrained` already gathers TP/FSDP shards into a standard checkpoint. Checkpoints "
    "written by optimum-neuron before the migration still need one consolidation run with optimum-neuron. "
    "A call whose output folder the script reads afterwards becomes a copy of the checkpoint folder it "
    "consolidated (`shutil.copytree`): the migrated training writes that folder as a standard checkpoint "
    "already. In such a file, a path into optimum-neuron's adapter folder (`adapter_default/...`) becomes "
    "the same file at the checkpoint's top level, where PEFT writes the default adapter. A call whose "
    "result is used stays, with a TODO.",
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
        Example(
            before="""\
import os
from optimum.neuron.models.training import consolidate_model_parallel_checkpoints_to_unified_checkpoint
from peft import AutoPeftModelForCausalLM

unified = os.path.join("out/checkpoint-100", "unified")
consolidate_model_parallel_checkpoints_to_unified_checkpoint("out/checkpoint-100", unified)
config = os.path.join("out/checkpoint-100", "adapter_default", "adapter_config.json")
model = AutoPeftModelForCausalLM.from_pretrained(unified)
""",
            after="""\
import os
from peft import AutoPeftModelForCausalLM
import shutil

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

unified = os.path.join("out/checkpoint-100", "unified")
shutil.copytree("out/checkpoint-100", unified, dirs_exist_ok=True)
config = os.path.join("out/checkpoint-100", "adapter_config.json")
model = AutoPeftModelForCausalLM.from_pretrained(unified)
""",
        ),
    ),
)
RULES = (CONSOLIDATION,)
# Where optimum-neuron's checkpoints keep the default LoRA adapter's files; PEFT keeps them at the top.
_ADAPTER_FOLDER = "adapter_default"
_JOIN = "os.path.join"


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
    parts = [node.value for node in ast_nodes(expression) if isinstance(node, ast.Constant)]
    parts = [part for part in parts if isinstance(part, str) and part.strip("/.")]
    if not isinstance(expression, (ast.Name, ast.Attribute, ast.Constant)) and not parts:
        return True
    try:
        module = ast.parse(code)
    except SyntaxError:  # libcst reads some code that this Python's ast does not
        return True
    loads = strings = 0
    for node in ast_nodes(module):
        if isinstance(node, ast.Constant):
            strings += isinstance(node.value, str) and any(part in node.value for part in parts)
        elif type(node) is type(expression) and not isinstance(
            getattr(node, "ctx", None), (ast.Store, ast.Del)
        ):
            loads += ast.unparse(node) == text
    return loads > 1 or strings > len(parts)


def _string(node: cst.BaseExpression) -> str | None:
    return node.evaluated_value if isinstance(node, cst.SimpleString) else None


class Consolidation(Handler):
    CALLS = CONSOLIDATION_FUNCTIONS | {_JOIN}
    HINTS = HINTS | {_ADAPTER_FOLDER}
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)
        # optimum-neuron's adapter folder is named in a file that consolidates its checkpoints
        self.consolidates = _ADAPTER_FOLDER in ctx.code and not CONSOLIDATION_FUNCTIONS.isdisjoint(
            ctx.module_imports.values()
        )
        self.joined: set[cst.SimpleString] = set()  # the folder as a component of os.path.join (leave_Call)

    def visit_Call(self, node: cst.Call) -> None:
        if self.consolidates and self.ctx.qualified(node.func) == _JOIN:
            self.joined.update(arg.value for arg in node.args[1:] if _string(arg.value) == _ADAPTER_FOLDER)

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString):
        """`"adapter_default/NAME"` -> `"NAME"`; the folder named anywhere else but in os.path.join: a TODO."""
        if (
            not self.consolidates
            or _ADAPTER_FOLDER not in (_string(original) or "")
            or original in self.joined
        ):
            return updated
        start = len(updated.prefix) + len(updated.quote)
        if updated.value[start:].startswith(_ADAPTER_FOLDER + "/"):
            self.ctx.report(original, CONSOLIDATION)
            return updated.with_changes(
                value=updated.value[:start] + updated.value[start + len(_ADAPTER_FOLDER) + 1 :]
            )
        self.ctx.todo(
            original,
            CONSOLIDATION,
            f"`{_ADAPTER_FOLDER}` is the folder where optimum-neuron's checkpoints keep the default LoRA "
            "adapter; the migrated training's checkpoints (PEFT's) keep its files at the checkpoint's top",
            "name the file at the checkpoint's top instead",
        )
        return updated

    def _without_adapter_folder(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        kept = [
            new for old, new in zip(original.args, updated.args, strict=True) if old.value not in self.joined
        ]
        if len(kept) == len(updated.args):
            return updated
        self.ctx.report(original, CONSOLIDATION)
        kept[-1] = kept[-1].with_changes(comma=updated.args[-1].comma)
        return updated.with_changes(args=kept)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        call = _statement_call(original)
        if call is None:
            return updated
        qualified = self.ctx.qualified(call.func)
        if qualified not in CONSOLIDATION_FUNCTIONS:
            return updated
        checkpoint, output = argument(call, 0, "checkpoint_dir"), argument(call, 1, "output_dir")
        self.ctx.report(call, CONSOLIDATION)
        if (
            checkpoint is None
            or output is None
            or source_code(checkpoint).strip() == source_code(output).strip()
            or not _read_elsewhere(self.ctx.code, output)
        ):
            return cst.RemoveFromParent()
        # The script reads the folder this call wrote: the standard checkpoint is that folder's content.
        self.ctx.add_import("shutil")
        copy = cst.parse_expression("shutil.copytree(checkpoint, output, dirs_exist_ok=True)")
        copy = copy.with_changes(args=(cst.Arg(checkpoint), cst.Arg(output), *copy.args[2:]))
        return updated.with_changes(body=(cst.Expr(copy),))

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not isinstance(updated, cst.Call) or len(original.args) != len(updated.args):
            return updated  # replaced or restructured by an earlier rule
        qualified = self.ctx.qualified(original.func)
        if qualified == _JOIN:
            return self._without_adapter_folder(original, updated)
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
