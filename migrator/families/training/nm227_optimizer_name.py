"""NM227, decided by the walk of `nm202_arguments.py` (a training-arguments call) and by NM461's (a launcher's
`--optim`): an `optim` value Transformers removed (`training_args.REMOVED_OPTIMIZERS`)."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

OPTIMIZER_NAME = Rule(
    "NM227",
    Severity.INFO,
    'An `optim` value Transformers 5 no longer has (`optim="adamw_hf"`, `--optim adamw_apex_fused`): '
    "TrainingArguments raises ValueError on it",
    '`"adamw_hf"` (Transformers\' own AdamW) -> `"adamw_torch"` (torch.optim.AdamW, which replaced it in '
    'Transformers 4.50), `"adamw_apex_fused"` (Apex\'s FusedAdam) -> `"adamw_torch_fused"`, in a training-arguments '
    "call and on a launcher line whose script passes the flag to TrainingArguments.",
    examples=(
        Example(
            before="""\
from transformers import TrainingArguments

args = TrainingArguments(output_dir="out", optim="adamw_hf")
""",
            after="""\
from transformers import TrainingArguments

args = TrainingArguments(output_dir="out", optim="adamw_torch")
""",
        ),
    ),
)
RULES = (OPTIMIZER_NAME,)
HANDLER = None  # decided in `nm202_arguments.py` and `migrator/shell/nm461_flags.py`
