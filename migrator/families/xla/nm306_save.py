"""NM306: `xm.save(obj, path)` becomes `torch.save` of a CPU copy on the master, then a barrier."""

from __future__ import annotations

import libcst as cst
from libcst.helpers import parse_template_expression

from migrator.families.xla.names import LOCAL_RANK, RANK, XM
from migrator.families.xla.state import _TO_DEVICE_SOURCE, HINTS, XlaFile, whole_statement_call
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

XLA_SAVE = Rule(
    "NM306",
    Severity.INFO,
    "`xm.save(obj, path)` writes a CPU copy on the (local) master, then waits for every process",
    "Rewritten to `torch.save` of a CPU copy on LOCAL_RANK 0 (RANK 0 with `global_master=True`), followed "
    "by `dist.barrier()` when a process group is initialised.",
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm

xm.save(model.state_dict(), "checkpoint.pt")
""",
            after=f"""\
import os
import torch
import torch.distributed as dist


{_TO_DEVICE_SOURCE.strip()}


if int(os.environ.get("LOCAL_RANK", 0)) == 0:
    torch.save(_to_device(model.state_dict(), "cpu"), "checkpoint.pt")
if dist.is_initialized():
    dist.barrier()
""",
        ),
    ),
)
RULES = (XLA_SAVE,)


class Save(Handler):
    STATEMENTS = frozenset({f"{XM}.save"})
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        call, new_call = whole_statement_call(original), whole_statement_call(updated)
        if call is None or new_call is None or self.ctx.qualified(call.func) != f"{XM}.save":
            return updated
        positional = [arg for arg in new_call.args if not arg.keyword and not arg.star]
        options = {arg.keyword.value: arg.value for arg in new_call.args if arg.keyword}
        literal = {key: value.value for key, value in options.items() if isinstance(value, cst.Name)}
        known = set(options) <= {"master_only", "global_master", "sync"}
        if len(positional) != 2 or not known or len(literal) != len(options):
            self.ctx.todo(
                call,
                XLA_SAVE,
                "xm.save with these arguments has no mechanical rewrite",
                "save a CPU copy with torch.save on rank 0 (or model.save_pretrained) and add dist.barrier() "
                "if other ranks read the file",
            )
            return updated
        self.ctx.report(call, XLA_SAVE)
        self.ctx.add_import("torch")
        self.file.helpers.add("_to_device")
        saved = parse_template_expression(
            'torch.save(_to_device({obj}, "cpu"), {path})',
            obj=positional[0].value,
            path=positional[1].value,
        )
        statements = []
        if literal.get("master_only", "True") == "True":
            self.ctx.add_import("os")
            rank = RANK if literal.get("global_master") == "True" else LOCAL_RANK
            statements.append(self.file.guarded(updated, rank + " == 0", saved))
        else:
            statements.append(updated.with_changes(body=[cst.Expr(saved)]))
        if literal.get("sync", "True") == "True":
            statements.append(self.file.if_initialized(cst.SimpleStatementLine([]), "{dist}.barrier()"))
        return cst.FlattenSentinel(statements)


HANDLER = Save
