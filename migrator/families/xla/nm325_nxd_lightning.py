"""NM325, decided by the walk of `nm314_manual.py`: one prefix table of XLA / NxD / torch_neuronx APIs with no
faithful rewrite decides which code each use gets."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

NXD_LIGHTNING = Rule(
    "NM325",
    Severity.ERROR,
    "NeuronX Distributed's PyTorch Lightning classes (`NeuronXLAStrategy`, `NeuronXLAPrecisionPlugin`, "
    "`NeuronTQDMProgressBar`, `NeuronTensorBoardLogger`)",
    "Left in place with a TODO: NeuronX Distributed's Lightning classes target the XLA device; use Lightning's own classes "
    '(`TQDMProgressBar`, `TensorBoardLogger`) on device "neuron", bf16 with '
    '`torch.autocast(device_type="neuron", dtype=torch.bfloat16)` instead of the precision plugin, and the '
    "strategy's parallel degrees (`tensor_parallel_size`...) with DTensor / FSDP2 under torchrun.",
    examples=(
        Example(
            before="""\
from neuronx_distributed.lightning import NeuronTQDMProgressBar

callbacks = [NeuronTQDMProgressBar()]
""",
            after="""\
# TODO(neuron-migrate): NM501 `neuronx_distributed` stays imported only for line 5 (NM325), under its own TODO: `neuronx_distributed` is NeuronX Distributed, the XLA-flow parallel library; remove this import once that statement is rewritten
from neuronx_distributed.lightning import NeuronTQDMProgressBar

# TODO(neuron-migrate): NM325 `neuronx_distributed.lightning.NeuronTQDMProgressBar` has no direct TorchNeuron equivalent; NeuronX Distributed's Lightning classes target the XLA device; use Lightning's own classes (`TQDMProgressBar`, `TensorBoardLogger`) on device "neuron", bf16 with `torch.autocast(device_type="neuron", dtype=torch.bfloat16)` instead of the precision plugin, and the strategy's parallel degrees (`tensor_parallel_size`...) with DTensor / FSDP2 under torchrun.
callbacks = [NeuronTQDMProgressBar()]
""",
        ),
    ),
)
RULES = (NXD_LIGHTNING,)
HANDLER = None  # decided in `nm314_manual.py`
