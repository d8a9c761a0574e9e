"""NM314-NM318: torch_xla / neuronx_distributed / torch_neuronx APIs with no faithful rewrite get a TODO
naming the replacement; one prefix table decides which rule applies."""

from __future__ import annotations

import libcst as cst

from migrator.families.xla.names import DECIDED_CALLS, REWRITTEN_CALLS, STATEMENT_CALLS, XM
from migrator.families.xla.state import HINTS, XlaFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

COLLECTIVE = Rule(
    "NM314",
    Severity.ERROR,
    "XLA collective with different semantics (`xm.all_reduce`, `xm.all_gather`, `xm.mesh_reduce`, "
    "`xm.reduce_gradients`...)",
    "Left in place with a TODO: rewrite with torch.distributed (`dist.all_reduce` works in place, "
    "`dist.all_gather_into_tensor`, `dist.all_gather_object`) or wrap the model in DistributedDataParallel.",
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm

total = xm.all_reduce(xm.REDUCE_SUM, loss)
""",
            after="""\
import torch_xla.core.xla_model as xm

# TODO(neuron-migrate): NM314 `torch_xla.core.xla_model.all_reduce` has no direct TorchNeuron equivalent; rewrite with torch.distributed (`dist.all_reduce` works in place, `dist.all_gather_into_tensor`, `dist.all_gather_object`) or wrap the model in DistributedDataParallel.
total = xm.all_reduce(xm.REDUCE_SUM, loss)
""",
        ),
    ),
)
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
from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP

# TODO(neuron-migrate): NM315 `torch_xla.distributed.fsdp.XlaFullyShardedDataParallel` has no direct TorchNeuron equivalent; shard with FSDP2 (`torch.distributed.fsdp.fully_shard` per block), or load Transformers models with `DistributedConfig(fsdp_size=...)`.
model = FSDP(model)
""",
        ),
    ),
)
NEURONX_DISTRIBUTED = Rule(
    "NM316",
    Severity.ERROR,
    "neuronx_distributed parallel layers / parallel state",
    "Left in place with a TODO: use a DeviceMesh with DTensor tensor parallelism (`parallelize_module`, "
    "`ColwiseParallel`, `RowwiseParallel`) or `DistributedConfig(tp_size=...)` for Transformers models.",
    examples=(
        Example(
            before="""\
from neuronx_distributed.parallel_layers import parallel_state

parallel_state.initialize_model_parallel(tensor_model_parallel_size=8)
""",
            after="""\
from neuronx_distributed.parallel_layers import parallel_state

# TODO(neuron-migrate): NM316 `neuronx_distributed.parallel_layers.parallel_state.initialize_model_parallel` has no direct TorchNeuron equivalent; use a DeviceMesh with DTensor tensor parallelism (`parallelize_module`, `ColwiseParallel`, `RowwiseParallel`) or `DistributedConfig(tp_size=...)` for Transformers models.
parallel_state.initialize_model_parallel(tensor_model_parallel_size=8)
""",
        ),
    ),
)
NEURON_TRACE = Rule(
    "NM317",
    Severity.ERROR,
    "`torch_neuronx.trace(model, example_inputs)` ahead-of-time compilation",
    'Left in place with a TODO: run the model on device "neuron" and compile it with '
    '`torch.compile(model, backend="neuron", fullgraph=True, dynamic=False)`.',
    examples=(
        Example(
            before="""\
import torch_neuronx

traced = torch_neuronx.trace(model, example_inputs)
""",
            after="""\
import torch_neuronx

# TODO(neuron-migrate): NM317 `torch_neuronx.trace` has no direct TorchNeuron equivalent; run the model on device "neuron" and compile it with `torch.compile(model, backend="neuron", fullgraph=True, dynamic=False)`.
traced = torch_neuronx.trace(model, example_inputs)
""",
        ),
    ),
)
UNSUPPORTED_XLA = Rule(
    "NM318",
    Severity.ERROR,
    "A torch_xla API the codemod has no rewrite for",
    "Left in place with a TODO: replace it with the torch / torch.distributed equivalent on device "
    '"neuron" by hand.',
    examples=(
        Example(
            before="""\
import torch_xla.core.xla_model as xm

xm.set_rng_state(1234)
""",
            after="""\
import torch_xla.core.xla_model as xm

# TODO(neuron-migrate): NM318 `torch_xla.core.xla_model.set_rng_state` has no direct TorchNeuron equivalent; replace it with the torch / torch.distributed equivalent on device "neuron" by hand.
xm.set_rng_state(1234)
""",
        ),
    ),
)
RULES = (COLLECTIVE, XLA_SHARDING, NEURONX_DISTRIBUTED, NEURON_TRACE, UNSUPPORTED_XLA)

# Qualified-name prefix -> rule for what has no faithful rewrite (longest prefix first).
MANUAL_PREFIXES: tuple[tuple[str, Rule], ...] = (
    (f"{XM}.all_reduce", COLLECTIVE),
    (f"{XM}.all_gather", COLLECTIVE),
    (f"{XM}.reduce_scatter", COLLECTIVE),
    (f"{XM}.all_to_all", COLLECTIVE),
    (f"{XM}.mesh_reduce", COLLECTIVE),
    (f"{XM}.reduce_gradients", COLLECTIVE),
    ("torch_xla.distributed.fsdp", XLA_SHARDING),
    ("torch_xla.distributed.zero_redundancy_optimizer", XLA_SHARDING),
    ("neuronx_distributed", NEURONX_DISTRIBUTED),
    ("torch_neuronx.trace", NEURON_TRACE),
    ("torch_neuronx.xla_impl.trace", NEURON_TRACE),
    ("torch_xla", UNSUPPORTED_XLA),
)


class ManualXla(Handler):
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(XlaFile)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        name = self.ctx.qualified(original)
        if original not in self.file.called and name in REWRITTEN_CALLS:
            self.ctx.todo(
                original,
                UNSUPPORTED_XLA,
                f"`{name}` is used as a value, not called",
                "call its replacement where it is used",
            )
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        name = self.ctx.qualified(original.func)
        if name is None:
            return updated
        if name in STATEMENT_CALLS:
            if original not in self.file.statement_calls:
                self.ctx.todo(
                    original,
                    UNSUPPORTED_XLA,
                    f"`{name}` is used as a value and has no expression equivalent",
                    "call it as a statement or rewrite it by hand",
                )
            return updated
        if name in DECIDED_CALLS or original in self.file.synced_by_ddp:
            return updated
        for prefix, rule in MANUAL_PREFIXES:
            if name == prefix or name.startswith(prefix + "."):
                what = rule.action.removeprefix("Left in place with a TODO: ")
                self.ctx.todo(original, rule, f"`{name}` has no direct TorchNeuron equivalent", what)
                break
        return updated


HANDLER = ManualXla
