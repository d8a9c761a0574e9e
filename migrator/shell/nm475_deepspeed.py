"""NM475, decided by the walk of `nm461_flags.py`: a Python launch that runs DeepSpeed (the `deepspeed` launcher,
`accelerate launch --use_deepspeed` or with an Accelerate config whose `distributed_type` is DEEPSPEED, a
Trainer's `--deepspeed CONFIG`)."""

from __future__ import annotations

from migrator.rules import Rule, Severity
from migrator.shell import example

DEEPSPEED = Rule(
    "NM475",
    Severity.ERROR,
    "A launch that runs DeepSpeed: the `deepspeed` launcher, `accelerate launch --use_deepspeed`, `accelerate "
    "launch --config_file F` where F's `distributed_type` is DEEPSPEED, or a Trainer's `--deepspeed CONFIG`",
    "Left in place with a TODO: DeepSpeed has no accelerator for TorchNeuron's `neuron` device (its accelerators: "
    "CUDA, CPU, XPU, NPU, HPU, MPS...), and TorchNeuron shards with DDP, FSDP2 or DTensor (its torch.distributed "
    "guide); the owner picks the sharding that replaces the ZeRO stage and offload the configuration asks for "
    "(FSDP2: an Accelerate config with `distributed_type: FSDP` and `fsdp_version: 2`, or "
    "`DistributedConfig(fsdp_size=...)` at the model load).",
    examples=(
        example(
            "#!/bin/bash\naccelerate launch --use_deepspeed --zero_stage 3 train.py --bf16\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM475 `accelerate launch --use_deepspeed` runs DeepSpeed, which has no "
            "accelerator for TorchNeuron's `neuron` device; shard with FSDP2 instead (an Accelerate config with "
            "`distributed_type: FSDP` and `fsdp_version: 2`, or `DistributedConfig(fsdp_size=...)` at the model "
            "load): the owner picks what replaces the ZeRO stage and offload it asks for\n"
            "accelerate launch --use_deepspeed --zero_stage 3 train.py --bf16\n",
        ),
    ),
)
RULES = (DEEPSPEED,)
MATCHER = None  # decided in `nm461_flags.py`
