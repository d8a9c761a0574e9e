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
    "loader and moves each batch (tensors in dicts, lists, tuples) to the device; a `pl.ParallelLoader(loader, "
    "[device])` kept in a name becomes `_ParallelLoader`, whose `per_device_loader(device)` is that helper.",
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
        Example(
            before="""\
import torch_xla.distributed.parallel_loader as pl

para_loader = pl.ParallelLoader(train_loader, [device])
for batch in para_loader.per_device_loader(device):
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


class _ParallelLoader:
    """torch_xla's ParallelLoader with one device per process (replaces it; added by neuron-migrate):
    `per_device_loader(device)` iterates `loader`, moving each batch to `device`."""

    def __init__(self, loader, devices):
        self.loader = loader
        self.devices = devices

    def per_device_loader(self, device):
        return _DeviceLoader(self.loader, device)


para_loader = _ParallelLoader(train_loader, [device])
for batch in para_loader.per_device_loader(device):
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
    DECIDES = DEVICE_LOADERS | {PARALLEL_LOADER}
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)
        self.attribute_names: set[cst.Name] = set()
        self.chained: set[cst.Call] = set()  # ParallelLoader calls whose per_device_loader is called at once

    def visit_Call(self, node: cst.Call) -> None:
        if m.matches(node.func, _PER_DEVICE_LOADER):
            self.chained.add(node.func.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.attribute_names.add(node.attr)  # `x.MpDeviceLoader` names an attribute of x, not the import

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        self._used_as_value(original)
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name):
        if original not in self.attribute_names:
            self._used_as_value(original)
        return updated

    def _used_as_value(self, node: cst.Name | cst.Attribute) -> None:
        """`isinstance(loader, pl.MpDeviceLoader)`: a loader class named without being called. Its calls become
        this file's `_DeviceLoader`, which another file's loaders are not instances of: the test is the
        author's to rewrite (left as it is, it fails with a NameError once the import goes)."""
        line = self.ctx.line
        if node in self.file.called or (
            line is not None and isinstance(line.body[0], (cst.Import, cst.ImportFrom))
        ):
            return
        name = self.ctx.qualified(node)
        if name not in DEVICE_LOADERS and name != PARALLEL_LOADER:
            return
        self.ctx.todo(
            node,
            DEVICE_LOADER,
            f"`{name}` is used as a value (an isinstance test, a reference), not called; its calls become a "
            "`_DeviceLoader` helper that each migrated file defines for itself",
            "test for the loader your code builds (this file's `_DeviceLoader` once its loaders are rewritten) "
            "or drop the test",
            subject=name,
        )

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        name = self.ctx.qualified(original.func)
        if name is None and m.matches(original.func, _PER_DEVICE_LOADER):
            return self._parallel_loader(original, updated)
        if name in DEVICE_LOADERS:
            return self._device_loader(original, updated, updated.args)
        if name == PARALLEL_LOADER and original not in self.chained:
            return self._kept_parallel_loader(original, updated)
        return updated

    def _kept_parallel_loader(self, original: cst.Call, updated: cst.Call):
        """`para_loader = pl.ParallelLoader(loader, [device])`, its `per_device_loader(device)` called later."""
        args = [arg for arg in updated.args if not (arg.keyword and arg.keyword.value in LOADER_OPTIONS)]
        if len(args) != 2 or any(arg.keyword or arg.star for arg in args):
            self.ctx.todo(
                original,
                DEVICE_LOADER,
                "ParallelLoader with unexpected arguments",
                "iterate the DataLoader and move each batch with .to(device)",
            )
            return updated
        self.ctx.report(
            original,
            DEVICE_LOADER,
            "Rewritten to `_ParallelLoader(loader, devices)`, a small helper added to the file whose "
            "`per_device_loader(device)` iterates the plain loader and moves each batch to the device (one device "
            "per process, as torchrun runs it).",
        )
        self.file.helpers.add("_ParallelLoader")
        return parse_template_expression(
            "_ParallelLoader({loader}, {devices})", loader=args[0].value, devices=args[1].value
        )

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
