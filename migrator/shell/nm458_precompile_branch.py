"""NM458, decided by the walk of `nm450_precompile.py`: one walk of the `neuron_parallel_compile` runs and the
variables they set decides what goes and what is kept."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

PRECOMPILE_BRANCH = Rule(
    "NM458",
    Severity.INFO,
    '`if [ "$NEURON_EXTRACT_GRAPHS_ONLY" = "1" ]; then ...; else ...; fi`',
    "Folded with the variable unset (only neuron_parallel_compile set it): the branch that runs is kept.",
    examples=(
        example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            'if [ "$NEURON_EXTRACT_GRAPHS_ONLY" = "1" ]; then\n'
            "    MAX_STEPS=10\n"
            "else\n"
            "    MAX_STEPS=1000\n"
            "fi\n"
            "torchrun --nproc_per_node=2 train.py --max_steps $MAX_STEPS\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "MAX_STEPS=1000\n"
            "torchrun --nproc_per_node=2 train.py --max_steps $MAX_STEPS\n",
        ),
    ),
)
RULES = (PRECOMPILE_BRANCH,)
MATCHER = None  # decided in `nm450_precompile.py`
