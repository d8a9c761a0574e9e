"""NM302: the XLA device becomes the neuron device."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import string_value
from migrator.families.xla.names import DEVICE_CALLS, LOCAL_RANK, XLA_DEVICE_STRINGS
from migrator.families.xla.state import HINTS, XlaFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

XLA_DEVICE = Rule(
    "NM302",
    Severity.INFO,
    '`xm.xla_device()` / `torch_xla.device()` / `torch.device("xla")` (or `"xla:0"`) picks the XLA device',
    'Rewritten to `torch.device("neuron")`; in a distributed script, and in a module without an entry point '
    "of its own (its importers may run several processes), the index is the LOCAL_RANK torchrun sets.",
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm

device = xm.xla_device()
model.to(device)
""",
            after="""\
import torch

device = torch.device("neuron")
model.to(device)
""",
        ),
    ),
)
RULES = (XLA_DEVICE,)


class NeuronDevice(Handler):
    CALLS = DEVICE_CALLS | {"torch.device"}
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        name = self.ctx.qualified(original.func)
        if name in DEVICE_CALLS:
            return self._xla_device(original, updated)
        if name == "torch.device":
            return self._torch_device(original, updated)
        return updated

    def _xla_device(self, original: cst.Call, updated: cst.Call):
        if updated.args:
            self.ctx.todo(
                original,
                "NM318",
                "XLA device with an explicit index",
                "pick the neuron device by hand",
            )
            return updated
        self.ctx.report(original, XLA_DEVICE)
        self.ctx.add_import("torch")
        if self.file.per_process_device:
            self.ctx.add_import("os")
            self._record_local_device(original)
            return self.file.expression(f'torch.device("neuron", {LOCAL_RANK})')
        return self.file.expression('torch.device("neuron")')

    def _torch_device(self, original: cst.Call, updated: cst.Call):
        given = string_value(updated.args[0].value) if updated.args else None
        if given not in XLA_DEVICE_STRINGS or (given != "xla" and len(updated.args) > 1):
            return updated
        self.ctx.report(original, XLA_DEVICE)
        if (
            self.file.per_process_device and len(updated.args) == 1
        ):  # the XLA runtime gave each process its device
            self._record_local_device(original)
            self.ctx.add_import("os")
            return self.file.expression(f'torch.device("neuron", {LOCAL_RANK})')
        first = updated.args[0].with_changes(value=cst.SimpleString('"neuron"'))
        return updated.with_changes(args=[first, *updated.args[1:]])

    def _record_local_device(self, call: cst.Call) -> None:
        """`device = <call>`: `device` is this process's device (NM319 gives DDP its index)."""
        line = self.ctx.line
        assignment = m.Assign(targets=[m.AssignTarget(m.Name())])
        if line is not None and m.matches(line.body[0], assignment) and line.body[0].value is call:
            self.file.local_devices.add(line.body[0].targets[0].target.value)


HANDLER = NeuronDevice
