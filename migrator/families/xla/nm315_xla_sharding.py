"""NM315, decided by the walk of `nm314_manual.py`: one prefix table of XLA / NxD / torch_neuronx APIs with no
faithful rewrite decides which code each use gets."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

XLA_SHARDING = Rule(
    "NM315",
    Severity.ERROR,
    "PyTorch/XLA FSDP or ZeRO optimizer (`XlaFullyShardedDataParallel`, `ZeroRedundancyOptimizer`)",
    "Left in place with a TODO: shard with FSDP2 (`torch.distributed.fsdp.fully_shard` per block), or "
    "load Transformers models with `DistributedConfig(fsdp_size=...)`.",
    examples=(
        Example(
            before="""\
from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP

model = FSDP(model)
""",
            after="""\
# TODO(neuron-migrate): NM501 `torch_xla` stays imported only for line 5 (NM315), under its own TODO: `torch_xla` is PyTorch/XLA, which TorchNeuron does not use (Transformers takes the XLA path when it is importable); remove this import once that statement is rewritten
from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP

# TODO(neuron-migrate): NM315 `torch_xla.distributed.fsdp.XlaFullyShardedDataParallel` has no direct TorchNeuron equivalent; shard with FSDP2 (`torch.distributed.fsdp.fully_shard` per block), or load Transformers models with `DistributedConfig(fsdp_size=...)`.
model = FSDP(model)
""",
        ),
    ),
)
RULES = (XLA_SHARDING,)
HANDLER = None  # decided in `nm314_manual.py`
