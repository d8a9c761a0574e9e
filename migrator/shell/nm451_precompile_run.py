"""NM451, decided by the walk of `nm450_precompile.py`: one walk of the `neuron_parallel_compile` runs and the
variables they set decides what goes and what is kept."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

PRECOMPILE_RUN = Rule(
    "NM451",
    Severity.INFO,
    "`neuron_parallel_compile <launcher>` followed by the same launcher (compile run, then training run), or a "
    "cache command (`neuron_parallel_compile --command clear-locks`)",
    "The pre-compilation run is removed; the training run is kept once. A cache command is removed: it manages "
    "the XLA flow's compile cache, which TorchNeuron does not use, and launches nothing.",
    examples=(
        example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "neuron_parallel_compile --command clear-locks\n"
            "torchrun --nproc_per_node=32 train.py\n",
            "#!/bin/bash\nexport HF_DEACTIVATE_ASYNC_LOAD=1\ntorchrun --nproc_per_node=32 train.py\n",
        ),
        example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "neuron_parallel_compile torchrun --nproc_per_node=32 train.py --max_steps 10\n"
            "\n"
            "torchrun --nproc_per_node=32 train.py --max_steps 1000\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "\n"
            "torchrun --nproc_per_node=32 train.py --max_steps 1000\n",
        ),
    ),
)
RULES = (PRECOMPILE_RUN,)
MATCHER = None  # decided in `nm450_precompile.py`
