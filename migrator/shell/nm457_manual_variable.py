"""NM457, decided by the walk of `nm456_variables.py`: one look at each variable a launcher sets, in one
table, decides whether it goes, becomes a flag or needs a person."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

MANUAL_VARIABLE = Rule(
    "NM457",
    Severity.WARNING,
    "`NEURON_CC_FLAGS` / `NEURON_COMPILE_CACHE_URL` in a launcher",
    "Left in place with a TODO: these configured the XLA-flow compiler and cache; check the TorchNeuron "
    "environment variable reference and remove or replace them.",
    examples=(
        example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            'export NEURON_CC_FLAGS="--model-type transformer -O1"\n'
            "torchrun --nproc_per_node=2 train.py\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM457 `NEURON_CC_FLAGS` holds compiler flags tuned for the XLA/NxD graph flow, and whether TorchNeuron's neuron backend reads them is not documented; remove them, or keep only flags the TorchNeuron compiler reference lists\n"
            'export NEURON_CC_FLAGS="--model-type transformer -O1"\n'
            "torchrun --nproc_per_node=2 train.py\n",
        ),
    ),
)
RULES = (MANUAL_VARIABLE,)
MATCHER = None  # decided in `nm456_variables.py`
