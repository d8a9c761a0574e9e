"""NM309: the "xla" process group becomes the "neuron" one."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import descendants, dotted_name, find_keyword, string_value, tidy_args
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
        self.backend_variables: set[str] | None = None

    def _backend_variables(self) -> set[str]:
        """Last parts of the names the file passes to init_process_group as its backend (`backend`, `args.backend`)."""
        if self.backend_variables is None:
            self.backend_variables = set()
            for call in descendants(self.ctx.module, cst.Call):
                if (dotted_name(call.func) or "").rpartition(".")[2] == "init_process_group":
                    value = _backend_arg(call)
                    name = dotted_name(value.value) if value is not None else None
                    if name is not None:
                        self.backend_variables.add(name.rpartition(".")[2])
        return self.backend_variables

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign):
        """`backend = "xla"` handed to init_process_group: the backend is "neuron" (a `device` variable is NM320's)."""
        if string_value(original.value) != "xla" or len(original.targets) != 1:
            return updated
        target = dotted_name(original.targets[0].target)
        name = (target or "").rpartition(".")[2]
        if not name or "device" in name.lower() or name not in self._backend_variables():
            return updated
        tested = self.file.tested_as_xla(name)
        if tested:
            self.ctx.todo(
                original.value,
                PROCESS_GROUP,
                f'`{target}` names the process-group backend and is also compared to "xla" {tested}, so '
                "rewriting this value alone would send it down another branch",
                'rewrite this value and each `== "xla"` test of it to "neuron" together',
                subject=target,
            )
            return updated
        self.ctx.report(
            original, PROCESS_GROUP, f'`{target}` is the process-group backend: "xla" -> "neuron".'
        )
        return updated.with_changes(value=cst.SimpleString('"neuron"'))

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if self.ctx.qualified(original.func) != PROCESS_GROUP_INIT:
            return updated
        target = _backend_arg(updated)
        init_method = find_keyword(updated, "init_method")
        # `init_process_group(device)` with `device = "xla"`: the device string named the backend.
        xla_backend = target is not None and (
            string_value(target.value) == "xla" or dotted_name(target.value) in self.file.xla_device_names
        )
        # `init_process_group("xla" if on_trainium else "nccl")`
        choice = target is not None and m.matches(target.value, m.IfExp(body=_XLA) | m.IfExp(orelse=_XLA))
        xla_init = init_method is not None and string_value(init_method.value) in XLA_INIT_METHODS
        if not (xla_backend or xla_init or choice):
            return updated
        self.ctx.report(original, PROCESS_GROUP)
        args = []
        for arg in updated.args:
            if arg is init_method and xla_init:
                continue
            if arg is target and xla_backend:
                arg = arg.with_changes(value=_NEURON)
            elif arg is target and choice:
                branches = {
                    branch: _NEURON
                    if m.matches(getattr(arg.value, branch), _XLA)
                    else getattr(arg.value, branch)
                    for branch in ("body", "orelse")
                }
                arg = arg.with_changes(value=arg.value.with_changes(**branches))
            args.append(arg)
        return updated.with_changes(args=tidy_args(args))


_XLA = m.SimpleString('"xla"') | m.SimpleString("'xla'")
_NEURON = cst.SimpleString('"neuron"')


def _backend_arg(call: cst.Call) -> cst.Arg | None:
    backend = find_keyword(call, "backend")
    positional = [arg for arg in call.args if not arg.keyword and not arg.star]
    return backend or (positional[0] if positional else None)


HANDLER = ProcessGroup
