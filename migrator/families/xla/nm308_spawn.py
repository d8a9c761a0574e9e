"""NM308: `xmp.spawn(fn, ...)` becomes a direct call; torchrun starts the processes."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import source_code
from migrator.families.xla.names import LOCAL_RANK
from migrator.families.xla.names import SPAWN as SPAWN_CALL
from migrator.families.xla.state import HINTS, XlaFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

SPAWN = Rule(
    "NM308",
    Severity.WARNING,
    "`xmp.spawn(fn, args=..., nprocs=N)` starts one process per device",
    'Rewritten to a direct call `fn(int(os.environ.get("LOCAL_RANK", 0)), *args)`: launch the script with '
    "`torchrun --nproc_per_node N` to get the processes back.",
    examples=(
        Example(
            before="""\
import torch_xla.distributed.xla_multiprocessing as xmp

if __name__ == "__main__":
    xmp.spawn(train, args=(config,), nprocs=8)
""",
            after="""\
import os

if __name__ == "__main__":
    train(int(os.environ.get("LOCAL_RANK", 0)), config)
""",
        ),
    ),
)
RULES = (SPAWN,)


class Spawn(Handler):
    CALLS = frozenset({SPAWN_CALL})
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if self.ctx.qualified(original.func) != SPAWN_CALL:
            return updated
        positional = [arg for arg in updated.args if not arg.keyword and not arg.star]
        options = {arg.keyword.value: arg.value for arg in updated.args if arg.keyword}
        if len(positional) != 1 or not set(options) <= {"args", "nprocs", "start_method"}:
            self.ctx.todo(
                original,
                SPAWN,
                "xmp.spawn with these arguments",
                "call the function with LOCAL_RANK and launch the script with torchrun --nproc_per_node N",
            )
            return updated
        nprocs = options.get("nprocs")
        count = source_code(nprocs) if nprocs is not None else "<number of devices>"
        self.ctx.report(
            original,
            SPAWN,
            "xmp.spawn rewritten to a direct call: launch the script with "
            f"`torchrun --nproc_per_node {count}` "
            '(the function must init_process_group("neuron") before any collective).',
        )
        self.ctx.add_import("os")
        call_args = [cst.Arg(self.file.expression(LOCAL_RANK))]
        fn_args = options.get("args")
        if isinstance(fn_args, cst.Tuple):
            call_args += [cst.Arg(element.value) for element in fn_args.elements]
        elif fn_args is not None:
            call_args.append(cst.Arg(fn_args, star="*"))
        call_args = [
            arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            for arg in call_args[:-1]
        ] + call_args[-1:]
        return cst.Call(func=positional[0].value, args=call_args)


HANDLER = Spawn
