"""NM213: `NeuronAccelerator(...)` (a custom training loop on NxD) is left with a TODO."""

from __future__ import annotations

import libcst as cst

from migrator.families.training.state import TrainingFile
from migrator.families.training.targets import ACCELERATORS, HINTS, TRIGGERS
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

ACCELERATOR = Rule(
    "NM213",
    Severity.ERROR,
    "`NeuronAccelerator(...)` (custom training loop on NxD)",
    "Left with a TODO: use `accelerate.Accelerator`; load the model with `distributed_config=DistributedConfig"
    '(...)` (or pass `parallelism_config=ParallelismConfig(tp_size=...)`), `mixed_precision="bf16"` instead of '
    "`mixed_precision_config`, `fsdp_plugin=FullyShardedDataParallelPlugin(fsdp_version=2)` instead of "
    "`zero_1`.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronAccelerator

accelerator = NeuronAccelerator(mixed_precision="bf16")
""",
            after="""\
# TODO(neuron-migrate): NM501 `optimum.neuron` stays imported only for line 5 (NM213), under its own TODO: `optimum.neuron` is optimum-neuron, which TorchNeuron replaces; remove this import once that statement is rewritten
from optimum.neuron import NeuronAccelerator

# TODO(neuron-migrate): NM213 NeuronAccelerator drives NxD model parallelism and ZeRO-1; replace it with accelerate.Accelerator and shard the model with from_pretrained(..., distributed_config=DistributedConfig(...))
accelerator = NeuronAccelerator(mixed_precision="bf16")
""",
        ),
    ),
)
RULES = (ACCELERATOR,)


class Accelerator(Handler):
    CALLS = ACCELERATORS
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not isinstance(updated, cst.Call) or len(original.args) != len(updated.args):
            return updated  # replaced or restructured by an earlier rule
        qualified = self.ctx.qualified(original.func)
        if qualified in ACCELERATORS:
            self.file.kept.add(qualified)
            self.ctx.todo(
                original,
                ACCELERATOR,
                "NeuronAccelerator drives NxD model parallelism and ZeRO-1",
                "replace it with accelerate.Accelerator and shard the model with from_pretrained(..., "
                "distributed_config=DistributedConfig(...))",
            )
        return updated


HANDLER = Accelerator
