"""NM462, decided by the walk of `nm461_flags.py`: one look at each flag of a Python launch, by the launched
script's argument parser, decides what it becomes."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

FLAG_RENAMED = Rule(
    "NM462",
    Severity.INFO,
    "A training flag renamed in Transformers 5 / TRL 1.16 (`--warmup_ratio`, `--max_seq_length`...)",
    "Renamed on the launcher line (`--warmup_ratio r` -> `--warmup_steps r`...).",
    examples=(
        example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 sft.py --max_seq_length 2048 --zero_1 true\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 sft.py --max_length 2048\n",
        ),
    ),
)
RULES = (FLAG_RENAMED,)
MATCHER = None  # decided in `nm461_flags.py`
