"""NM204, decided by the walk of `nm202_arguments.py`: one table (`training_args.py`) decides each keyword of
a training-arguments call: renamed, dropped, moved or left."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

MOVED_TO_DISTRIBUTED_CONFIG = Rule(
    "NM204",
    Severity.WARNING,
    "`tensor_parallel_size` / `zero_1` in the training arguments (or `lazy_load_for_parallelism`)",
    "Moved to `from_pretrained(..., distributed_config=DistributedConfig(tp_size=TP, fsdp_size=WORLD_SIZE // "
    "TP))` of the model loaded in the same scope (`dp_replicate_size` instead of `fsdp_size` without ZeRO-1). "
    "ZeRO-1 becomes FSDP2, which also shards parameters and gradients. A `zero_1` known at run time only "
    "(`zero_1=args.zero_1`) chooses between the two on the same value at the load (no DistributedConfig where it "
    "is off and the degree is 1), and `save_only_model` takes the same condition; a value read before a load "
    "that comes first is moved when nothing between them can change it (names bound before the load only). "
    "Launch with torchrun.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments
from transformers import AutoModelForCausalLM

args = NeuronTrainingArguments(output_dir="out", tensor_parallel_size=8, zero_1=True)
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
""",
            after="""\
from transformers import DistributedConfig, TrainingArguments, AutoModelForCausalLM
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

args = TrainingArguments(output_dir="out", torch_compile=True, save_only_model=True)
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", distributed_config=DistributedConfig(tp_size=8, fsdp_size=int(os.environ.get("WORLD_SIZE", "1")) // 8))
""",
        ),
    ),
)
RULES = (MOVED_TO_DISTRIBUTED_CONFIG,)
HANDLER = None  # decided in `nm202_arguments.py`
