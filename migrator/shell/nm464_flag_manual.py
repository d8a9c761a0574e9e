"""NM464, decided by the walk of `nm461_flags.py`: one look at each flag of a Python launch, by the launched
script's argument parser, decides what it becomes."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

FLAG_MANUAL = Rule(
    "NM464",
    Severity.ERROR,
    "A training flag with no faithful rewrite (`--logging_dir`, `--pipeline_parallel_size`...)",
    "Left in place with a TODO that says what to do instead.",
    examples=(
        example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 run_clm.py --logging_dir logs --zero_1 true\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM464 `--logging_dir` removed in Transformers 5 (TrainingArguments raises on it); set the environment variable TENSORBOARD_LOGGING_DIR to this directory before the Trainer is created\n"
            "torchrun --nproc_per_node=32 run_clm.py --logging_dir logs\n",
        ),
    ),
)
RULES = (FLAG_MANUAL,)
MATCHER = None  # decided in `nm461_flags.py`
