"""NM216, decided by the walk of `nm202_arguments.py`: one table (`training_args.py`) decides each keyword of
a training-arguments call: renamed, dropped, moved or left."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

LOGGING_DIR = Rule(
    "NM216",
    Severity.INFO,
    "`logging_dir=` in the training arguments (rejected by Transformers 5)",
    'Moved to `os.environ["TENSORBOARD_LOGGING_DIR"]`, set just before the arguments are built; Transformers '
    "5's TensorBoard callback reads its directory from there.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments

args = NeuronTrainingArguments(output_dir="out", logging_dir="out/logs")
""",
            after="""\
import os
from transformers import TrainingArguments

os.environ["TENSORBOARD_LOGGING_DIR"] = "out/logs"
args = TrainingArguments(output_dir="out", torch_compile=True)
""",
        ),
    ),
)
RULES = (LOGGING_DIR,)
HANDLER = None  # decided in `nm202_arguments.py`
