"""NM211: `with lazy_load_for_parallelism(...)` around a model load is unwrapped; its tensor-parallel size
goes to the load's `DistributedConfig`. A size read from NeuronTrainingArguments parsed from the command line
(`tensor_parallel_size=training_args.tensor_parallel_size`, HfArgumentParser or TrlParser) is NM209's: the flag
moves to the script's own dataclass and the load gets the parsed degree's DistributedConfig."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import descendants, find_keyword, is_literal, source_code
from migrator.families.training.state import (
    Parallelism,
    TrainingFile,
    reads_moved_field,
    zero_1_setting,
)
from migrator.families.training.targets import HINTS, LAZY_LOAD_FUNCTIONS, NEURON_ARGUMENTS, TRIGGERS
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

LAZY_LOAD = Rule(
    "NM211",
    Severity.INFO,
    "`with lazy_load_for_parallelism(...)` around a model load",
    "The `with` is removed and its body kept: Transformers loads each shard directly when the load gets "
    "`distributed_config=` (NM204). Degrees parsed from the command line (HfArgumentParser / TrlParser) that "
    "TorchNeuron cannot honour are checked where they are known, at run time: a `pipeline_parallel_size` "
    "passed to it becomes a field of the script's own dataclass, and the unwrapped block first raises, with the "
    "owner's choice (NM225's), where it is not 1; a model built by `from_config` (which no DistributedConfig shards) "
    "raises the same where the tensor parallel degree is above 1. A literal pipeline degree above 1 keeps a "
    "TODO (NM208).",
    examples=(
        Example(
            before="""\
from optimum.neuron.distributed import lazy_load_for_parallelism
from transformers import AutoModelForCausalLM

with lazy_load_for_parallelism(tensor_parallel_size=2):
    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B")
""",
            after="""\
from transformers import DistributedConfig, AutoModelForCausalLM
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", distributed_config=DistributedConfig(tp_size=2, dp_replicate_size=int(os.environ.get("WORLD_SIZE", "1")) // 2))
""",
        ),
    ),
)
RULES = (LAZY_LOAD,)


class LazyLoad(Handler):
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)
        self.kept: dict[cst.With, str] = {}  # with statement -> why it stays
        self.unwrap: set[cst.With] = set()

    def visit_With(self, node: cst.With) -> None:
        if (
            len(node.items) != 1
            or not isinstance(node.items[0].item, cst.Call)
            or not isinstance(node.body, cst.IndentedBlock)
        ):
            return
        call = node.items[0].item
        if self.ctx.qualified(call.func) not in LAZY_LOAD_FUNCTIONS:
            return
        tp = find_keyword(call, "tensor_parallel_size") or next(
            (arg for arg in call.args[:1] if arg.keyword is None and not arg.star), None
        )
        pp = find_keyword(call, "pipeline_parallel_size")
        loads = self.file.model_loads(node.body)
        # `tensor_parallel_size=training_args.tensor_parallel_size` of parsed arguments: NM209 moves the flag
        # to the script's dataclass and gives the load its DistributedConfig.
        parsed = len(loads) == 1 and loads[0] in self.file.parsed_loads
        guard = self.file.lazy_load_guards.get(node)
        reason = None
        if guard is not None:  # parsed degrees only known at run time: checked there
            self.unwrap.add(node)
            self.ctx.report(
                call,
                LAZY_LOAD,
                f"{LAZY_LOAD.action} A run where `{guard[0]}` stops before the load with the reason (only the "
                "owner can choose another layout).",
            )
            return
        if pp is not None and not is_literal(pp.value, "1"):
            reason = "pipeline parallelism has no documented TorchNeuron equivalent for HF models"
        elif len(loads) != 1:
            reason = "the block does not hold exactly one model from_pretrained call"
        elif tp is not None and not parsed and reads_moved_field(tp.value):
            reason = f"`{source_code(tp.value)}` is no longer a TrainingArguments field"
        if reason:
            self.kept[node] = reason
            self.file.kept.add(self.ctx.qualified(call.func))
            return
        self.unwrap.add(node)
        if parsed:
            self.ctx.report(call, LAZY_LOAD)
            return
        scope = self.file.scope
        parallelism = scope.parallelism or Parallelism()
        if tp is not None:
            parallelism.tp = tp.value
        if parallelism.zero_1 is None:
            parallelism.zero_1 = self._zero_1(scope.node)
        scope.parallelism = parallelism
        scope.load_targets.add(loads[0])
        message = LAZY_LOAD.action
        if parallelism.sharded and parallelism.zero_1 is None:
            message += (
                " No ZeRO-1 setting is visible here, so the data-parallel ranks replicate the model "
                "(dp_replicate_size); if you trained with --zero_1, use fsdp_size instead."
            )
        self.ctx.report(call, LAZY_LOAD, message)

    def _zero_1(self, scope: cst.CSTNode) -> bool | None:
        """ZeRO-1 as the scope's one optimum-neuron arguments call sets it: its literal `zero_1`, or on when it
        gives none (the default of NeuronTrainingArguments and its subclasses in optimum-neuron 0.4.5); None
        where no single call says it."""
        calls = [
            call for call in descendants(scope, cst.Call) if self.ctx.qualified(call.func) in NEURON_ARGUMENTS
        ]
        if len(calls) != 1 or any(arg.star for arg in calls[0].args):
            return None
        given = find_keyword(calls[0], "zero_1")
        setting = zero_1_setting(given.value if given else None)
        return setting if isinstance(setting, bool) else None

    def leave_With(self, original: cst.With, updated: cst.With):
        reason = self.kept.get(original)
        if reason:  # reported here so that the TODO goes above the `with`, not inside it
            self.ctx.todo(
                original.items[0].item,
                "NM208",
                f"lazy_load_for_parallelism: {reason}",
                "remove the with block and pass distributed_config=DistributedConfig(tp_size=..., "
                "fsdp_size=WORLD_SIZE // tp_size) to the model's from_pretrained",
            )
        if original not in self.unwrap or not isinstance(updated, cst.With):
            return updated
        body = list(updated.body.body)
        guard = self.file.lazy_load_guards.get(original)
        if guard is not None:
            condition, message = guard
            body.insert(0, cst.parse_statement(f"if {condition}:\n    raise ValueError({message!r})\n"))
        if original.leading_lines:
            body[0] = body[0].with_changes(leading_lines=[*original.leading_lines, *body[0].leading_lines])
        return cst.FlattenSentinel(body)


HANDLER = LazyLoad
