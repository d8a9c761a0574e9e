"""NM318, decided by the walk of `nm314_manual.py` (one prefix table of XLA / NxD / torch_neuronx APIs with no
faithful rewrite decides which code each use gets); the XLA rules that rewrite a call report it by code where
that call has no faithful rewrite (`nm302_device.py`, `nm303_runtime.py`, `nm327_profiler_annotations.py`)."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

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

memory = xm.get_memory_info(device)
""",
            after="""\
# TODO(neuron-migrate): NM501 `torch_xla` stays imported only for line 5 (NM318), under its own TODO: `torch_xla` is PyTorch/XLA, which TorchNeuron does not use (Transformers takes the XLA path when it is importable); remove this import once that statement is rewritten
import torch_xla.core.xla_model as xm

# TODO(neuron-migrate): NM318 `torch_xla.core.xla_model.get_memory_info` has no direct TorchNeuron equivalent; replace it with the torch / torch.distributed equivalent on device "neuron" by hand.
memory = xm.get_memory_info(device)
""",
        ),
    ),
)
RULES = (UNSUPPORTED_XLA,)
HANDLER = None  # decided in `nm314_manual.py`
