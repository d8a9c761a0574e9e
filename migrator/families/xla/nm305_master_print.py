"""NM305: `xm.master_print(...)` becomes `print(...)` on rank 0."""

from __future__ import annotations

import libcst as cst

from migrator.families.xla.names import RANK, XM
from migrator.families.xla.state import HINTS, XlaFile, whole_statement_call
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

MASTER_PRINT = Rule(
    "NM305",
    Severity.INFO,
    "`xm.master_print(...)` prints on the global master only",
    'Rewritten to `print(...)` guarded by `int(os.environ.get("RANK", 0)) == 0`.',
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm

xm.master_print(f"epoch {epoch}: loss {loss.item()}")
""",
            after="""\
import os

if int(os.environ.get("RANK", 0)) == 0:
    print(f"epoch {epoch}: loss {loss.item()}")
""",
        ),
    ),
)
RULES = (MASTER_PRINT,)
_RENAMED_KEYWORDS = {"fd": "file", "finalize": "flush"}


class MasterPrint(Handler):
    STATEMENTS = frozenset({f"{XM}.master_print"})
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        call, new_call = whole_statement_call(original), whole_statement_call(updated)
        if call is None or new_call is None or self.ctx.qualified(call.func) != f"{XM}.master_print":
            return updated
        args = []
        for arg in new_call.args:
            if arg.keyword and arg.keyword.value in _RENAMED_KEYWORDS:
                arg = arg.with_changes(keyword=cst.Name(_RENAMED_KEYWORDS[arg.keyword.value]))
            args.append(arg)
        self.ctx.report(call, MASTER_PRINT)
        self.ctx.add_import("os")
        printed = new_call.with_changes(func=cst.Name("print"), args=args)
        return self.file.guarded(updated, RANK + " == 0", printed)


HANDLER = MasterPrint
