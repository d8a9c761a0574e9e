"""NM117, decided by the walk of `nm101_causal_lm.py`: one rewrite of each `NeuronModelForCausalLM`
export/load decides every argument it carries."""

from __future__ import annotations

from migrator.families.inference.tables import ONE_CORE
from migrator.rules import Example, Rule, Severity

DEFAULT_ALL_CORES = Rule(
    "NM117",
    Severity.WARNING,
    "`get_neuron_config` without `tensor_parallel_size` (optimum-neuron then sharded over all visible cores)",
    f"{ONE_CORE}launch with `torchrun --nproc_per_node=N`.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM

config = NeuronModelForCausalLM.get_neuron_config("Qwen/Qwen3-0.6B", batch_size=1, sequence_length=1024)
model = NeuronModelForCausalLM.export("Qwen/Qwen3-0.6B", config)
""",
            after="""\
import os
from transformers import AutoModelForCausalLM

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", device_map="neuron")
model.generation_config.cache_implementation = "static"
model.generation_config.max_cache_len = 1024
""",
        ),
    ),
)
RULES = (DEFAULT_ALL_CORES,)
HANDLER = None  # decided in `nm101_causal_lm.py`
