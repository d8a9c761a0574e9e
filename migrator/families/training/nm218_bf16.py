"""NM218: `XLA_USE_BF16` / `XLA_DOWNCAST_BF16` made the XLA flow compute in bf16; when NM400 removes the
variable, the script asks for bf16 where TorchNeuron reads it."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import (
    keyword_arg,
    source_code,
    with_appended,
)
from migrator.families.training.precision import BF16_VARIABLES, Bf16Plan, last_name
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

BF16_PRECISION = Rule(
    "NM218",
    Severity.WARNING,
    "`XLA_USE_BF16=1` / `XLA_DOWNCAST_BF16=1` set in Python made the XLA flow compute in bf16",
    "The variable goes (NM400) and bf16 is asked for where the script says how it trains: `bf16=True` in "
    "its `TrainingArguments` / `SFTConfig`, else `dtype=torch.bfloat16` at its model `from_pretrained`, else "
    "`dtype=torch.bfloat16` where a plain loop moves the optimized model to the device, with a TODO there to "
    "cast the loop's float inputs as XLA did. With none of those, the variable stays with a TODO: choose bf16 "
    "there by hand.",
    examples=(
        Example(
            before="""\
import os

from transformers import TrainingArguments

os.environ["XLA_USE_BF16"] = "1"
args = TrainingArguments(output_dir="out", learning_rate=2e-5)
""",
            after="""\
import os

from transformers import TrainingArguments
args = TrainingArguments(output_dir="out", learning_rate=2e-5, bf16=True)
""",
        ),
        Example(
            before="""\
import os

import torch
import torch_xla.core.xla_model as xm

os.environ["XLA_DOWNCAST_BF16"] = "1"
device = xm.xla_device()
model = Net().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
""",
            after="""\
import os

import torch
device = torch.device("neuron")
# TODO(neuron-migrate): NM218 the removed XLA bf16 variable also cast every float tensor the loop moves to the device, and the model is now moved as bf16 (float32 inputs to it raise a dtype mismatch); cast the loop's float inputs with `.to(device, dtype=torch.bfloat16)` where it moves them (not its integer labels or ids)
model = Net().to(device, dtype=torch.bfloat16)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
""",
        ),
    ),
)
RULES = (BF16_PRECISION,)


class Bf16Precision(Handler):
    """Adds bf16 to the calls `Bf16Plan` chose; the variable's removal (or its TODO) is NM400's."""

    HINTS = BF16_VARIABLES

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.plan = ctx.state(Bf16Plan)

    def visit_Module(self, node: cst.Module) -> None:
        # The walk's hints exist once every handler does: from here on it enters the chosen calls' statements.
        for call in self.plan.targets | self.plan.unpacking:
            self.ctx.watch(last_name(call.func) or "")

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if original in self.plan.unpacking:
            spread = ", ".join(f"**{source_code(arg.value)}" for arg in original.args if arg.star == "**")
            added = "bf16=True" if self.plan.kind == "arguments" else "dtype=torch.bfloat16"
            keyword = added.partition("=")[0]
            self.ctx.todo(
                original,
                BF16_PRECISION,
                f"the removed XLA bf16 variable made the XLA flow compute in bf16, and `{spread}` may already pass "
                f"{keyword} (a keyword given twice raises TypeError)",
                f"make what it unpacks hold {added}, or pass {added} here if it has no {keyword}",
            )
            return updated
        if original not in self.plan.targets or not isinstance(updated, cst.Call):
            return updated
        if self.plan.kind == "arguments":
            added, what = keyword_arg("bf16", cst.Name("True")), "`bf16=True` added"
        else:
            self.ctx.add_import("torch")
            added = keyword_arg("dtype", cst.parse_expression("torch.bfloat16"))
            what = "`dtype=torch.bfloat16` added"
        if self.plan.kind == "move":
            # XLA cast every float tensor on the device, the loop's inputs too; which of the tensors the loop
            # moves are float (inputs) and which are not (labels, ids) is known only when it runs.
            self.ctx.todo(
                original,
                BF16_PRECISION,
                "the removed XLA bf16 variable also cast every float tensor the loop moves to the device, and the "
                "model is now moved as bf16 (float32 inputs to it raise a dtype mismatch)",
                "cast the loop's float inputs with `.to(device, dtype=torch.bfloat16)` where it moves them (not "
                "its integer labels or ids)",
            )
        else:
            message = f"{what}: the removed XLA bf16 variable made the XLA flow compute in bf16."
            self.ctx.report(original, BF16_PRECISION, message)
        return updated.with_changes(args=with_appended(list(updated.args), [added]))


HANDLER = Bf16Precision
