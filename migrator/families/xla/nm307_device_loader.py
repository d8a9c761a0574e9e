"""NM307: XLA device loaders become a small `_DeviceLoader` helper over the plain loader."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.helpers import parse_template_expression

from migrator.families.xla.names import DEVICE_LOADERS, PARALLEL_LOADER
from migrator.families.xla.state import HINTS, XlaFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

DEVICE_LOADER = Rule(
    "NM307",
    Severity.INFO,
    "`pl.MpDeviceLoader(loader, device)` / `pl.ParallelLoader(...).per_device_loader(device)`",
    "Rewritten to `_DeviceLoader(loader, device)`, a small helper added to the file that iterates the plain "
    "loader and moves each batch (tensors in dicts, lists, tuples) to the device.",
    examples=(
        Example(
            before="""\
import torch_xla.distributed.parallel_loader as pl

for batch in pl.MpDeviceLoader(train_loader, device):
    loss = model(**batch).loss
""",
            after='''\
import torch


def _to_device(data, device):
    """Move the tensors of a (nested) dict/list/tuple batch to `device` (added by neuron-migrate)."""
    if isinstance(data, torch.Tensor):
        return data.to(device)
    if isinstance(data, dict):
        return {key: _to_device(value, device) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(_to_device(value, device) for value in data)
    return data


class _DeviceLoader:
    """Iterate `loader`, moving each batch to `device` (replaces torch_xla's MpDeviceLoader)."""

    def __init__(self, loader, device):
        self.loader = loader
        self.device = device

    def __iter__(self):
        for batch in self.loader:
            yield _to_device(batch, self.device)

    def __len__(self):
        return len(self.loader)


for batch in _DeviceLoader(train_loader, device):
    loss = model(**batch).loss
''',
        ),
    ),
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
