"""NM301 / NM312: calls that only steer or report on the lazy XLA graph are removed."""

from __future__ import annotations

import libcst as cst

from migrator.families.xla.names import METRICS_CALLS, SYNC_CALLS
from migrator.families.xla.state import HINTS, XlaFile, whole_statement_call
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

MARK_STEP = Rule(
    "NM301",
    Severity.INFO,
    "`xm.mark_step()` / `torch_xla.sync()` cuts the lazy XLA graph",
    "Removed: TorchNeuron runs eagerly, there is no lazy graph to cut.",
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm

for batch in loader:
    loss = model(batch).sum()
    loss.backward()
    optimizer.step()
    xm.mark_step()
""",
            after="""\

for batch in loader:
    loss = model(batch).sum()
    loss.backward()
    optimizer.step()
""",
        ),
    ),
)
METRICS_REPORT = Rule(
    "NM312",
    Severity.INFO,
    "`met.metrics_report()` / `met.short_metrics_report()` prints XLA compile/execution counters",
    "Removed; recompilations show with `TORCH_LOGS=recompiles`.",
    examples=(
        Example(
            before="""\
import torch_xla.debug.metrics as met

print(met.short_metrics_report())
""",
            after="""\

""",
        ),
    ),
)
RULES = (MARK_STEP, METRICS_REPORT)


class RemoveGraphCalls(Handler):
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        call = whole_statement_call(original)
        if call is None or whole_statement_call(updated) is None:
            return updated
        name = self.ctx.qualified(call.func)
        if name in SYNC_CALLS or name in METRICS_CALLS or self.file.prints_metrics(call):
            self.ctx.report(call, MARK_STEP if name in SYNC_CALLS else METRICS_REPORT)
            return cst.RemoveFromParent()
        return updated


HANDLER = RemoveGraphCalls
