"""NM407, decided by the walk of `nm405_compile.py`: one look at each `torch.compile` call decides its
`dynamic=` and `mode=` together."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

COMPILE_MODE = Rule(
    "NM407",
    Severity.INFO,
    '`torch.compile(..., mode="reduce-overhead" / "max-autotune*")`',
    "Removed: the neuron backend ignores modes other than the default.",
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm
import torch

compiled = torch.compile(model, mode="reduce-overhead")
""",
            after="""\
import torch

compiled = torch.compile(model, dynamic=False)
""",
        ),
    ),
)
RULES = (COMPILE_MODE,)
HANDLER = None  # decided in `nm405_compile.py`
