"""NM220: `use_cpu=True` / `no_cuda=True` in training arguments: under XLA they kept the run off CUDA, on
TorchNeuron they make the Trainer train on the CPU. The Python side of the shell rule NM467."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import is_literal, source_code
from migrator.families.training.targets import HINTS, RENAMES, TARGET_CALLS, TRIGGERS
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

CPU_ARGUMENT = Rule(
    "NM220",
    Severity.ERROR,
    "`use_cpu=True` / `no_cuda=True` in `TrainingArguments` / `SFTConfig` (or their optimum-neuron classes)",
    "Left in place (`no_cuda` renamed to `use_cpu`, NM202) with a TODO: under XLA it kept the run off CUDA; on "
    "TorchNeuron it trains on the CPU. Remove it.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments

args = NeuronTrainingArguments(output_dir="out", use_cpu=True, bf16=True)
""",
            after="""\
from transformers import TrainingArguments

# TODO(neuron-migrate): NM220 `use_cpu=True` made sense under XLA (the XLA device is not CUDA), but on TorchNeuron it makes the Trainer run on the CPU instead of the neuron device; remove it
args = TrainingArguments(output_dir="out", use_cpu=True, bf16=True, torch_compile=True)
""",
        ),
    ),
)
RULES = (CPU_ARGUMENT,)
CPU_KEYWORDS = frozenset({"use_cpu", "no_cuda"})


def selects_cpu(arg: cst.Arg) -> bool:
    """`use_cpu=` / `no_cuda=` with a value that may be true (only a literal False/0 is known not to be)."""
    return (
        arg.keyword is not None
        and arg.keyword.value in CPU_KEYWORDS
        and not (is_literal(arg.value, "False") or is_literal(arg.value, "0"))
    )


class CpuArgument(Handler):
    CALLS = frozenset(name for name, target in {**RENAMES, **TARGET_CALLS}.items() if target.arguments)
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        for arg in original.args:
            if selects_cpu(arg):
                # Named as Transformers 5 spells it (NM202 renames no_cuda), so a rerun finds the same TODO.
                self.ctx.todo(
                    arg,
                    CPU_ARGUMENT,
                    f"`use_cpu={source_code(arg.value)}` made sense under XLA (the XLA device is not CUDA), but on "
                    "TorchNeuron it makes the Trainer run on the CPU instead of the neuron device",
                    "remove it",
                    subject="use_cpu",
                )
        return updated


HANDLER = CpuArgument
