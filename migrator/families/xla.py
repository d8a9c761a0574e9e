"""PyTorch/XLA idioms (NM3xx) -> torch / torch.distributed on device "neuron"."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.rules import Severity, define
from migrator.transform import Family

XLA_MODEL = "torch_xla.core.xla_model"

MARK_STEP = define(
    "NM301",
    Severity.INFO,
    "`xm.mark_step()` / `torch_xla.sync()` cuts the lazy XLA graph",
    "Removed: TorchNeuron runs eagerly, there is no lazy graph to cut.",
)
XLA_DEVICE = define(
    "NM302",
    Severity.INFO,
    "`xm.xla_device()` / `torch_xla.device()` picks the XLA device",
    'Rewritten to `torch.device("neuron")`.',
)


class XlaFamily(Family):
    name = "xla"
    SYMBOLS = frozenset(
        {f"{XLA_MODEL}.mark_step", f"{XLA_MODEL}.xla_device", "torch_xla.sync", "torch_xla.device"}
    )

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        if len(original.body) == 1 and m.matches(original.body[0], m.Expr(m.Call())):
            call = original.body[0].value
            if self.ctx.qualified(call.func) in (f"{XLA_MODEL}.mark_step", "torch_xla.sync"):
                self.ctx.report(call, MARK_STEP)
                return cst.RemoveFromParent()
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if self.ctx.qualified(original.func) in (f"{XLA_MODEL}.xla_device", "torch_xla.device"):
            self.ctx.report(original, XLA_DEVICE)
            self.ctx.add_import("torch")
            return cst.parse_expression('torch.device("neuron")')
        return updated
