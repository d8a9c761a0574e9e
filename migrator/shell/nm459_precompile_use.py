"""NM459, decided by the walk of `nm450_precompile.py` (one walk of the `neuron_parallel_compile` runs and the
variables they set decides what goes and what is kept) and by `nm456_variables.py` where a launcher sets a
pre-compilation variable itself."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

PRECOMPILE_USE = Rule(
    "NM459",
    Severity.WARNING,
    "A use of `NEURON_EXTRACT_GRAPHS_ONLY` / `NEURON_PARALLEL_COMPILE` the codemod cannot fold",
    "Left in place with a TODO: the variable is never set on TorchNeuron; keep only the code for the real run.",
    examples=(
        example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "STEPS=${NEURON_EXTRACT_GRAPHS_ONLY:+10}\n"
            "torchrun --nproc_per_node=2 train.py --max_steps ${STEPS:-1000}\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM459 `NEURON_EXTRACT_GRAPHS_ONLY` is only set by neuron_parallel_compile, which TorchNeuron does not have; keep only the commands of the real run\n"
            "STEPS=${NEURON_EXTRACT_GRAPHS_ONLY:+10}\n"
            "torchrun --nproc_per_node=2 train.py --max_steps ${STEPS:-1000}\n",
        ),
    ),
)
RULES = (PRECOMPILE_USE,)
MATCHER = None  # decided in `nm450_precompile.py`
