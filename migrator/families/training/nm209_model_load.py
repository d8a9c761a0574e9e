"""NM209 / NM210: a training model load (`optimum.neuron.models.training`) becomes the Transformers class,
its `trn_config` becoming `distributed_config=`; flash_attention_2 becomes sdpa. Other model loads of the
scope get the `DistributedConfig` of the arguments' sharding."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import is_method_call, keyword_arg, source_code, without_args
from migrator.families.training.nm202_arguments import ARGUMENT_RENAMED
from migrator.families.training.state import DISTRIBUTED_CONFIG_BY_HAND, TrainingFile, trn_config_arg
from migrator.families.training.targets import (
    HINTS,
    MODEL_LOAD_KEYWORDS,
    TRAINING_MODELS,
    TRIGGERS,
    WORLD_SIZE,
    Target,
)
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

TRAINING_MODEL = Rule(
    "NM209",
    Severity.INFO,
    "`optimum.neuron.models.training` model load `from_pretrained(model_id, trn_config, ...)`",
    "Rewritten to the Transformers class (`AutoModelForCausalLM`, `LlamaForCausalLM`, ...) without "
    "`trn_config`; the sharding moves to `distributed_config=` (NM204).",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments
from optimum.neuron.models.training import NeuronModelForCausalLM

args = NeuronTrainingArguments(output_dir="out", tensor_parallel_size=2)
model = NeuronModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", args.trn_config)
""",
            after="""\
import os
from transformers import AutoModelForCausalLM, DistributedConfig, TrainingArguments

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

args = TrainingArguments(output_dir="out", torch_compile=True, save_only_model=True)
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", distributed_config=DistributedConfig(tp_size=2, dp_replicate_size=int(os.environ.get("WORLD_SIZE", "1")) // 2))
""",
        ),
    ),
)
FLASH_ATTENTION = Rule(
    "NM210",
    Severity.WARNING,
    '`attn_implementation="flash_attention_2"` on a training model load',
    'Rewritten to `"sdpa"`: optimum-neuron mapped flash_attention_2 to its own NKI kernel, while Transformers\' '
    "flash_attention_2 needs the CUDA flash_attn package.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronTrainingArguments
from optimum.neuron.models.training import NeuronModelForCausalLM

args = NeuronTrainingArguments(output_dir="out")
model = NeuronModelForCausalLM.from_pretrained(
    "Qwen/Qwen3-0.6B", args.trn_config, attn_implementation="flash_attention_2"
)
""",
            after="""\
import os
from transformers import AutoModelForCausalLM, TrainingArguments

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

args = TrainingArguments(output_dir="out", torch_compile=True)
model = AutoModelForCausalLM.from_pretrained(
    "Qwen/Qwen3-0.6B", attn_implementation="sdpa"
)
""",
        ),
    ),
)
RULES = (TRAINING_MODEL, FLASH_ATTENTION)
_FLASH_ATTENTION_2 = m.SimpleString('"flash_attention_2"') | m.SimpleString("'flash_attention_2'")


class ModelLoads(Handler):
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not isinstance(updated, cst.Call) or len(original.args) != len(updated.args):
            return updated  # replaced or restructured by an earlier rule: not ours to pair up
        if not is_method_call(original, "from_pretrained"):
            return updated
        owner = self.ctx.qualified(original.func.value)
        if owner in TRAINING_MODELS:
            return self._training_load(original, updated, TRAINING_MODELS[owner])
        scope = self.file.scope
        if original in scope.load_targets:
            updated = self.file.add_distributed_config(original, updated)
        scope.loads_left[original] = updated
        return updated

    def _training_load(self, original: cst.Call, updated: cst.Call, target: Target) -> cst.Call:
        file, scope = self.file, self.file.scope
        index, trn_config = trn_config_arg(original)
        as_config = trn_config in file.inline_configs or (
            isinstance(trn_config, cst.Name) and trn_config.value in scope.distributed_config_names
        )
        carried = trn_config is not None and (
            as_config
            or (isinstance(trn_config, cst.Name) and trn_config.value in scope.trn_config_names)
            or m.matches(
                trn_config,
                m.Attribute(value=m.Name(scope.args_variable or ""), attr=m.Name("trn_config")),
            )
        )
        needs_target = scope.parallelism is not None and scope.parallelism.sharded
        if trn_config is not None and (
            not carried or needs_target and (as_config or original not in scope.load_targets)
        ):
            file.kept.add(self.ctx.qualified(original.func.value))
            self.ctx.todo(
                original,
                DISTRIBUTED_CONFIG_BY_HAND,
                f"`{source_code(trn_config)}` does not come from training arguments migrated in this scope (parsed "
                "command-line flags, or arguments left with a TODO) and TrainingArguments has no "
                "tensor_parallel_size/zero_1",
                "add a `tensor_parallel_size: int` field to your script's argument dataclass, load with "
                f'transformers.{target.name}.from_pretrained(model_id, dtype=..., attn_implementation="sdpa", '
                f"distributed_config=DistributedConfig(tp_size=tp, fsdp_size={WORLD_SIZE} // tp)) and set "
                "save_only_model=True in the training arguments",
            )
            return updated
        self.ctx.report(original, TRAINING_MODEL, f"-> `transformers.{target.name}.from_pretrained`.")
        file.rewritten_loads.add(self.ctx.qualified(original.func.value))
        args = list(updated.args)
        removed = set() if index is None else {args[index]}
        for position, (before, arg) in enumerate(zip(original.args, updated.args, strict=True)):
            keyword = before.keyword.value if before.keyword else None
            if keyword in MODEL_LOAD_KEYWORDS:
                message = f"`{keyword}=` -> `{MODEL_LOAD_KEYWORDS[keyword]}=`."
                self.ctx.report(before, ARGUMENT_RENAMED, message, subject=keyword)
                args[position] = arg.with_changes(keyword=cst.Name(MODEL_LOAD_KEYWORDS[keyword]))
            elif keyword == "attn_implementation" and m.matches(before.value, _FLASH_ATTENTION_2):
                self.ctx.report(before.value, FLASH_ATTENTION)
                args[position] = arg.with_changes(value=cst.SimpleString('"sdpa"'))
        self.ctx.add_import(target.module, target.name)
        func = updated.func.with_changes(value=cst.Name(target.name))
        if as_config:  # the variable or inline call now holds a DistributedConfig
            args[index] = keyword_arg("distributed_config", args[index].value).with_changes(
                comma=args[index].comma, whitespace_after_arg=args[index].whitespace_after_arg
            )
            removed = set()
        updated = updated.with_changes(func=func, args=without_args(args, removed))
        return file.add_distributed_config(original, updated)


HANDLER = ModelLoads
