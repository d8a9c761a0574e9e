"""NM111, decided by the walk of `nm110_inputs_to_device.py`: one look at each tokenizer call decides where
its outputs go and what they hold."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

UNPADDED_PROMPTS = Rule(
    "NM111",
    Severity.WARNING,
    'Tokenizer outputs for a model that optimum-neuron kept on CPU, not padded to `"max_length"`',
    "`.to(model.device)` appended. Review the padding: shapes follow each prompt. With a static cache sized by "
    "max_cache_len, generate() compiles the decode step once per batch size, but the prefill runs eagerly at "
    "each prompt's length, so every new length runs new eager kernels (an encoder forward recompiles per "
    'shape); pass `padding="max_length", max_length=...` to keep shapes fixed.',
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM
from transformers import AutoTokenizer

model = NeuronModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", export=True, batch_size=1, sequence_length=512)
tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")
inputs = tokenizer(prompt, return_tensors="pt")
""",
            after="""\
from transformers import AutoModelForCausalLM, AutoTokenizer
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", device_map="neuron")
model.generation_config.cache_implementation = "static"
model.generation_config.max_cache_len = 512
tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")
inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
""",
        ),
    ),
)
RULES = (UNPADDED_PROMPTS,)
HANDLER = None  # decided in `nm110_inputs_to_device.py`
