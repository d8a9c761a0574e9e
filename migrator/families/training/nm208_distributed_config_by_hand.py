"""NM208: reported by each rule that meets model parallelism it cannot carry to the model load (the arguments
in `nm202_arguments.py`, a `trn_config` in `nm209_model_load.py`, `nm211_lazy_load.py`,
`nm217_neuron_config.py`): a finding of several walks, with no walk of its own."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

DISTRIBUTED_CONFIG_BY_HAND = Rule(
    "NM208",
    Severity.ERROR,
    "Model parallelism the codemod cannot carry to the model load (`trn_config` from parsed arguments, no "
    "single model `from_pretrained` in the scope, a model whose architecture has no tensor-parallel plan in "
    "Transformers, ...); a model whose id it cannot resolve (an argument, a local folder)",
    "Left as it is with a TODO: read the tensor-parallel size from your own argument dataclass and pass "
    "`distributed_config=DistributedConfig(...)` to `AutoModelForCausalLM.from_pretrained`. A model it cannot "
    "resolve gets the degree at its load all the same (Transformers raises ValueError there where the "
    "architecture has no plan), with a TODO: which models the job trains with tensor parallelism is the owner's.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments


def build(model_name):
    args = NeuronTrainingArguments(output_dir="out", tensor_parallel_size=2)
    return args
""",
            after="""\
# TODO(neuron-migrate): NM501 `optimum.neuron` stays imported only for line 7 (NM208), under its own TODO: `optimum.neuron` is optimum-neuron, which TorchNeuron replaces; remove this import once that statement is rewritten
from optimum.neuron import NeuronTrainingArguments


def build(model_name):
    # TODO(neuron-migrate): NM208 `tensor_parallel_size` are not TrainingArguments fields and this scope has no single model from_pretrained that can take them; remove them here and pass distributed_config=DistributedConfig(tp_size=2, fsdp_size=int(os.environ.get("WORLD_SIZE", "1")) // 2) to the from_pretrained that loads the model (from transformers import DistributedConfig); until then the call stays as it was (`NeuronTrainingArguments`): run neuron-migrate again afterwards
    args = NeuronTrainingArguments(output_dir="out", tensor_parallel_size=2)
    return args
""",
        ),
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments
from transformers import AutoModelForCausalLM

args = NeuronTrainingArguments(output_dir="out", tensor_parallel_size=2)
model = AutoModelForCausalLM.from_pretrained("openai-community/gpt2")
""",
            after="""\
# TODO(neuron-migrate): NM501 `optimum.neuron` stays imported only for line 9 (NM208), under its own TODO: `optimum.neuron` is optimum-neuron, which TorchNeuron replaces; remove this import once that statement is rewritten
from optimum.neuron import NeuronTrainingArguments
from transformers import AutoModelForCausalLM
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

# TODO(neuron-migrate): NM208 `openai-community/gpt2` is gpt2, which has no tp_plan in Transformers 5.23.0 (measured by neuron-compat tp-readiness): from_pretrained cannot shard its layers with any tp_size > 1; the degree that works is 1; remove the tensor-parallel degree (tp_size=1: every process holds the whole model, data parallel over WORLD_SIZE), or train a model whose architecture has a plan (llama, qwen3, mistral, gemma3_text, ...); until then the call stays as it was (`NeuronTrainingArguments`): run neuron-migrate again afterwards
args = NeuronTrainingArguments(output_dir="out", tensor_parallel_size=2)
model = AutoModelForCausalLM.from_pretrained("openai-community/gpt2")
""",
        ),
    ),
)
RULES = (DISTRIBUTED_CONFIG_BY_HAND,)
HANDLER = None  # reported by the rules above
