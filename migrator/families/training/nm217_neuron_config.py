"""NM217: `TrainingNeuronConfig(...)` given to a training model's `from_pretrained` becomes the
`DistributedConfig(...)` that load takes as `distributed_config=`."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import is_literal, source_code
from migrator.families.training.state import (
    Parallelism,
    TrainingFile,
    trn_config_arg,
)
from migrator.families.training.targets import HINTS, TRAINING_NEURON_CONFIGS, TRIGGERS, WORLD_SIZE
from migrator.families.training_args import TRAINING_NEURON_CONFIG_FIELDS
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

NEURON_CONFIG = Rule(
    "NM217",
    Severity.WARNING,
    "`TrainingNeuronConfig(...)` given to a training model's `from_pretrained`",
    "Rewritten to `DistributedConfig(tp_size=..., fsdp_size=...)` passed as `distributed_config=` (ZeRO-1 becomes "
    "FSDP2; without it the data-parallel ranks replicate the model). NxD-only fields are dropped; pipeline "
    "parallelism, gradient_checkpointing and checkpoint_dir are left with a TODO.",
    examples=(
        Example(
            before="""\
from optimum.neuron.models.training import NeuronModelForCausalLM, TrainingNeuronConfig

trn_config = TrainingNeuronConfig(tensor_parallel_size=2)
model = NeuronModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", trn_config)
""",
            after="""\
import os
from transformers import AutoModelForCausalLM, DistributedConfig

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

trn_config = DistributedConfig(tp_size=2, dp_replicate_size=int(os.environ.get("WORLD_SIZE", "1")) // 2)
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", distributed_config=trn_config)
""",
        ),
    ),
)
RULES = (NEURON_CONFIG,)


class TrainingNeuronConfig(Handler):
    CALLS = TRAINING_NEURON_CONFIGS
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not isinstance(updated, cst.Call) or len(original.args) != len(updated.args):
            return updated  # replaced or restructured by an earlier rule
        if self.ctx.qualified(original.func) not in TRAINING_NEURON_CONFIGS:
            return updated
        return self._rewrite(original, updated)

    def _rewrite(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """`TrainingNeuronConfig(...)` -> `DistributedConfig(...)`, when every use of it is the trn_config of
        a training model load in this scope (the loads then take it as `distributed_config=`)."""
        file, scope = self.file, self.file.scope
        variable = file.assigned.get(original)
        inline = any(trn_config_arg(load)[1] is original for load in file.training_loads(scope.node))
        fields: dict[str, cst.BaseExpression] = {}
        manual = []
        for position, arg in enumerate(original.args):
            name = arg.keyword.value if arg.keyword else ("tensor_parallel_size" if position == 0 else None)
            action = TRAINING_NEURON_CONFIG_FIELDS.get(name) if name and not arg.star else None
            if action is None:
                manual.append(f"argument `{source_code(arg)}` is not a known TrainingNeuronConfig field")
            elif action.kind == "manual" and not action.removes(source_code(arg.value)):
                manual.append(f"`{name}`: {action.note}")
            fields[name] = arg.value
        zero_1 = fields.get("pipeline_parallel_use_zero1_optimizer")
        if zero_1 is not None and not (is_literal(zero_1, "True") or is_literal(zero_1, "False")):
            manual.append("`pipeline_parallel_use_zero1_optimizer` is only known at run time")
        if not manual and not inline and not (variable and file.only_trn_config_uses(variable, scope)):
            manual.append("it is not only passed to a training model's from_pretrained in this scope")
        if manual:
            file.kept.add(self.ctx.qualified(original.func))
            self.ctx.todo(
                original,
                "NM208",
                f"TrainingNeuronConfig configures NxD ({'; '.join(manual)})",
                f"build DistributedConfig(tp_size=tensor_parallel_size, fsdp_size={WORLD_SIZE} // "
                "tensor_parallel_size) instead and pass it as distributed_config= to the Transformers model's "
                "from_pretrained",
            )
            return updated
        parallelism = Parallelism(
            tp=fields.get("tensor_parallel_size"),
            zero_1=None if zero_1 is None else is_literal(zero_1, "True"),
        )
        self.ctx.report(original, NEURON_CONFIG)
        self.ctx.add_import("os")
        self.ctx.add_import("transformers", "DistributedConfig")
        if inline:
            file.inline_configs.add(original)
        else:
            scope.distributed_config_names.add(variable)
        scope.sharded_at_load = scope.sharded_at_load or parallelism.sharded
        return cst.parse_expression(parallelism.config())


HANDLER = TrainingNeuronConfig
