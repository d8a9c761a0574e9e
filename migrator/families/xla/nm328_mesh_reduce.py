"""NM328: `xm.mesh_reduce(tag, data, reduce_fn)` becomes a helper that gathers every process's value with
`torch.distributed.all_gather_object` and reduces the list."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import bound_arguments
from migrator.families.xla.names import XM
from migrator.families.xla.state import _TO_DEVICE_SOURCE, HINTS, XlaFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

MESH_REDUCE = Rule(
    "NM328",
    Severity.INFO,
    "`xm.mesh_reduce(tag, data, reduce_fn)`: `reduce_fn` of the list of every process's `data`, copied to the CPU",
    "Rewritten to `_mesh_reduce(data, reduce_fn)`, a small helper added to the file: it copies `data` to the "
    "CPU, gathers every process's copy with `torch.distributed.all_gather_object` when a process group is "
    "initialised (else the list holds this process's only) and returns `reduce_fn` of the list; the tag, which "
    "only named the XLA rendezvous, goes.",
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm

accuracy = xm.mesh_reduce("accuracy", correct / total, lambda values: sum(values) / len(values))
""",
            after=f'''\
import torch


{_TO_DEVICE_SOURCE.strip()}


def _mesh_reduce(data, reduce_fn):
    """`reduce_fn` of the list of every process's `data`, copied to the CPU (replaces torch_xla's xm.mesh_reduce;
    added by neuron-migrate)."""
    data = _to_device(data, "cpu")
    if not torch.distributed.is_initialized():
        return reduce_fn([data])
    gathered = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, data)
    return reduce_fn(gathered)


accuracy = _mesh_reduce(correct / total, lambda values: sum(values) / len(values))
''',
        ),
    ),
)
RULES = (MESH_REDUCE,)
_PARAMETERS = ("tag", "data", "reduce_fn")


class MeshReduce(Handler):
    HINTS = HINTS
    CALLS = frozenset({f"{XM}.mesh_reduce"})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        arguments = _by_parameter(updated)
        if arguments is None:
            self.ctx.todo(
                original,
                MESH_REDUCE,
                "`xm.mesh_reduce` with unpacked or unknown arguments has no mechanical rewrite",
                "gather the values with torch.distributed.all_gather_object and reduce the list by hand",
            )
            return updated
        self.ctx.report(original, MESH_REDUCE)
        self.file.helpers.add("_mesh_reduce")
        data, reduce_fn = arguments["data"], arguments["reduce_fn"]
        return updated.with_changes(
            func=cst.Name("_mesh_reduce"),
            args=[
                cst.Arg(data, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                cst.Arg(reduce_fn),
            ],
        )


def _by_parameter(call: cst.Call) -> dict[str, cst.BaseExpression] | None:
    """The call's arguments by the parameter of `mesh_reduce(tag, data, reduce_fn)` they bind; None when one
    is unpacked (`*args`) or unknown, or one is missing."""
    found = bound_arguments(call, _PARAMETERS)
    return found if found is not None and len(found) == len(_PARAMETERS) else None


HANDLER = MeshReduce
