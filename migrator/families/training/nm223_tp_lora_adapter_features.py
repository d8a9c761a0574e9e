"""NM223: after a LoRA trainer (`peft_config=`) or `get_peft_model(...)` in a file whose model load the migrator
gave a tensor-parallel `DistributedConfig`, a loop gives every linear layer with a DTensor weight the
`in_features` / `out_features` of that weight's full shape. PEFT 0.21.2 builds a tensor-parallel adapter's
`nn.Linear` at its shard's size and shards its weight as a DTensor of the full one, but leaves the layer's
`in_features` / `out_features` at the shard's size; Transformers 5.23's row-parallel layer reads `in_features` as
the full input width, so the first forward through a row-parallel adapter (`o_proj`, `down_proj`) fails
(`RuntimeError: shape '[96, 16]' is invalid for input of size 3072` eagerly, `TorchRuntimeError: RuntimeError when
making fake tensor call` compiled), on plain CPU with gloo as on the device (benchmarks/tp_compile_cpu.py)."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import dotted_name, find_keyword
from migrator.families.training.state import TrainingFile
from migrator.families.training.targets import HINTS, TRIGGERS
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

WHY = (
    "PEFT 0.21.2 leaves a tensor-parallel LoRA adapter's in_features / out_features at its shard's size while its "
    "weight is a DTensor of the full size; Transformers 5.23's row-parallel layer reads in_features as the full "
    "width, so the first forward through a row-parallel adapter (o_proj, down_proj) fails"
)
DATA_PARALLEL_WHY = (
    "with PEFT 0.21.2, LoRA under tensor parallelism trains only on as many processes as tp_size: with fsdp_size > 1 "
    "PEFT sizes the adapters by the FSDP x TP shard (the first forward fails), with dp_replicate_size > 1 nothing "
    "averages the tensor-parallel adapters' gradients over the data-parallel processes (the replicas drift apart); "
    "measured in docs/reference/tensor-parallel.md"
)
DATA_PARALLEL_ACTION = (
    "launch as many processes as tp_size (torchrun --nproc_per_node=<tp_size>), or choose another layout: more "
    "processes need a PEFT that sizes and reduces tensor-parallel adapters"
)
TP_LORA_ADAPTER_FEATURES = Rule(
    "NM223",
    Severity.WARNING,
    "LoRA (`peft_config=` to a trainer, or `get_peft_model`) on a model the migration loads tensor-parallel",
    f"A loop after it sets each DTensor-weighted linear layer's `in_features` / `out_features` to its weight's full "
    f"shape: {WHY} (RuntimeError: shape '[...]' is invalid, or TorchRuntimeError: RuntimeError when making fake "
    "tensor call when compiled). Nothing else changes and it costs nothing: with it, TP 2 + LoRA on every "
    "projection trains within 2e-4 of one process (benchmarks/tp_compile_cpu.py, docs/reference/tensor-parallel.md); "
    "a no-op once PEFT sizes them itself. The trainer's statement also gets a TODO: a grid with data parallelism "
    "too (fsdp_size or dp_replicate_size > 1, which the migrated load gives every process beyond tp_size) does not "
    "train with LoRA (same page); the owner chooses the processes.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronSFTConfig, NeuronSFTTrainer
from peft import LoraConfig
from transformers import AutoModelForCausalLM

config = NeuronSFTConfig(output_dir="out", tensor_parallel_size=2)
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B")
trainer = NeuronSFTTrainer(model=model, args=config, peft_config=LoraConfig(target_modules=["o_proj"]))
trainer.train()
""",
            after="""\
from peft import LoraConfig
from transformers import DistributedConfig, AutoModelForCausalLM
import os
import torch
from torch.distributed.tensor import DTensor
from trl import SFTConfig, SFTTrainer

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

config = SFTConfig(output_dir="out", torch_compile=True, save_only_model=True, gradient_checkpointing=False)
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", distributed_config=DistributedConfig(tp_size=2, fsdp_size=int(os.environ.get("WORLD_SIZE", "1")) // 2))
# TODO(neuron-migrate): NM223 with PEFT 0.21.2, LoRA under tensor parallelism trains only on as many processes as tp_size: with fsdp_size > 1 PEFT sizes the adapters by the FSDP x TP shard (the first forward fails), with dp_replicate_size > 1 nothing averages the tensor-parallel adapters' gradients over the data-parallel processes (the replicas drift apart); measured in docs/reference/tensor-parallel.md; launch as many processes as tp_size (torchrun --nproc_per_node=<tp_size>), or choose another layout: more processes need a PEFT that sizes and reduces tensor-parallel adapters
trainer = SFTTrainer(model=model, args=config, peft_config=LoraConfig(target_modules=["o_proj"]))
for module in trainer.model.modules():
    if isinstance(module, torch.nn.Linear) and isinstance(module.weight, DTensor):
        module.out_features, module.in_features = module.weight.shape
trainer.train()
""",
        ),
    ),
)
RULES = (TP_LORA_ADAPTER_FEATURES,)
FIX = """\
for module in {model}.modules():
    if isinstance(module, torch.nn.Linear) and isinstance(module.weight, DTensor):
        module.out_features, module.in_features = module.weight.shape
"""


class TpLoraAdapterFeatures(Handler):
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(TrainingFile)

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated):
        if not self.file.tensor_parallel_load or not isinstance(updated, cst.SimpleStatementLine):
            return updated
        if not m.matches(
            original, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name())])])
        ):
            return updated
        assign = original.body[0]
        name, call = assign.targets[0].target.value, assign.value
        if not isinstance(call, cst.Call):
            return updated
        callee = (dotted_name(call.func) or "").rsplit(".", 1)[-1]
        if callee == "get_peft_model":
            model = name
        elif callee.endswith("Trainer") and find_keyword(call, "peft_config") is not None:
            model = f"{name}.model"
        else:
            return updated
        self.ctx.report(call, TP_LORA_ADAPTER_FEATURES)
        self.ctx.todo(call, TP_LORA_ADAPTER_FEATURES, DATA_PARALLEL_WHY, DATA_PARALLEL_ACTION)
        self.ctx.add_import("torch")
        self.ctx.add_import("torch.distributed.tensor", "DTensor")
        return cst.FlattenSentinel([updated, cst.parse_statement(FIX.format(model=model))])


HANDLER = TpLoraAdapterFeatures
