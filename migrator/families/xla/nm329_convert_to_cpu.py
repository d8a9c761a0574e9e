"""NM329: `xm._maybe_convert_to_cpu(data)` becomes the file's `_to_device(data, "cpu")` helper: a CPU copy of
every tensor of a nested dict/list/tuple (what `xm.save` writes, NM306)."""

from __future__ import annotations

import libcst as cst

from migrator.families.xla.names import XM
from migrator.families.xla.state import _TO_DEVICE_SOURCE, HINTS, XlaFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

CONVERT_TO_CPU = Rule(
    "NM329",
    Severity.INFO,
    "`xm._maybe_convert_to_cpu(data)`: a copy of `data` whose device tensors are on the CPU",
    'Rewritten to `_to_device(data, "cpu")`, a small helper added to the file that copies every tensor of a '
    "(nested) dict/list/tuple to the CPU and keeps the other values.",
    examples=(
        Example(
            before="""\
import torch
import torch_xla.core.xla_model as xm

cpu_state = xm._maybe_convert_to_cpu(model.state_dict())
torch.save(cpu_state, "model.pt")
""",
            after=f"""\
import torch


{_TO_DEVICE_SOURCE.strip()}


cpu_state = _to_device(model.state_dict(), "cpu")
torch.save(cpu_state, "model.pt")
""",
        ),
    ),
)
RULES = (CONVERT_TO_CPU,)


class ConvertToCpu(Handler):
    HINTS = HINTS
    CALLS = frozenset({f"{XM}._maybe_convert_to_cpu"})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        # `convert=False` only waits for the tensors' pending work: that call copies nothing.
        if len(updated.args) != 1 or updated.args[0].keyword or updated.args[0].star:
            self.ctx.todo(
                original,
                CONVERT_TO_CPU,
                "`xm._maybe_convert_to_cpu` with other arguments than the data has no mechanical rewrite",
                "copy the tensors to the CPU with .cpu() (or drop the call where `convert=False` only waited "
                "for the device)",
            )
            return updated
        self.ctx.report(original, CONVERT_TO_CPU)
        self.ctx.add_import("torch")
        self.file.helpers.add("_to_device")
        data = updated.args[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return updated.with_changes(
            func=cst.Name("_to_device"), args=[data, cst.Arg(cst.SimpleString('"cpu"'))]
        )


HANDLER = ConvertToCpu
