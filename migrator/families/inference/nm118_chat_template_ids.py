"""NM118, decided by the walk of `nm110_inputs_to_device.py`: one look at each tokenizer call decides where
its outputs go and what they hold."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

CHAT_TEMPLATE_IDS = Rule(
    "NM118",
    Severity.INFO,
    "`tokenizer.apply_chat_template(...)` that tokenizes, without `return_dict`",
    "`return_dict=False` added: Transformers 4 (optimum-neuron's) returned the token ids, Transformers 5 returns "
    "a BatchEncoding (a dict) by default, which `generate(ids)` and `ids.shape` do not take as ids.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM
from transformers import AutoTokenizer

model = NeuronModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", export=True, batch_size=1, sequence_length=512)
tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")
ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
output = model.generate(ids, max_new_tokens=64)
""",
            after="""\
from transformers import AutoModelForCausalLM, AutoTokenizer
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", device_map="neuron")
model.generation_config.cache_implementation = "static"
model.generation_config.max_cache_len = 512
tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")
ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=False).to(model.device)
output = model.generate(ids, max_new_tokens=64)
""",
        ),
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM
from transformers import AutoTokenizer

model = NeuronModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", export=True, batch_size=1, sequence_length=512)
tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")


def prompt_ids(messages, **options):
    return tokenizer.apply_chat_template(messages, **options)
""",
            after="""\
from transformers import AutoModelForCausalLM, AutoTokenizer
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", device_map="neuron")
model.generation_config.cache_implementation = "static"
model.generation_config.max_cache_len = 512
tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")


def prompt_ids(messages, **options):
    # TODO(neuron-migrate): NM118 Transformers 5's apply_chat_template returns a BatchEncoding unless return_dict=False, and the unpacked arguments may set it; pass return_dict=False where the code uses the result as token ids
    return tokenizer.apply_chat_template(messages, **options)
""",
        ),
    ),
)
RULES = (CHAT_TEMPLATE_IDS,)
HANDLER = None  # decided in `nm110_inputs_to_device.py`
