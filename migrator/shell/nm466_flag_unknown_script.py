"""NM466, decided by the walk of `nm461_flags.py`: one look at each flag of a Python launch, by the launched
script's argument parser, decides what it becomes."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

FLAG_UNKNOWN_SCRIPT = Rule(
    "NM466",
    Severity.WARNING,
    "An optimum-neuron training flag (`--zero_1`, `--max_seq_length`...) on a launch of a script whose argument "
    "parser is not known",
    "Left in place with a TODO that says what the flag becomes if the script builds TrainingArguments/SFTConfig "
    "from it: flags are renamed or removed only for Transformers/TRL example scripts and scripts of the same "
    "tree whose parser was read (a script's own `--max_seq_length`, as on `run_glue.py`, is its own).",
    examples=(
        example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 train.py --zero_1 true --warmup_ratio 0.03\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM466 `train.py` is neither in this tree nor a known Transformers/TRL example script, so its optimum-neuron training flags are left as they are; if they reach TrainingArguments/SFTConfig: remove `--zero_1`; rename `--warmup_ratio` to `--warmup_steps`\n"
            "torchrun --nproc_per_node=32 train.py --zero_1 true --warmup_ratio 0.03\n",
        ),
    ),
)
RULES = (FLAG_UNKNOWN_SCRIPT,)
MATCHER = None  # decided in `nm461_flags.py`
