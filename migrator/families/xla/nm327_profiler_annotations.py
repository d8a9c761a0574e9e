"""NM327: PyTorch/XLA profiler annotations (`@xp.trace_me(name)`, `with xp.Trace(name):`) become PyTorch's."""

from __future__ import annotations

import libcst as cst

from migrator.families.xla.state import HINTS
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

PROFILER = "torch_xla.debug.profiler"
ANNOTATIONS = frozenset({f"{PROFILER}.trace_me", f"{PROFILER}.Trace"})
RECORD_FUNCTION = "torch.profiler.record_function"

PROFILER_ANNOTATION = Rule(
    "NM327",
    Severity.INFO,
    "A PyTorch/XLA profiler annotation: `@xp.trace_me(name)` on a function, `with xp.Trace(name):` around code",
    f"Rewritten to `{RECORD_FUNCTION}(name)` (a decorator and a context manager alike): the same named range, "
    "in the PyTorch profiler's trace instead of the XLA profiler's; it changes nothing else the code does.",
    examples=(
        Example(
            before="""\
import torch
import torch_xla.debug.profiler as xp


class MLP(torch.nn.Module):
    @xp.trace_me("MLP")
    def forward(self, x):
        with xp.Trace("up_proj"):
            x = self.up(x)
        return self.down(torch.relu(x))
""",
            after="""\
import torch


class MLP(torch.nn.Module):
    @torch.profiler.record_function("MLP")
    def forward(self, x):
        with torch.profiler.record_function("up_proj"):
            x = self.up(x)
        return self.down(torch.relu(x))
""",
        ),
    ),
)
RULES = (PROFILER_ANNOTATION,)


class ProfilerAnnotations(Handler):
    HINTS = HINTS
    CALLS = ANNOTATIONS

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        name = self.ctx.qualified(original.func)
        if len(updated.args) != 1 or updated.args[0].keyword is not None or updated.args[0].star:
            # Trace(name, **metadata) and the like: the metadata has no place in record_function.
            self.ctx.todo(
                original,
                "NM318",
                f"`{name}` is given more than a range name",
                f"annotate with `{RECORD_FUNCTION}(name)` and drop the rest, or remove it",
            )
            return updated
        self.ctx.report(original, PROFILER_ANNOTATION)
        self.ctx.add_import("torch")
        return updated.with_changes(func=cst.parse_expression(RECORD_FUNCTION))


HANDLER = ProfilerAnnotations
