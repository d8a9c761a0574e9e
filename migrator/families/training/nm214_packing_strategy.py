"""NM214, decided by the walk of `nm206_added_arguments.py`: what the migrated arguments need added is decided
on each arguments call `nm202_arguments.py` rewrote, all keywords together."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

PACKING_STRATEGY = Rule(
    "NM214",
    Severity.WARNING,
    "`NeuronSFTConfig(packing=...)` without `packing_strategy`",
    '`packing_strategy="wrapped"` added: TRL\'s default "bfd" packing turns on padding-free batches '
    "(one flattened row, variable length), which optimum-neuron always disabled and Neuron compiles per shape. "
    'Where the call unpacks a mapping that may set it (`**args`), it becomes `**{"packing_strategy": "wrapped", '
    "**args}`: the mapping's own value still wins, and the keyword is never given twice.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronSFTConfig

config = NeuronSFTConfig(output_dir="out", packing=True)
""",
            after="""\
from trl import SFTConfig

config = SFTConfig(output_dir="out", packing=True, torch_compile=True, packing_strategy="wrapped")
""",
        ),
        Example(
            before="""\
from optimum.neuron import NeuronSFTConfig


def configure(args):
    return NeuronSFTConfig(max_length=4096, packing=True, **args)
""",
            after="""\
from trl import SFTConfig


def configure(args):
    return SFTConfig(max_length=4096, packing=True, **{"packing_strategy": "wrapped", **args})
""",
        ),
    ),
)
RULES = (PACKING_STRATEGY,)
HANDLER = None  # decided in `nm206_added_arguments.py`
