"""NM320: the `"xla"` device written as a string (`device = "xla"`, `.to("xla")`, `device="xla"`)."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import dotted_name, string_value
from migrator.families.xla.names import LOCAL_RANK, XLA_DEVICE_STRINGS
from migrator.families.xla.state import HINTS, XlaFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

DEVICE_STRING = Rule(
    "NM320",
    Severity.INFO,
    '`"xla"` as a device string (`device = "xla"`, `.to("xla")`, `torch.zeros(..., device="xla")`; `"xla:0"` '
    "given to a call, the device `xm.xla_device()` returns)",
    'Rewritten to `"neuron"`; in a script that runs several processes, to `torch.device("neuron", '
    "LOCAL_RANK)` (the XLA runtime gave each process its own device). A variable the file also compares to "
    '`"xla"` is left with a TODO: its value and its tests change together.',
    examples=(
        Example(
            before="""\
import torch

device = "xla"
model = Net().to(device)
mask = torch.ones(8, device="xla")
ids = torch.tensor([[101, 102]], device="xla:0")
""",
            after="""\
import torch

device = "neuron"
model = Net().to(device)
mask = torch.ones(8, device="neuron")
ids = torch.tensor([[101, 102]], device="neuron")
""",
        ),
        Example(
            before="""\
import torch

if torch.cuda.is_available():
    device = "cuda"
else:
    device = "xla"
if device == "xla":
    batch_size = 8
""",
            after="""\
import torch

if torch.cuda.is_available():
    device = "cuda"
else:
    # TODO(neuron-migrate): NM320 `device` is compared to "xla" in this file, so rewriting this value alone would send it down another branch; rewrite this value and each `== "xla"` test of it to "neuron" together, with the XLA-only code of that branch
    device = "xla"
# TODO(neuron-migrate): NM501 "xla" is a PyTorch/XLA device or rendezvous; use "neuron" for the device and drop the init_method (torchrun sets the rendezvous)
if device == "xla":
    batch_size = 8
""",
        ),
    ),
)
RULES = (DEVICE_STRING,)


class DeviceString(Handler):
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def _device(self, original: cst.CSTNode) -> cst.BaseExpression:
        self.ctx.report(original, DEVICE_STRING)
        if not self.file.per_process_device:
            return cst.SimpleString('"neuron"')
        self.ctx.add_import("torch")
        self.ctx.add_import("os")
        return self.file.expression(f'torch.device("neuron", {LOCAL_RANK})')

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign):
        if string_value(original.value) != "xla" or len(original.targets) != 1:
            return updated
        target = dotted_name(original.targets[0].target)
        if target is None or "device" not in target.rpartition(".")[2].lower():
            return updated
        tested = self.file.tested_as_xla(target.rpartition(".")[2])
        if tested:
            # `device == "xla"` further on, here or in a function it is handed to, picks the XLA branch:
            # rewriting the value alone changes the path.
            self.ctx.todo(
                original.value,
                DEVICE_STRING,
                f'`{target}` is compared to "xla" {tested}, so rewriting this value alone would send it down '
                "another branch",
                'rewrite this value and each `== "xla"` test of it to "neuron" together, with the XLA-only '
                "code of that branch",
                subject=target,
            )
            return updated
        self.file.xla_device_names.add(target)
        self.ctx.watch(target.rpartition(".")[2])  # its use as a backend, `init_process_group(device)`
        if self.file.per_process_device:
            self.file.local_devices.add(target)
        return updated.with_changes(value=self._device(original.value))

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not isinstance(updated, cst.Call):  # an earlier rule replaced the call
            return updated
        args = list(updated.args)
        for index, arg in enumerate(original.args):
            on_device = (
                arg.keyword.value == "device"
                if arg.keyword
                else index == 0
                and isinstance(original.func, cst.Attribute)
                and original.func.attr.value == "to"
            )
            if on_device and string_value(arg.value) in XLA_DEVICE_STRINGS:
                args[index] = args[index].with_changes(value=self._device(arg.value))
        return updated.with_changes(args=args) if args != list(updated.args) else updated


HANDLER = DeviceString
