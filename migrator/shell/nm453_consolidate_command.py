"""NM453, decided by the walk of `nm452_optimum_cli.py`: one look at each `optimum-cli` command decides which
of its subcommands it is."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

CONSOLIDATE_COMMAND = Rule(
    "NM453",
    Severity.INFO,
    "`optimum-cli neuron consolidate ...` merges sharded training checkpoints",
    "Removed: `save_pretrained` writes standard, unsharded checkpoints on TorchNeuron (keep the command only "
    "to convert checkpoints made with optimum-neuron).",
    examples=(
        example(
            "#!/bin/bash\noptimum-cli neuron consolidate output/checkpoint-500 output/consolidated\n",
            "#!/bin/bash\n",
        ),
    ),
)
RULES = (CONSOLIDATE_COMMAND,)
MATCHER = None  # decided in `nm452_optimum_cli.py`
