"""NM307: XLA device loaders become a small `_DeviceLoader` helper over the plain loader."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.helpers import parse_template_expression

from migrator.families.xla.names import DEVICE_LOADERS, PARALLEL_LOADER
from migrator.families.xla.state import HINTS, XlaFile
from migrator.rules import Rule, Severity
from migrator.transform import Handler

DEVICE_LOADER = Rule(
    "NM307",
    Severity.INFO,
    "`pl.MpDeviceLoader(loader, device)` / `pl.ParallelLoader(...).per_device_loader(device)`",
    "Rewritten to `_DeviceLoader(loader, device)`, a small helper added to the file that iterates the plain "
    "loader and moves each batch (tensors in dicts, lists, tuples) to the device.",
)
RULES = (DEVICE_LOADER,)
# Tuning options of the XLA loaders; the helper loader has nothing to tune.
LOADER_OPTIONS = frozenset(
    {
        "loader_prefetch_size",
        "device_prefetch_size",
        "host_to_device_transfer_threads",
        "batches_per_execution",
        "fixed_batch_size",
        "input_sharding",
        "loader_prefetch_time",
    }
)
_PER_DEVICE_LOADER = m.Attribute(value=m.Call(), attr=m.Name("per_device_loader"))


class DeviceLoader(Handler):
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        name = self.ctx.qualified(original.func)
        if name is None and m.matches(original.func, _PER_DEVICE_LOADER):
            return self._parallel_loader(original, updated)
        if name in DEVICE_LOADERS:
            return self._device_loader(original, updated, updated.args)
        return updated

    def _parallel_loader(self, original: cst.Call, updated: cst.Call):
        loader_call = original.func.value
        if self.ctx.qualified(loader_call.func) != PARALLEL_LOADER:
            return updated
        inner = updated.func.value
        positional = [arg for arg in inner.args if not arg.keyword]
        if not positional or len(updated.args) != 1:
            self.ctx.todo(
                original,
                DEVICE_LOADER,
                "ParallelLoader without a loader argument",
                "iterate the DataLoader and move each batch with .to(device)",
            )
            return updated
        return self._device_loader(original, updated, [positional[0], updated.args[0]])

    def _device_loader(self, original: cst.Call, updated: cst.Call, args):
        loader_args = [arg for arg in args if not (arg.keyword and arg.keyword.value in LOADER_OPTIONS)]
        if len(loader_args) != 2 or any(arg.keyword or arg.star for arg in loader_args):
            self.ctx.todo(
                original,
                DEVICE_LOADER,
                "device loader with unexpected arguments",
                "iterate the DataLoader and move each batch with .to(device)",
            )
            return updated
        self.ctx.report(original, DEVICE_LOADER)
        self.file.helpers.update(("_to_device", "_DeviceLoader"))
        return parse_template_expression(
            "_DeviceLoader({loader}, {device})", loader=loader_args[0].value, device=loader_args[1].value
        )


HANDLER = DeviceLoader
