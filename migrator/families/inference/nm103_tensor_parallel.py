"""NM103, decided by the walk of `nm101_causal_lm.py`: one rewrite of each `NeuronModelForCausalLM`
export/load decides every argument it carries."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

TENSOR_PARALLEL = Rule(
    "NM103",
    Severity.WARNING,
    "`tensor_parallel_size` / `num_cores` other than the literal 1",
    "Rewritten to `distributed_config=DistributedConfig(tp_size=N)` without device_map; the script must now be "
    "launched with `torchrun --nproc_per_node=N` (all ranks run generate; print on rank 0).",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM

model = NeuronModelForCausalLM.from_pretrained(
    "meta-llama/Llama-3.1-8B", export=True, sequence_length=4096, tensor_parallel_size=8
)
""",
            after="""\
import os
from transformers import AutoModelForCausalLM, DistributedConfig

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

# TODO(neuron-migrate): NM103 Rewritten to DistributedConfig(tp_size=8), which shards the model over 8 processes: optimum-neuron ran it in one, and nothing here shows torchrun starting this script; launch the script with `torchrun --nproc_per_node=8` (all ranks run generate; print on rank 0)
model = AutoModelForCausalLM.from_pretrained(
    "meta-llama/Llama-3.1-8B", distributed_config=DistributedConfig(tp_size=8)
)
model.generation_config.cache_implementation = "static"
model.generation_config.max_cache_len = 4096
""",
        ),
    ),
)
RULES = (TENSOR_PARALLEL,)
HANDLER = None  # decided in `nm101_causal_lm.py`
