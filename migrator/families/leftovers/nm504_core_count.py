"""NM504: an inference core count (`num_cores`, counted on the compile target: inf2, trn1) turned into a
tensor-parallel degree. Decided inside the causal-LM load rewrite (`inference/nm101_causal_lm.py`)."""

from __future__ import annotations

from migrator.families.leftovers.platforms import TRN2_CORES
from migrator.rules import Example, Rule, Severity

CORE_COUNT = Rule(
    "NM504",
    Severity.WARNING,
    '`num_cores=N` (or `tensor_parallel_size=N` with `instance_type="inf2"`/`"trn1"`) of an optimum-neuron '
    "load rewritten to `DistributedConfig(tp_size=N)`",
    "Rewritten, with a TODO: `num_cores` counted the NeuronCores of the compile target (an inf2 or trn1 "
    f"instance), which are not trn2 NeuronCores. Check that N divides the trn2 instance's cores ({TRN2_CORES} "
    "logical NeuronCores on trn2.48xlarge) and the model's attention heads, and launch with "
    "`torchrun --nproc_per_node=N`.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM

model = NeuronModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-70B", export=True, num_cores=24)
""",
            after="""\
import os
from transformers import AutoModelForCausalLM, DistributedConfig

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

# TODO(neuron-migrate): NM103 Rewritten to DistributedConfig(tp_size=24), which shards the model over 24 processes: optimum-neuron ran it in one, and nothing here shows torchrun starting this script; launch the script with `torchrun --nproc_per_node=24` (all ranks run generate; print on rank 0)
# TODO(neuron-migrate): NM504 num_cores=24 counted the compile target's (inf2 / trn1) NeuronCores, not trn2 NeuronCores; 24 does not divide the 64 logical NeuronCores of a trn2.48xlarge; choose tp_size for the trn2 / trn3 instance
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-70B", distributed_config=DistributedConfig(tp_size=24))
model.generation_config.cache_implementation = "static"
""",
        ),
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM

config = NeuronModelForCausalLM.get_neuron_config(
    "meta-llama/Llama-3.1-8B", batch_size=1, sequence_length=4096, tensor_parallel_size=2, instance_type="trn1"
)
model = NeuronModelForCausalLM.export("meta-llama/Llama-3.1-8B", config)
""",
            after="""\
import os
from transformers import AutoModelForCausalLM, DistributedConfig

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")
# TODO(neuron-migrate): NM103 Rewritten to DistributedConfig(tp_size=2), which shards the model over 2 processes: optimum-neuron ran it in one, and nothing here shows torchrun starting this script; launch the script with `torchrun --nproc_per_node=2` (all ranks run generate; print on rank 0)
# TODO(neuron-migrate): NM504 tensor_parallel_size=2 counted trn1 NeuronCores, not trn2 NeuronCores; choose tp_size for the trn2 / trn3 instance
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", distributed_config=DistributedConfig(tp_size=2))
model.generation_config.cache_implementation = "static"
model.generation_config.max_cache_len = 4096
""",
        ),
    ),
)
RULES = (CORE_COUNT,)
HANDLER = None  # decided inside the causal-LM load rewrite and the shell family's `optimum-cli` rewrite
