"""NM225, decided by the walk of `nm202_arguments.py`: one table (`training_args.py`) decides each keyword of
a training-arguments call: renamed, dropped, moved or left."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

INACTIVE_CHECKED = Rule(
    "NM225",
    Severity.WARNING,
    "A pipeline degree parsed from the command line (`pipeline_parallel_size=args.pp_size`)",
    "The keyword is removed and a check goes before the call: at 1 (no pipeline stages, what launchers pass) the "
    "run is the same; any other value stops the run with the decision it needs (pipeline parallelism of HF models "
    "has no documented TorchNeuron equivalent).",
    examples=(
        Example(
            before="""\
import argparse

from optimum.neuron import NeuronTrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--pp_size", type=int, default=1)
args = parser.parse_args()
training_args = NeuronTrainingArguments(output_dir="out", pipeline_parallel_size=args.pp_size)
""",
            after="""\
import argparse

from transformers import TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--pp_size", type=int, default=1)
args = parser.parse_args()
if args.pp_size != 1:
    raise ValueError(f"pipeline_parallel_size={args.pp_size}: pipeline parallelism of HF models is not documented on TorchNeuron and DistributedConfig(pp_size=...) cannot be combined with FSDP; remove the pipeline stages and shard with DistributedConfig(tp_size=..., fsdp_size=...) instead")
training_args = TrainingArguments(output_dir="out", torch_compile=True)
""",
        ),
    ),
)
RULES = (INACTIVE_CHECKED,)
HANDLER = None  # decided in `nm202_arguments.py`
