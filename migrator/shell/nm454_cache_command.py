"""NM454, decided by the walk of `nm452_optimum_cli.py`: one look at each `optimum-cli` command decides which
of its subcommands it is."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

CACHE_COMMAND = Rule(
    "NM454",
    Severity.WARNING,
    "`optimum-cli neuron cache ...` (Neuron compile cache on the Hub)",
    "Removed: TorchNeuron has no Hub compile cache; it caches compiled graphs locally (see the TorchNeuron "
    "environment variable reference for the cache directory).",
    examples=(
        example(
            "#!/bin/bash\noptimum-cli neuron cache synchronize\n",
            "#!/bin/bash\n",
        ),
    ),
)
RULES = (CACHE_COMMAND,)
MATCHER = None  # decided in `nm452_optimum_cli.py`
