"""NM220: `use_cpu=True` / `no_cuda=True` in training arguments. Under PyTorch/XLA they never moved training
to the CPU: Accelerate picks the XLA device whenever torch_xla is importable, whatever `cpu=` says (and
optimum-neuron's arguments classes force it). On TorchNeuron they make the Trainer train on the CPU. In
XLA-era code they go; elsewhere (no sign of torch_xla / optimum-neuron in the file) they stay, with a TODO.
The Python side of the shell rule NM467."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import is_literal, source_code, tidy_args, without_args
from migrator.families.training.targets import HINTS, RENAMES, TARGET_CALLS, TRIGGERS
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

CPU_ARGUMENT = Rule(
    "NM220",
    Severity.WARNING,
    "`use_cpu=True` / `no_cuda=True` in `TrainingArguments` / `SFTConfig` (or their optimum-neuron classes)",
    "Removed in XLA-era code, where it never moved training to the CPU (Accelerate takes the XLA device "
    "whenever torch_xla is importable; optimum-neuron's classes force it): on TorchNeuron it would train on the "
    "CPU. In a file with no sign of torch_xla or optimum-neuron it stays, with a TODO.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments

args = NeuronTrainingArguments(output_dir="out", use_cpu=True, bf16=True)
""",
            after="""\
from transformers import TrainingArguments

args = TrainingArguments(output_dir="out", bf16=True, torch_compile=True)
""",
        ),
    ),
)
RULES = (CPU_ARGUMENT,)
CPU_KEYWORDS = frozenset({"use_cpu", "no_cuda"})
# Imports that make a file XLA-era code (its training ran on the XLA device).
XLA_ERA_MODULES = ("torch_xla", "optimum.neuron", "neuronx_distributed", "torch_neuronx")


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
        cpu = [arg for arg in original.args if selects_cpu(arg)]
        if not cpu:
            return updated
        # A value the script decides (`use_cpu=args.eval_on_cpu`) is the author's switch: it stays, with a TODO.
        xla_era = self._xla_era()
        if not xla_era or not all(is_literal(arg.value, "True") or is_literal(arg.value, "1") for arg in cpu):
            for arg in cpu:
                # Named as Transformers 5 spells it (NM202 renames no_cuda), so a rerun finds the same TODO.
                self.ctx.todo(
                    arg,
                    CPU_ARGUMENT,
                    f"`use_cpu={source_code(arg.value)}` makes the Trainer run on the CPU instead of the neuron "
                    "device on TorchNeuron (with torch_xla importable, it never did)",
                    "remove it unless this run is meant for the CPU",
                    subject="use_cpu",
                )
            return updated
        for arg in cpu:
            self.ctx.report(
                arg,
                CPU_ARGUMENT,
                f"`{arg.keyword.value}={source_code(arg.value)}` removed: under XLA the run was on the XLA device "
                "whatever it said, and on TorchNeuron it would train on the CPU.",
                subject=arg.keyword.value,
            )
        # NM202 renamed `no_cuda` first: that rename is of an argument that goes.
        self.ctx.reports = [r for r in self.ctx.reports if not (r.node in cpu and r.rule.code == "NM202")]
        removed = {
            arg for arg in updated.args if arg.keyword is not None and arg.keyword.value in CPU_KEYWORDS
        }
        return updated.with_changes(args=tidy_args(without_args(list(updated.args), removed)))

    def _xla_era(self) -> bool:
        """The file imports torch_xla / optimum-neuron / NxD, or sets a torch_xla variable (`XLA_USE_BF16`)."""
        imported = [*self.ctx.imported.values(), *self.ctx.module_imports.values()]
        return any(
            name == module or name.startswith(module + ".") for name in imported for module in XLA_ERA_MODULES
        ) or any(text.startswith(("XLA_", "PT_XLA_")) for text in self.ctx.source.strings)


HANDLER = CpuArgument
