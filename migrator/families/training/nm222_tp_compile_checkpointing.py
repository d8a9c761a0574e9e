"""NM222: a migrated TRL config that trains a tensor-parallel model compiled keeps TRL's activation checkpointing
on by default (a launcher's `--gradient_checkpointing true` turns it on: `migrator/shell/nm461_flags.py`; a parsed flag is
turned off at run time after the load NM209 shards by the parsed degree), and that combination fails in PyTorch itself (AOT autograd saves the DeviceMesh of Transformers'
TP layers for backward: `AssertionError: expected all tensors_saved_with_vc_check to be Tensors`), on plain CPU
with gloo as on the device (`benchmarks/tp_compile_cpu.py`). Checkpointing off is the smallest change that
trains, with the loss of one process (measured: docs/reference/tensor-parallel.md); the memory it costs is the finding."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import find_keyword, is_literal, keyword_arg, with_appended
from migrator.families.training.state import TrainingFile
from migrator.families.training.targets import HINTS, TRIGGERS
from migrator.families.training.tp_compile import MEMORY, WHY
from migrator.families.training_args import SFT_CONFIG_ARGUMENTS
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

TP_COMPILE_CHECKPOINTING = Rule(
    "NM222",
    Severity.WARNING,
    "Activation checkpointing of a tensor-parallel model, compiled: TRL's default in a migrated `SFTConfig`, or "
    "`--gradient_checkpointing true` on the launch of such a script",
    f"`gradient_checkpointing=False` added (a launcher's `--gradient_checkpointing true` becomes `false` when the "
    f"script it runs, as migrated, compiles and loads the model with `DistributedConfig` and the launch passes a "
    f"`--tensor_parallel_size` other than 1; where the degree is parsed from flags the migration may not see, a "
    f"Metaflow flow's or SageMaker's, `if <degree> > 1 and args.torch_compile: args.activation_checkpointing = "
    f"args.gradient_checkpointing = False` after the model load, NM209: once the arguments are built, Trainer reads "
    f"the new name only): {WHY}. Without checkpointing it trains with the loss of one "
    f"process (benchmarks/tp_compile_cpu.py, TP 2 on gloo, bf16: 4 steps within 5e-4 of one process). The memory cost: {MEMORY}. A config that turns checkpointing on itself gets a TODO instead: "
    "choose checkpointing (train eagerly, torch_compile=False) or compilation (checkpointing off).",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronSFTConfig
from transformers import AutoModelForCausalLM

config = NeuronSFTConfig(output_dir="out", tensor_parallel_size=2)
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B")
""",
            after="""\
from transformers import DistributedConfig, AutoModelForCausalLM
import os
from trl import SFTConfig

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

config = SFTConfig(output_dir="out", torch_compile=True, save_only_model=True, gradient_checkpointing=False)
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", distributed_config=DistributedConfig(tp_size=2, fsdp_size=int(os.environ.get("WORLD_SIZE", "1")) // 2))
""",
        ),
    ),
)
RULES = (TP_COMPILE_CHECKPOINTING,)


class TpCompileCheckpointing(Handler):
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        call = self.file.arguments_calls.get(original)
        if call is None or not call.tensor_parallel or not isinstance(updated, cst.Call):
            return updated
        compiled = find_keyword(original, "torch_compile")
        if (compiled is not None and not is_literal(compiled.value, "True")) or (
            compiled is None and not call.migrated
        ):
            return updated
        checkpointing = find_keyword(original, "gradient_checkpointing")
        if checkpointing is not None:
            if not is_literal(checkpointing.value, "False"):
                self.ctx.todo(
                    checkpointing,
                    TP_COMPILE_CHECKPOINTING,
                    WHY,
                    "choose: checkpointing with torch_compile=False, or compilation with "
                    f"gradient_checkpointing=False ({MEMORY})",
                )
            return updated
        if call.table is not SFT_CONFIG_ARGUMENTS or call.has_star:
            return updated  # Transformers' TrainingArguments checkpoints only when asked
        self.ctx.report(original, TP_COMPILE_CHECKPOINTING)
        return updated.with_changes(
            args=with_appended(list(updated.args), [keyword_arg("gradient_checkpointing", cst.Name("False"))])
        )


HANDLER = TpCompileCheckpointing
