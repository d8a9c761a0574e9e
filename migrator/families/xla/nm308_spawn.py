"""NM308: `xmp.spawn(fn, ...)` / `torch_xla.launch(fn, ...)` becomes a direct call; torchrun starts the processes."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import source_code
from migrator.families.xla.names import LAUNCH, LOCAL_RANK, SPAWNS
from migrator.families.xla.state import HINTS, XlaFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import SOURCE_MODULES, Handler

SPAWN = Rule(
    "NM308",
    Severity.WARNING,
    "`xmp.spawn(fn, args=..., nprocs=N)` / `torch_xla.launch(fn, args=...)` starts one process per device",
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
        Example(
            before="""\
import torch_xla

if __name__ == "__main__":
    torch_xla.launch(train, args=(config,))
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
    CALLS = SPAWNS
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        name = self.ctx.qualified(original.func)
        if name not in SPAWNS:
            return updated
        spelled = "torch_xla.launch" if name == LAUNCH else "xmp.spawn"
        positional = [arg for arg in updated.args if not arg.keyword and not arg.star]
        options = {arg.keyword.value: arg.value for arg in updated.args if arg.keyword}
        # `torch_xla.launch(..., debug_single_process=True)` ran one process: not what torchrun gives back.
        known = {"args", "start_method"} | ({"nprocs"} if name != LAUNCH else set())
        # `torch_xla.launch(xm.xla_device)`: a direct call would be XLA code again, which its own rules then
        # mark differently on the next run.
        spawned = [arg.value for arg in original.args if not arg.keyword and not arg.star]
        legacy = len(spawned) == 1 and (self.ctx.qualified(spawned[0]) or "").startswith(SOURCE_MODULES)
        if len(positional) != 1 or not set(options) <= known or legacy:
            self.ctx.todo(
                original,
                SPAWN,
                f"{spelled} of a PyTorch/XLA function" if legacy else f"{spelled} with these arguments",
                f"call the function with LOCAL_RANK; {self.ctx.launch()}",
            )
            return updated
        nprocs = options.get("nprocs")
        count = source_code(nprocs) if nprocs is not None else "<number of devices>"
        self.ctx.report_launch(
            original,
            SPAWN,
            f"{spelled} rewritten to a direct call",
            count,
            ' (the function must init_process_group("neuron") before any collective)',
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
