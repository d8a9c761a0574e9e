"""NM210, decided by the walk of `nm209_model_load.py`: one rewrite of each training model load decides its
class, `trn_config` and attention implementation together."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

FLASH_ATTENTION = Rule(
    "NM210",
    Severity.WARNING,
    '`attn_implementation="flash_attention_2"` (or `"flash_attention_3"`, or `use_flash_attention_2=`) on a model '
    "load of a training script",
    'Rewritten to `attn_implementation="sdpa"`: optimum-neuron mapped flash_attention_2 to its own NKI kernel, '
    "while Transformers' flash_attention_2/_3 need the CUDA flash_attn packages, which a neuron device does not "
    "have; `use_flash_attention_2=` (either value) is rejected by Transformers 5, and its False chose sdpa too.",
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
        Example(
            before="""\
from optimum.neuron import NeuronSFTTrainer
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", use_flash_attention_2=True)
""",
            after="""\
from transformers import AutoModelForCausalLM
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", attn_implementation="sdpa")
""",
        ),
    ),
)
RULES = (FLASH_ATTENTION,)
HANDLER = None  # decided in `nm209_model_load.py`
