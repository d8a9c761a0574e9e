"""Run under the stand-in (tests/compat_matrix/test_standin.py): training through Transformers', TRL's and PEFT's
own neuron paths on a tiny Llama. Prints one JSON object of findings; the test asserts on them."""

import json
import tempfile
import warnings

import torch
from datasets import Dataset
from peft import LoraConfig, get_peft_model
from tokenizers import Tokenizer, models, pre_tokenizers
from torch._dynamo.utils import counters
from transformers import PreTrainedTokenizerFast, Trainer, TrainingArguments
from trl import SFTConfig, SFTTrainer

from compat_matrix.tiny import VOCAB, build_tiny_model

warnings.simplefilter("ignore")
found = {}
out = tempfile.mkdtemp()
common = {"output_dir": out, "report_to": [], "save_strategy": "no", "logging_steps": 1, "disable_tqdm": True}


def token_rows(count: int, length: int) -> list[dict]:
    generator = torch.Generator().manual_seed(length)
    return [
        {"input_ids": torch.randint(3, VOCAB - 16, (length,), generator=generator).tolist()}
        for _ in range(count)
    ]


class Rows(torch.utils.data.Dataset):
    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, index):
        ids = torch.tensor(self.rows[index]["input_ids"])
        return {"input_ids": ids, "labels": ids}


# Trainer(torch_compile=True): Transformers picks neuron:0 and the neuron backend by itself; the losses match a
# CPU run of the same steps.
def train(use_cpu: bool) -> tuple[list[float], TrainingArguments]:
    torch.manual_seed(0)
    model = build_tiny_model("llama").train()
    args = TrainingArguments(torch_compile=not use_cpu, use_cpu=use_cpu, max_steps=3, per_device_train_batch_size=2,
                             seed=0, **common)  # fmt: skip
    trainer = Trainer(model=model, args=args, train_dataset=Rows(token_rows(6, 128)))
    trainer.train()
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry], args


counters.clear()
neuron_losses, args = train(use_cpu=False)
cpu_losses, _ = train(use_cpu=True)
found["trainer_device"] = str(args.device)
found["trainer_backend"] = args.torch_compile_backend
found["trainer_graphs"] = counters["neuron"]["compiled_graphs"]
found["trainer_losses"] = [neuron_losses, cpu_losses]

# TRL's SFTTrainer pads every batch to a multiple of 128 on neuron (pad_to_multiple_of="auto").
vocab = {f"t{i}": i for i in range(VOCAB)}
tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="t0"))
tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="t0", eos_token="t2")
shapes = []
model = build_tiny_model("llama").train()
model.register_forward_pre_hook(lambda module, args, kwargs: shapes.append(list(kwargs["input_ids"].shape)),
                                with_kwargs=True)  # fmt: skip
rows = token_rows(2, 40) + token_rows(2, 150)
config = SFTConfig(max_steps=2, per_device_train_batch_size=2, **common)
found["sft_pad_to_multiple_of"] = config.pad_to_multiple_of
SFTTrainer(
    model=model, args=config, train_dataset=Dataset.from_list(rows), processing_class=tokenizer
).train()
found["sft_batch_shapes"] = shapes

# PEFT LoRA on neuron: the adapters train, the base weights stay.
model = get_peft_model(
    build_tiny_model("llama").to("neuron").train(), LoraConfig(r=4, target_modules=["q_proj"])
)
base = model.base_model.model.model.layers[0].self_attn.q_proj
before = (base.base_layer.weight.detach().cpu().clone(), base.lora_B["default"].weight.detach().cpu().clone())
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
ids = torch.randint(3, VOCAB - 16, (2, 32)).to("neuron")
for _ in range(2):
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad()
found["lora_device"] = str(base.lora_B["default"].weight.device)
found["lora_base_unchanged"] = torch.equal(base.base_layer.weight.detach().cpu(), before[0])
found["lora_adapter_trained"] = not torch.equal(base.lora_B["default"].weight.detach().cpu(), before[1])
print(json.dumps(found))
