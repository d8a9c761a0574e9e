"""NM207, decided by the walk of `nm206_added_arguments.py` (what the migrated arguments need added, on each
arguments call `nm202_arguments.py` rewrote, all keywords together) and by `nm209_model_load.py` after a load
sharded by parsed arguments (`save_only_model` set when the parsed degree shards it)."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

SAVE_ONLY_MODEL = Rule(
    "NM207",
    Severity.WARNING,
    "Training arguments of a model sharded with `DistributedConfig`",
    "`save_only_model=True` added: Trainer cannot save or resume optimizer state of a model sharded at load. "
    "Checkpoints hold the model only, so `resume_from_checkpoint` restarts the optimizer. Where the call unpacks "
    'a mapping that may set it (`**extra`), it becomes `**{**extra, "save_only_model": True}` (given once, and '
    "True whatever the mapping holds).",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments
from transformers import AutoModelForCausalLM

args = NeuronTrainingArguments(output_dir="out", tensor_parallel_size=2)
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B")
""",
            after="""\
from transformers import DistributedConfig, TrainingArguments, AutoModelForCausalLM
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

args = TrainingArguments(output_dir="out", torch_compile=True, save_only_model=True)
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", distributed_config=DistributedConfig(tp_size=2, fsdp_size=int(os.environ.get("WORLD_SIZE", "1")) // 2))
""",
        ),
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments
from transformers import AutoModelForCausalLM


def build(extra):
    args = NeuronTrainingArguments(output_dir="out", tensor_parallel_size=2, **extra)
    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B")
    return args, model
""",
            after="""\
from transformers import DistributedConfig, TrainingArguments, AutoModelForCausalLM
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")


def build(extra):
    args = TrainingArguments(output_dir="out", **{**extra, "save_only_model": True})
    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", distributed_config=DistributedConfig(tp_size=2, fsdp_size=int(os.environ.get("WORLD_SIZE", "1")) // 2))
    return args, model
""",
        ),
    ),
)
RULES = (SAVE_ONLY_MODEL,)
HANDLER = None  # decided in `nm206_added_arguments.py`
