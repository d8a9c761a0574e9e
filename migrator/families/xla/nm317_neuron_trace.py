"""NM317, decided by the walk of `nm314_manual.py`: one prefix table of XLA / NxD / torch_neuronx APIs with no
faithful rewrite decides which code each use gets."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

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
RULES = (NEURON_TRACE,)
HANDLER = None  # decided in `nm314_manual.py`
