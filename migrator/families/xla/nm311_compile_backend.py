"""NM311: `torch.compile(backend="openxla")` compiles with the neuron backend."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import find_keyword, string_value
from migrator.families.xla.state import HINTS
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

COMPILE_BACKEND = Rule(
    "NM311",
    Severity.INFO,
    '`torch.compile(..., backend="openxla")`',
    'Rewritten to `backend="neuron"`.',
    examples=(
        Example(
            before="""\
import torch
import torch_xla

model = torch.compile(model, backend="openxla")
""",
            after="""\
import torch

model = torch.compile(model, backend="neuron", dynamic=False)
""",
        ),
    ),
)
RULES = (COMPILE_BACKEND,)
XLA_COMPILE_BACKENDS = frozenset({"openxla", "openxla_eval"})


class CompileBackend(Handler):
    CALLS = frozenset({"torch.compile"})
    HINTS = HINTS

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if self.ctx.qualified(original.func) != "torch.compile":
            return updated
        backend = find_keyword(updated, "backend")
        if backend is None or string_value(backend.value) not in XLA_COMPILE_BACKENDS:
            return updated
        self.ctx.report(original, COMPILE_BACKEND)
        args = [
            arg.with_changes(value=cst.SimpleString('"neuron"')) if arg is backend else arg
            for arg in updated.args
        ]
        return updated.with_changes(args=args)


HANDLER = CompileBackend
