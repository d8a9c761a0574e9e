"""NM465: a launcher that runs Python sets `HF_DEACTIVATE_ASYNC_LOAD=1`."""

from __future__ import annotations

import re

from migrator.rules import Rule, Severity
from migrator.shell import example
from migrator.shell.edits import Context
from usercode.launchers import CONTINUATION
from usercode.shell import parse, statements

_TIME_KEYWORD = re.compile(rb"time(?:[ \t]+-p)?[ \t]+")

ASYNC_LOAD_EXPORT = Rule(
    "NM465",
    Severity.INFO,
    "A launcher runs a Python script but does not set `HF_DEACTIVATE_ASYNC_LOAD`",
    "Added `export HF_DEACTIVATE_ASYNC_LOAD=1` near the top: asynchronous weight loading is not supported on "
    "TorchNeuron.",
    examples=(
        example(
            "#!/bin/bash\nexport NEURON_FUSE_SOFTMAX=1\ntorchrun --nproc_per_node=2 train.py\n",
            "#!/bin/bash\nexport HF_DEACTIVATE_ASYNC_LOAD=1\ntorchrun --nproc_per_node=2 train.py\n",
        ),
    ),
)
RULES: tuple[Rule, ...] = (ASYNC_LOAD_EXPORT,)
ASYNC_LOAD = "HF_DEACTIVATE_ASYNC_LOAD"
_DIRECTIVE = re.compile(rb"^#(?:SBATCH|PBS|BSUB|FLUX|COBALT|\$)[^\n]*\n", re.MULTILINE)


class AsyncLoadMatcher:
    """Matcher of each piece parsed as a script, once the walk is done."""

    HOOKS = {"finish": "async_loads"}

    def async_loads(self) -> None:
        for ctx in self.contexts:
            self.async_load(ctx)

    def async_load(self, ctx: Context) -> None:
        """A script that launches Python gets `export HF_DEACTIVATE_ASYNC_LOAD=1` near the top."""
        data = ctx.data
        launchers = list(dict.fromkeys(ctx.launchers))
        if not ctx.standalone or not launchers or not self.findings:
            return
        if self.inline or b"\n" not in CONTINUATION.sub(b"", data).strip():
            # Commands that each run in a shell of their own (notebook lines), or a one-command script.
            message = (
                f"Added `{ASYNC_LOAD}=1` before the command: asynchronous weight loading is not supported."
            )
            for start, end in launchers:
                if ASYNC_LOAD.encode() not in data[start:end]:
                    # After the `time` keyword: an assignment before it makes `time` /usr/bin/time, which
                    # then tries to run the command's own `VAR=1` words as a program.
                    keyword = _TIME_KEYWORD.match(data, start, end)
                    at = keyword.end() if keyword else start
                    self.report(ctx.at(start), ASYNC_LOAD_EXPORT, message)
                    self.edit(ctx, at, at, f"{ASYNC_LOAD}=1 ")
            return
        if ASYNC_LOAD.encode() in data:
            return
        top = statements(parse(data).root_node)
        self.report(ctx.at(launchers[0][0]), ASYNC_LOAD_EXPORT)
        # Right after the shebang and any scheduler directives (#SBATCH...: they must precede every
        # command), before anything that could start Python.
        offset = data.index(b"\n") + 1 if data.startswith(b"#!") and b"\n" in data else 0
        first = top[0].start_byte if top else len(data)
        for directive in _DIRECTIVE.finditer(data, offset, first):
            offset = directive.end()
        self.edit(ctx, offset, offset, f"export {ASYNC_LOAD}=1{self.newline}")


MATCHER = AsyncLoadMatcher
