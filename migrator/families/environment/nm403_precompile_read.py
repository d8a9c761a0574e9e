"""NM403, decided by the walk of `nm402_precompile.py`: one look at each read of a pre-compilation variable
folds it (NM402) or, when it cannot be folded, leaves a TODO."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

PRECOMPILE_READ = Rule(
    "NM403",
    Severity.WARNING,
    "A read of `NEURON_EXTRACT_GRAPHS_ONLY` / `NEURON_PARALLEL_COMPILE` the codemod cannot fold",
    "Left in place with a TODO: the variable is never set on TorchNeuron; remove the code that depends on it.",
    examples=(
        Example(
            before="""\
import os

extracting = os.environ["NEURON_EXTRACT_GRAPHS_ONLY"]
""",
            after="""\
import os

# TODO(neuron-migrate): NM403 `NEURON_EXTRACT_GRAPHS_ONLY` is only set by neuron_parallel_compile, which TorchNeuron does not have; treat it as unset and remove the code for the graph-extraction run
extracting = os.environ["NEURON_EXTRACT_GRAPHS_ONLY"]
""",
        ),
    ),
)
RULES = (PRECOMPILE_READ,)
HANDLER = None  # decided in `nm402_precompile.py`
