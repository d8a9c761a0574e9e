"""NM316, decided by the walk of `nm314_manual.py`: one prefix table of XLA / NxD / torch_neuronx APIs with no
faithful rewrite decides which code each use gets."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

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
# TODO(neuron-migrate): NM501 `neuronx_distributed` stays imported only for line 5 (NM316), under its own TODO: `neuronx_distributed` is NeuronX Distributed, the XLA-flow parallel library; remove this import once that statement is rewritten
from neuronx_distributed.parallel_layers import parallel_state

# TODO(neuron-migrate): NM316 `neuronx_distributed.parallel_layers.parallel_state.initialize_model_parallel` has no direct TorchNeuron equivalent; use a DeviceMesh with DTensor tensor parallelism (`parallelize_module`, `ColwiseParallel`, `RowwiseParallel`) or `DistributedConfig(tp_size=...)` for Transformers models.
parallel_state.initialize_model_parallel(tensor_model_parallel_size=8)
""",
        ),
    ),
)
RULES = (NEURONX_DISTRIBUTED,)
HANDLER = None  # decided in `nm314_manual.py`
