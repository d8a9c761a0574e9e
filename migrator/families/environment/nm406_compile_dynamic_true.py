"""NM406, decided by the walk of `nm405_compile.py`: one look at each `torch.compile` call decides its
`dynamic=` and `mode=` together."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

COMPILE_DYNAMIC_TRUE = Rule(
    "NM406",
    Severity.WARNING,
    "`torch.compile(..., dynamic=True)`",
    "Rewritten to `dynamic=False`: the neuron backend rejects dynamic shapes; pad inputs to fixed sizes "
    "(each new shape is a recompilation).",
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm
import torch

compiled = torch.compile(model, dynamic=True)
""",
            after="""\
import torch

compiled = torch.compile(model, dynamic=False)
""",
        ),
    ),
)
RULES = (COMPILE_DYNAMIC_TRUE,)
HANDLER = None  # decided in `nm405_compile.py`
