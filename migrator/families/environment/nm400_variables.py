"""NM400 (and NM401, defined in `nm401_manual_variable.py`): XLA/NxD-only environment variables set from
Python are removed, or left with a TODO when their TorchNeuron replacement is unverified (tables in
`variables.py`)."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import string_value, tidy_args
from migrator.families.environment.state import HINTS, EnvironmentFile
from migrator.families.environment.variables import MANUAL_VARIABLES, dropped_reason, torchneuron_code
from migrator.families.training.precision import BF16_VARIABLES, Bf16Plan
from migrator.families.xla.state import XlaFlowBlocks
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

DROPPED_VARIABLE = Rule(
    "NM400",
    Severity.INFO,
    "An XLA/NxD-only environment variable set from Python (`XLA_USE_BF16`, `NEURON_FUSE_SOFTMAX`, ...)",
    "Removed: nothing reads it on TorchNeuron (the bf16 variables only where NM218 puts bf16 elsewhere). In a "
    "block whose code stays on NeuronX Distributed / PyTorch/XLA for manual work (NM314, NM316), it stays with a "
    "TODO: that code still runs on the XLA flow.",
    examples=(
        Example(
            before="""\
import os

os.environ["NEURON_FUSE_SOFTMAX"] = "1"
""",
            after="""\
import os
""",
        ),
    ),
)
RULES = (DROPPED_VARIABLE,)


class VariableWrites(Handler):
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(EnvironmentFile)
        self.blocks: list[cst.CSTNode] = []  # the blocks around the walk (original nodes)

    def visit_Module(self, node: cst.Module) -> None:
        self.blocks.append(node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.blocks.append(node)

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock):
        self.blocks.pop()
        return updated

    def _runs_xla_flow(self) -> bool:
        """The block the walk is in runs code left on the XLA / NxD flow."""
        return self.ctx.state(XlaFlowBlocks).runs_xla_flow(self.blocks[-1])

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign):
        if len(original.targets) == 1:
            target = original.targets[0].target
            variable = self.file.variable_of(target)
            if variable is not None:
                return self._write(original, variable, updated)
            if (
                isinstance(target, cst.Name)
                and target.value in self.file.environment_dicts
                and not self.ctx.functions
                and isinstance(original.value, cst.Dict)
            ):  # `NEURON_ENV = {...}`, only ever given to an environment: its keys are variables set
                kept = self._without_dropped(original.value.elements, updated.value.elements)
                if kept is not None:
                    return updated.with_changes(value=updated.value.with_changes(elements=kept))
        return updated

    def leave_Del(self, original: cst.Del, updated: cst.Del):
        variable = self.file.variable_of(original.target)
        return updated if variable is None else self._write(original, variable, updated)

    def leave_Expr(self, original: cst.Expr, updated: cst.Expr):
        call = original.value
        if not isinstance(call, cst.Call):
            return updated
        if (
            isinstance(call.func, cst.Attribute)
            and self.file.is_environ(call.func.value)
            and call.func.attr.value == "update"
        ):
            return self._update(original, updated)
        variable = self.file.variable_of(call)
        if variable is None or self.ctx.qualified(call.func) == "os.getenv":
            return updated
        return self._write(original, variable, updated)

    def _write(self, original, variable: str, updated):
        reason = dropped_reason(variable, self.ctx.code)
        if variable in BF16_VARIABLES and not self._runs_xla_flow() and self._bf16_nowhere(original):
            return updated
        if reason is not None and self._runs_xla_flow():
            self.ctx.todo(
                original,
                DROPPED_VARIABLE,
                f"`{variable}` configures the XLA flow ({reason}), which the code of this block, left on "
                "NeuronX Distributed / PyTorch/XLA for manual work, still runs",
                "remove it when that code runs on TorchNeuron",
                subject=variable,
            )
            return updated
        if reason is not None:
            self.ctx.report(original, DROPPED_VARIABLE, f"`{variable}` removed: {reason}.", subject=variable)
            return cst.RemoveFromParent()
        if variable in MANUAL_VARIABLES:
            self._manual(original, variable)
        return updated

    def _bf16_nowhere(self, node: cst.CSTNode) -> bool:
        """A bf16 variable set where the script has no place for bf16 (NM218): it stays, with a TODO."""
        plan = self.ctx.state(Bf16Plan)
        sets = not isinstance(node, (cst.Del, cst.Expr)) or m.matches(
            node,
            m.Expr(m.Call(func=m.Attribute(attr=m.Name("setdefault")) | m.Attribute(attr=m.Name("putenv")))),
        )
        if not sets or plan.placed:
            return False
        self.ctx.todo(
            node,
            "NM218",
            "this variable made the XLA flow compute in bf16, and the script has no TrainingArguments, model "
            "from_pretrained or single model move where bf16 can be asked for",
            "load or cast the model in torch.bfloat16 (or pass bf16=True / --bf16 to the trainer), then delete "
            "this line",
        )
        return True

    def _manual(self, node: cst.CSTNode, variable: str) -> None:
        if torchneuron_code(self.ctx.code):  # set for TorchNeuron's own compile: not the XLA flow's setting
            return
        self.ctx.todo(node, "NM401", f"`{variable}` holds {MANUAL_VARIABLES[variable]}", subject=variable)

    def _update(self, original: cst.Expr, updated: cst.Expr):
        """`os.environ.update({...})` / `update(K=v)`: remove the dropped keys, TODO the manual ones."""
        call = original.value
        new_call = updated.value
        if len(call.args) == 1 and isinstance(call.args[0].value, cst.Dict):
            elements = call.args[0].value.elements
            new_elements = new_call.args[0].value.elements
        else:
            elements, new_elements = call.args, new_call.args
        kept = self._without_dropped(elements, new_elements)
        if kept is None:
            return updated
        if not kept:
            return cst.RemoveFromParent()
        if isinstance(new_call.args[0].value, cst.Dict) and len(call.args) == 1:
            mapping = new_call.args[0].value.with_changes(elements=kept)
            return updated.with_changes(
                value=new_call.with_changes(args=[new_call.args[0].with_changes(value=mapping)])
            )
        return updated.with_changes(value=new_call.with_changes(args=tidy_args(kept)))

    def _without_dropped(self, elements, new_elements) -> list | None:
        """Dict elements (`"K": v`) or keyword arguments (`K=v`) without the dropped variables, the manual ones
        with a TODO; None when none goes."""
        keys = [
            string_value(e.key) if isinstance(e, cst.DictElement) else e.keyword.value if e.keyword else None
            for e in elements
        ]
        kept = []
        for element, new_element, key in zip(elements, new_elements, keys, strict=True):
            if key in BF16_VARIABLES and self._bf16_nowhere(element):
                kept.append(new_element)
                continue
            reason = dropped_reason(key, self.ctx.code) if key is not None else None
            if reason is not None:
                self.ctx.report(element, DROPPED_VARIABLE, f"`{key}` removed: {reason}.", subject=key)
                continue
            if key in MANUAL_VARIABLES:
                self._manual(element, key)
            kept.append(new_element)
        if len(kept) == len(elements):
            return None
        if kept and isinstance(kept[-1], cst.DictElement | cst.StarredDictElement):
            kept[-1] = kept[-1].with_changes(comma=new_elements[-1].comma)
        return kept


HANDLER = VariableWrites
