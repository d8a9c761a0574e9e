"""NM210, decided by the walk of `nm209_model_load.py`: one rewrite of each training model load decides its
class, `trn_config` and attention implementation together."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

FLASH_ATTENTION = Rule(
    "NM210",
    Severity.WARNING,
    '`attn_implementation="flash_attention_2"` on a training model load',
    'Rewritten to `"sdpa"`: optimum-neuron mapped flash_attention_2 to its own NKI kernel, while Transformers\' '
    "flash_attention_2 needs the CUDA flash_attn package.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments
from optimum.neuron.models.training import NeuronModelForCausalLM

args = NeuronTrainingArguments(output_dir="out")
model = NeuronModelForCausalLM.from_pretrained(
    "Qwen/Qwen3-0.6B", args.trn_config, attn_implementation="flash_attention_2"
)
""",
            after="""\
import os
from transformers import AutoModelForCausalLM, TrainingArguments

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

args = TrainingArguments(output_dir="out", torch_compile=True)
model = AutoModelForCausalLM.from_pretrained(
    "Qwen/Qwen3-0.6B", attn_implementation="sdpa"
)
""",
        ),
    ),
)
RULES = (FLASH_ATTENTION,)
HANDLER = None  # decided in `nm209_model_load.py`
