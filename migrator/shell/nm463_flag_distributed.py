"""NM463, decided by the walk of `nm461_flags.py`: one look at each flag of a Python launch, by the launched
script's argument parser, decides what it becomes."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

FLAG_DISTRIBUTED = Rule(
    "NM463",
    Severity.WARNING,
    "`--tensor_parallel_size` on a launcher line",
    "Kept as a script argument with a TODO: it now feeds `DistributedConfig(tp_size=...)` when the script "
    "loads the model; torchrun --nproc_per_node must equal tp_size x fsdp_size. Removed, with a TODO saying the "
    "degree, from the launch of a script of the tree that never reads it (optimum-neuron's trainer did) and whose "
    "parser, read from the script as migrated, does not declare it (TrainingArguments would reject it); a launcher "
    "is read for the flag even when it has no other legacy code.",
    examples=(
        example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 run_clm.py --tensor_parallel_size 8 --zero_1 true\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM463 `--tensor_parallel_size` is kept as a script argument and now feeds DistributedConfig(tp_size=...); tensor parallelism is set when the model is loaded: from_pretrained(..., distributed_config=DistributedConfig(tp_size=...)), and torchrun --nproc_per_node must equal tp_size x fsdp_size\n"
            "torchrun --nproc_per_node=32 run_clm.py --tensor_parallel_size 8\n",
        ),
    ),
)
RULES = (FLAG_DISTRIBUTED,)
MATCHER = None  # decided in `nm461_flags.py`
