"""NM102, decided by the load rewrites that carry a `sequence_length`: `nm101_causal_lm.py` (one rewrite of
each `NeuronModelForCausalLM` export/load decides every argument it carries) and `nm114_pipeline.py` (a
text-generation pipeline)."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

SEQUENCE_LENGTH = Rule(
    "NM102",
    Severity.WARNING,
    "`sequence_length` of a compiled decoder",
    "Moved to `model.generation_config.max_cache_len` (static cache size). optimum-neuron silently capped "
    "generation at this length, Transformers does not: keep prompt length + max_new_tokens within it.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM

model = NeuronModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", export=True, sequence_length=2048)
""",
            after="""\
import os
from transformers import AutoModelForCausalLM

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", device_map="neuron")
model.generation_config.cache_implementation = "static"
model.generation_config.max_cache_len = 2048
""",
        ),
    ),
)
RULES = (SEQUENCE_LENGTH,)
HANDLER = None  # decided in `nm101_causal_lm.py`
