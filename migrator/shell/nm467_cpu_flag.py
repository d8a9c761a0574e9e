"""NM467, decided by the walk of `nm461_flags.py`: one look at each flag of a Python launch, by the launched
script's argument parser, decides what it becomes."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

CPU_FLAG = Rule(
    "NM467",
    Severity.WARNING,
    "`--use_cpu True` / `--no_cuda True` on a training launch",
    "Removed from the launch of an XLA-era script (one that imports torch_xla / optimum-neuron, or launched "
    "with XLA variables or packages in the file), where it never moved training to the CPU; elsewhere left in "
    "place with a TODO: on TorchNeuron it trains on the CPU.",
    examples=(
        example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 run_clm.py --use_cpu True --zero_1 True\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM467 `--use_cpu` made sense under XLA (the XLA device is not CUDA), but on TorchNeuron it makes the Trainer run on the CPU instead of the neuron device: remove it\n"
            "torchrun --nproc_per_node=32 run_clm.py --use_cpu True\n",
        ),
        example(
            "#!/bin/bash\n"
            "torchrun --nproc_per_node=2 run_clm.py --model_name_or_path Qwen/Qwen3-0.6B --no_cuda True --zero_1 True\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM467 `--use_cpu` made sense under XLA (the XLA device is not CUDA), but on TorchNeuron it makes the Trainer run on the CPU instead of the neuron device: remove it\n"
            "torchrun --nproc_per_node=2 run_clm.py --model_name_or_path Qwen/Qwen3-0.6B --use_cpu True\n",
        ),
    ),
)
RULES = (CPU_FLAG,)
MATCHER = None  # decided in `nm461_flags.py`
