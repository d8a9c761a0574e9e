"""NM304: `xm.optimizer_step(optimizer)` becomes `optimizer.step()`."""

from __future__ import annotations

import libcst as cst
from libcst.helpers import parse_template_expression

from migrator.families.xla.names import OPTIMIZER_STEP as OPTIMIZER_STEP_CALL
from migrator.families.xla.state import HINTS, XlaFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

OPTIMIZER_STEP = Rule(
    "NM304",
    Severity.WARNING,
    "`xm.optimizer_step(optimizer)` all-reduces gradients across replicas, then steps",
    "Rewritten to `optimizer.step()`; with more than one process the model must be wrapped in "
    "`torch.nn.parallel.DistributedDataParallel`, which now does the gradient all-reduce.",
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm

loss.backward()
xm.optimizer_step(optimizer)
""",
            after="""\

loss.backward()
optimizer.step()
""",
        ),
    ),
)
RULES = (OPTIMIZER_STEP,)


class OptimizerStep(Handler):
    CALLS = frozenset({OPTIMIZER_STEP_CALL})
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        # A multi-process script whose model NM319 cannot wrap keeps the all-reduce it needs (and a TODO).
        if self.ctx.qualified(original.func) != OPTIMIZER_STEP_CALL or original in self.file.sync_unlocated:
            return updated
        positional = [arg for arg in updated.args if not arg.keyword and not arg.star]
        options = {arg.keyword.value for arg in updated.args if arg.keyword}
        if len(positional) != 1 or not options <= {"barrier"}:
            self.ctx.todo(
                original,
                OPTIMIZER_STEP,
                "xm.optimizer_step with optimizer_args",
                "call optimizer.step(...) and wrap the model in DistributedDataParallel",
            )
            return updated
        self.ctx.report(original, OPTIMIZER_STEP)
        return parse_template_expression("{optimizer}.step()", optimizer=positional[0].value)


HANDLER = OptimizerStep
