"""NM107, decided where a load rewrite converts `auto_cast_type` into `dtype` (`InferenceFile.dtype` in the
family's `state.py`, called by the load rewrites (`nm101_causal_lm.py`, `nm112_traced_model.py`,
`nm113_diffusion.py`, `nm114_pipeline.py`))."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

DTYPE = Rule(
    "NM107",
    Severity.INFO,
    "`auto_cast_type` / `torch_dtype` of a compiled model",
    "Rewritten to the load dtype (`dtype=torch.bfloat16` etc.; `torch_dtype=` for Diffusers).",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM

model = NeuronModelForCausalLM.from_pretrained(
    "Qwen/Qwen3-0.6B", export=True, sequence_length=1024, auto_cast_type="bf16"
)
""",
            after="""\
import os
import torch
from transformers import AutoModelForCausalLM

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForCausalLM.from_pretrained(
    "Qwen/Qwen3-0.6B", dtype=torch.bfloat16, device_map="neuron"
)
model.generation_config.cache_implementation = "static"
model.generation_config.max_cache_len = 1024
""",
        ),
    ),
)
RULES = (DTYPE,)
HANDLER = None  # decided in `loads.py`
