"""NM203, decided by the walk of `nm202_arguments.py`: one table (`training_args.py`) decides each keyword of
a training-arguments call: renamed, dropped, moved or left."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

ARGUMENT_DROPPED = Rule(
    "NM203",
    Severity.WARNING,
    "A training argument with no equivalent in Transformers 5 / TRL 1.16 (Neuron runtime, ZeRO-1 optimizer "
    "and metrics options, `overwrite_output_dir`, ...)",
    "Removed; the finding says what changes. Remove the matching `--flag` from launch scripts too, otherwise "
    "`HfArgumentParser` rejects it.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments

args = NeuronTrainingArguments(output_dir="out", overwrite_output_dir=True, bf16=True)
""",
            after="""\
from transformers import TrainingArguments

args = TrainingArguments(output_dir="out", bf16=True, torch_compile=True)
""",
        ),
    ),
)
RULES = (ARGUMENT_DROPPED,)
HANDLER = None  # decided in `nm202_arguments.py`
