"""NM469, decided by the walk of `nm456_variables.py`: one look at each variable a launcher sets, in one
table, decides whether it goes, becomes a flag or needs a person."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

PRECISION_MANUAL = Rule(
    "NM469",
    Severity.WARNING,
    "`XLA_USE_BF16=1` / `XLA_DOWNCAST_BF16=1` where no Trainer/TRL launch with a known parser follows",
    "Left in place with a TODO: nothing reads it on TorchNeuron, and dropping it alone would train in float32. "
    "Pass --bf16 to a Trainer/TRL script or load the model with dtype=torch.bfloat16, then delete it.",
    examples=(
        example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "export XLA_USE_BF16=1\n"
            "torchrun --nproc_per_node=2 train.py\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM469 `XLA_USE_BF16=1` trained in bf16 under XLA and nothing reads it on TorchNeuron; it reaches `train.py`, whose argument parser is not known: pass --bf16 to a Trainer/TRL script or load the model with dtype=torch.bfloat16, then delete it\n"
            "export XLA_USE_BF16=1\n"
            "torchrun --nproc_per_node=2 train.py\n",
        ),
    ),
)
RULES = (PRECISION_MANUAL,)
MATCHER = None  # decided in `nm456_variables.py`
