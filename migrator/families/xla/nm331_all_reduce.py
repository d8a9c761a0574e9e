"""NM331: `xm.all_reduce(reduce_type, inputs, scale)` over every process becomes a helper doing the same with
`torch.distributed.all_reduce`; over process `groups` it stays with NM314's TODO."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import bound_arguments, keyword_arg, literal_value
from migrator.families.xla.names import XM
from migrator.families.xla.state import _ALL_REDUCE_SOURCE, _INIT_PROCESS_GROUP_SOURCE, HINTS, XlaFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

ALL_REDUCE = Rule(
    "NM331",
    Severity.INFO,
    "`xm.all_reduce(reduce_type, inputs, scale=1.0)` over every process (no `groups`)",
    "Rewritten to `_all_reduce(reduce_type, inputs, scale)`, a helper added to the file that does what torch_xla "
    "did with `torch.distributed.all_reduce`: a reduced copy of a tensor, or a list of tensors reduced in place, "
    "times `scale`, over every process of torchrun (the process group initialised if the script has none yet, "
    "by `_init_process_group()`, which destroys it at exit; one process: nothing to reduce); `xm.REDUCE_SUM` and the other reduce types become their string values, "
    "`pin_layout` (an XLA layout option) goes. Over process `groups` (a model-parallel script's data-parallel "
    "group), the call keeps NM314's TODO.",
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm

total = xm.all_reduce(xm.REDUCE_SUM, loss, scale=1.0 / world_size)
""",
            after=f"""\
import atexit
import os
import torch


{_INIT_PROCESS_GROUP_SOURCE.strip()}


{_ALL_REDUCE_SOURCE.strip()}


total = _all_reduce("sum", loss, scale=1.0 / world_size)
""",
        ),
    ),
)
RULES = (ALL_REDUCE,)
# torch_xla's reduce types (`xm.REDUCE_SUM == "sum"`...), which the helper maps to torch.distributed's.
REDUCE_TYPES = {"REDUCE_SUM": "sum", "REDUCE_MUL": "mul", "REDUCE_MIN": "min", "REDUCE_MAX": "max"}
REDUCE_TYPES |= {"REDUCE_AND": "and", "REDUCE_OR": "or"}
_PARAMETERS = ("reduce_type", "inputs", "scale", "groups", "pin_layout")


class AllReduce(Handler):
    HINTS = HINTS
    CALLS = frozenset({f"{XM}.all_reduce"})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        arguments = self._by_parameter(updated)
        if arguments is None:
            self.ctx.todo(
                original,
                "NM314",
                f"`{XM}.all_reduce` over process groups, or with arguments read at run time, has no mechanical "
                "rewrite",
                "build the groups with torch.distributed.new_group and reduce with torch.distributed.all_reduce "
                "(in place) over them",
            )
            return updated
        self.ctx.report(original, ALL_REDUCE)
        self.file.helpers.add("_all_reduce")
        args = [cst.Arg(cst.SimpleString(f'"{arguments["reduce_type"]}"')), cst.Arg(arguments["inputs"])]
        if "scale" in arguments:
            args.append(keyword_arg("scale", arguments["scale"]))
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        return cst.Call(
            func=cst.Name("_all_reduce"),
            args=[arg.with_changes(comma=separator) for arg in args[:-1]] + args[-1:],
        )

    def _by_parameter(self, call: cst.Call) -> dict | None:
        """The call's reduce type (its string), inputs and scale; None where it unpacks arguments, names one
        this does not know, reduces over `groups`, or its reduce type is not one torch_xla names literally."""
        found = bound_arguments(call, _PARAMETERS)
        if found is None:
            return None
        if "groups" in found and not m.matches(found["groups"], m.Name("None")):
            return None
        reduce_type = found.get("reduce_type")
        qualified = self.ctx.qualified(reduce_type) if reduce_type is not None else None
        if qualified is not None and qualified.startswith(f"{XM}."):
            found["reduce_type"] = REDUCE_TYPES.get(qualified.rpartition(".")[2])
        elif reduce_type is not None:
            value = literal_value(reduce_type)
            found["reduce_type"] = value if value in REDUCE_TYPES.values() else None
        if found.get("reduce_type") is None or "inputs" not in found:
            return None
        return {name: found[name] for name in ("reduce_type", "inputs", "scale") if name in found}


HANDLER = AllReduce
