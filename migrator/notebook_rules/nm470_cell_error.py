"""NM470: a code cell IPython cannot parse is left as it is, with a TODO; the other cells are migrated."""

from __future__ import annotations

from migrator.notebook_rules import example
from migrator.rules import Example, Rule, Severity

CELL_ERROR = Rule(
    "NM470",
    Severity.ERROR,
    "A notebook code cell that IPython cannot parse, or whose rewrite would not parse",
    "Left unchanged but for a TODO above its code (the other cells are migrated): fix the cell so that it runs, "
    "then migrate again.",
    examples=(
        Example(
            example(">>> import torch_xla.core.xla_model as xm\n>>> device = xm.xla_device()").before,
            example(
                "# TODO(neuron-migrate): NM470 IPython cannot parse this cell, so it is left as it is: fix it so "
                "that it runs, then migrate again\n>>> import torch_xla.core.xla_model as xm\n"
                ">>> device = xm.xla_device()"
            ).before,
            kind="notebook",
        ),
    ),
)
RULES = (CELL_ERROR,)
