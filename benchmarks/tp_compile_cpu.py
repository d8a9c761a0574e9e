"""The announcement's TRL SFT setting on plain CPU (gloo, `aot_eager`, no stand-in): which of its failures are
PyTorch's or Transformers' own.

    torchrun --nproc_per_node=2 benchmarks/tp_compile_cpu.py --tp 2 [--fsdp 2] [--lora] [--no-compile]
        [--no-checkpointing] [--lora-modules o_proj] [--batch 2] [--adapter-features] [--same-adapter-init]

A tiny Llama (random weights, built from its config class, bfloat16), `DistributedConfig(tp_size, fsdp_size)` at
load, TRL's `SFTTrainer` with its defaults (activation checkpointing on) and `torch_compile=True` on the
`aot_eager` backend: the AOT autograd path TorchNeuron compiles through, with CPU kernels. Prints one JSON line
(rank 0) with the losses, or the error's type and message; `--tp 1` on one process is the reference.

`--adapter-features` runs the statement neuron-migrate writes after a tensor-parallel LoRA trainer (NM223): PEFT
0.21.2 gives a tensor-parallel adapter the `in_features` / `out_features` of its shard, which Transformers' TP
layers read as the full size. `--same-adapter-init` draws the adapters' initial weights from one seeded full-size
draw, so that a grid and one process start from the same adapter (PEFT initialises a row-parallel adapter by its
shard, so their own draws differ) and their losses can be compared.

Accelerate refuses a ParallelismConfig on DistributedType.MULTI_CPU (it expects a device); that check alone is
skipped here, so that what runs is Transformers' TP layers and PyTorch's compile path on gloo.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import traceback

import torch
from datasets import Dataset
from transformers import DistributedConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import SFTConfig, SFTTrainer

STEPS = 4
MAX_LENGTH = 48
# PEFT initialises these adapter weights to zero (the adapter starts as the identity): they keep PEFT's zeros
ZERO_INITIALISED = ("lora_B", "lora_embedding_A")


def tiny_llama(folder: str) -> None:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=False,
    )  # fmt: skip
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(folder)


def tokenizer() -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {chr(ord("a") + i): i for i in range(26)} | {"<pad>": 26, "<eos>": 27}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    raw.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    return PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", eos_token="<eos>")


def match_adapter_features(model: torch.nn.Module) -> None:
    """What neuron-migrate writes after a tensor-parallel LoRA trainer (NM223)."""
    from torch.distributed.tensor import DTensor

    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and isinstance(module.weight, DTensor):
            module.out_features, module.in_features = module.weight.shape


def same_adapter_init(model: torch.nn.Module) -> None:
    """Every non-zero adapter weight from one seeded draw at its full size, sharded as the parameter is."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    generator = torch.Generator().manual_seed(0)
    for name, parameter in sorted(model.named_parameters()):
        if not parameter.requires_grad or any(part in name for part in ZERO_INITIALISED):
            continue
        full = (torch.rand(parameter.shape, generator=generator) * 2 - 1) / parameter.shape[-1] ** 0.5
        full = full.to(parameter.dtype)
        with torch.no_grad():
            if isinstance(parameter, DTensor):
                parameter.copy_(distribute_tensor(full, parameter.device_mesh, parameter.placements))
            else:
                parameter.copy_(full)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--fsdp", type=int, default=None)
    parser.add_argument("--dp-replicate", type=int, default=None)
    parser.add_argument("--lora", action="store_true")
    parser.add_argument("--lora-modules", default="q_proj,k_proj,v_proj,o_proj")
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--no-checkpointing", action="store_true")
    # per process; the one-process reference of an FSDP grid takes the grid's global batch (2 x fsdp)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--adapter-features", action="store_true")
    parser.add_argument("--same-adapter-init", action="store_true")
    args = parser.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    folder = os.path.join(tempfile.gettempdir(), "tp_compile_cpu_llama")
    if rank == 0 and not os.path.isdir(folder):
        tiny_llama(folder)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        from accelerate.parallelism_config import ParallelismConfig

        ParallelismConfig._validate_accelerator = lambda self, accelerator: None
        torch.distributed.init_process_group("gloo")
        torch.distributed.barrier()
    distributed = (
        DistributedConfig(tp_size=args.tp, fsdp_size=args.fsdp, dp_replicate_size=args.dp_replicate)
        if args.tp > 1 or args.fsdp or args.dp_replicate
        else None
    )
    model = LlamaForCausalLM.from_pretrained(folder, dtype=torch.bfloat16, distributed_config=distributed)
    peft_config = None
    if args.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=16, lora_alpha=32, target_modules=args.lora_modules.split(","))
    texts = ["the quick brown fox jumps over the lazy dog"[: 20 + (i * 7) % 23] for i in range(64)]
    config = SFTConfig(
        output_dir=tempfile.mkdtemp(),
        max_steps=STEPS,
        per_device_train_batch_size=args.batch,
        learning_rate=1e-3,
        bf16=True,
        use_cpu=True,
        torch_compile=not args.no_compile,
        # a backend alone turns torch_compile on in TrainingArguments: given only when compiling
        torch_compile_backend=None if args.no_compile else "aot_eager",
        gradient_checkpointing=not args.no_checkpointing,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=0,
        max_length=MAX_LENGTH,
        pad_to_multiple_of=MAX_LENGTH,  # one shape per step, as the device compiles (dynamic=False)
    )
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_dict({"text": texts}),
        processing_class=tokenizer(),
        peft_config=peft_config,
    )
    if args.adapter_features:
        match_adapter_features(trainer.model)
    if args.same_adapter_init:
        same_adapter_init(trainer.model)
    result = {"argv": vars(args), "world": int(os.environ.get("WORLD_SIZE", "1"))}
    try:
        trainer.train()
        result["losses"] = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    except Exception as error:  # the measured failure is the result (its traceback on stderr)
        traceback.print_exc()
        message = str(error)
        result["error"] = {"type": type(error).__name__, "head": message[:300], "tail": message[-300:]}
    if rank == 0:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
