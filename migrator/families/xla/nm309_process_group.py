"""NM309: the "xla" process group becomes the "neuron" one."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import dotted_name, find_keyword, string_value, tidy_args
from migrator.families.xla.names import PROCESS_GROUP_INIT
from migrator.families.xla.state import HINTS, XlaFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

PROCESS_GROUP = Rule(
    "NM309",
    Severity.INFO,
    '`init_process_group("xla", init_method="xla://" | "pjrt://")`, or `init_process_group(device)` with '
    '`device = "xla"`',
    'Rewritten to `init_process_group("neuron")`: the XLA init methods are dropped (torch.distributed has no '
    "handler for them; torchrun's env:// rendezvous is the default).",
    examples=(
        Example(
            before="""\
import torch.distributed as dist
import torch_xla.distributed.xla_backend

dist.init_process_group("xla", init_method="xla://")
""",
            after="""\
import torch.distributed as dist

dist.init_process_group("neuron")
""",
        ),
    ),
)
RULES = (PROCESS_GROUP,)


# Rendezvous of the XLA runtime; torch.distributed has no handler for them (torchrun's env:// is the default).
XLA_INIT_METHODS = frozenset({"xla://", "pjrt://"})


class ProcessGroup(Handler):
    CALLS = frozenset({PROCESS_GROUP_INIT})
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if self.ctx.qualified(original.func) != PROCESS_GROUP_INIT:
            return updated
        backend = find_keyword(updated, "backend")
        positional = [arg for arg in updated.args if not arg.keyword]
        target = backend or (positional[0] if positional else None)
        init_method = find_keyword(updated, "init_method")
        # `init_process_group(device)` with `device = "xla"`: the device string named the backend.
        xla_backend = target is not None and (
            string_value(target.value) == "xla" or dotted_name(target.value) in self.file.xla_device_names
        )
        xla_init = init_method is not None and string_value(init_method.value) in XLA_INIT_METHODS
        if not (xla_backend or xla_init):
            return updated
        self.ctx.report(original, PROCESS_GROUP)
        args = [
            arg.with_changes(value=cst.SimpleString('"neuron"')) if arg is target and xla_backend else arg
            for arg in updated.args
            if arg is not init_method or not xla_init
        ]
        return updated.with_changes(args=tidy_args(args))


HANDLER = ProcessGroup
