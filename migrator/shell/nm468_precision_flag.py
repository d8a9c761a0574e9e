"""NM468, decided by the walk of `nm456_variables.py`: one look at each variable a launcher sets, in one
table, decides whether it goes, becomes a flag or needs a person."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

PRECISION_FLAG = Rule(
    "NM468",
    Severity.WARNING,
    "`XLA_USE_BF16=1` / `XLA_DOWNCAST_BF16=1` (prefix or `export`) before a Trainer/TRL launch",
    "Removed, and `--bf16` added to each Trainer/TRL launch it reached (`--bf16 true` where the launch spells "
    "its booleans, or where the script parses a TRL config, which reads `--bf16` only with a value): bf16 "
    "autocast with float32 master weights, where XLA cast the weights themselves.",
    examples=(
        example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "export XLA_USE_BF16=1\n"
            "torchrun --nproc_per_node=32 sft.py --model_name_or_path Qwen/Qwen3-0.6B --packing true\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 sft.py --model_name_or_path Qwen/Qwen3-0.6B --packing true --bf16 true\n",
        ),
    ),
)
RULES = (PRECISION_FLAG,)
MATCHER = None  # decided in `nm456_variables.py`
