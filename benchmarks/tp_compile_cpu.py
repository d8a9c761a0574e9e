"""The announcement's TRL SFT setting on plain CPU (gloo, `aot_eager`, no stand-in): which of its failures are
PyTorch's or Transformers' own.

    torchrun --nproc_per_node=2 benchmarks/tp_compile_cpu.py --tp 2 [--fsdp 2] [--lora] [--no-compile]
        [--no-checkpointing] [--lora-modules o_proj] [--batch 2]

A tiny Llama (random weights, built from its config class, bfloat16), `DistributedConfig(tp_size, fsdp_size)` at
load, TRL's `SFTTrainer` with its defaults (activation checkpointing on) and `torch_compile=True` on the
`aot_eager` backend: the AOT autograd path TorchNeuron compiles through, with CPU kernels. Prints one JSON line
(rank 0) with the losses, or the error's type and message; `--tp 1` on one process is the reference.

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--fsdp", type=int, default=None)
    parser.add_argument("--lora", action="store_true")
    parser.add_argument("--lora-modules", default="q_proj,k_proj,v_proj,o_proj")
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--no-checkpointing", action="store_true")
    # per process; the one-process reference of an FSDP grid takes the grid's global batch (2 x fsdp)
    parser.add_argument("--batch", type=int, default=2)
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
        DistributedConfig(tp_size=args.tp, fsdp_size=args.fsdp) if args.tp > 1 or args.fsdp else None
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
