"""NM116, raised (`loads.Unmapped`) by `loads.py` and the load rewrites (`nm101_causal_lm.py`,
`nm112_traced_model.py`, `nm113_diffusion.py`, `nm114_pipeline.py`) where a load's arguments cannot be mapped;
the family's tracker (`state.py`) puts the TODO."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

UNMAPPED_ARGUMENTS = Rule(
    "NM116",
    Severity.ERROR,
    "A compiled-model load whose arguments the codemod cannot map (unknown or runtime-only keywords, "
    "`**kwargs`, export-time adapter fusing, a load that is not assigned to a name)",
    "Left unchanged with a TODO naming the arguments; rewrite the load by hand.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM

model = NeuronModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", export=True, continuous_batching=True)
""",
            after="""\
# TODO(neuron-migrate): NM501 `optimum.neuron` stays imported only for line 8 (NM116), under its own TODO: `optimum.neuron` is optimum-neuron, which TorchNeuron replaces; remove this import once that statement is rewritten
from optimum.neuron import NeuronModelForCausalLM
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

# TODO(neuron-migrate): NM116 `continuous_batching` is a serving feature of vLLM Neuron, not of Transformers generate(); rewrite this load by hand
model = NeuronModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", export=True, continuous_batching=True)
""",
        ),
    ),
)
RULES = (UNMAPPED_ARGUMENTS,)
HANDLER = None  # decided in `loads.py`
