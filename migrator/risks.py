"""Compile risks (NM8xx): what makes TorchNeuron recompile or hang, found by the checklist's scan of a file
(`reports/scan.py`), not rewritten by a handler of the walk. Each rule names the codes whose rewrite removes
the risk (`fixed_by`), so the checklist shows a risk the migrator already handles as a check."""

from __future__ import annotations

from migrator.families.environment.nm404_async_load import ASYNC_LOAD_VARIABLE
from migrator.rules import Example, Rule, Severity
from migrator.target_stack import component

_PAD_PROMPTS = (
    'Tokenize with `padding="max_length"` and a fixed `max_length` (or a few bucket lengths), keep the batch '
    'size fixed, and generate with `cache_implementation="static"`.'
)
_PAD_BATCHES = (
    'Pad every batch to a fixed length: `padding="max_length"` when tokenizing, or `pad_to_multiple_of=128` '
    f"in the data collator. With TRL >= {component('trl').version} keep `pad_to_multiple_of` at its default and "
    '`padding_free=False` (`packing_strategy="wrapped"` when packing).'
)
_STATIC_SHAPES = (
    'Remove dynamic shapes: `torch.compile(backend="neuron", fullgraph=True, dynamic=False)`, no '
    "`mark_dynamic()`, no dynamic batch sizes; pad inputs to fixed shapes."
)

UNPADDED_PROMPTS = Rule(
    "NM801",
    Severity.WARNING,
    'Prompts tokenized without `padding="max_length"`, then passed to `generate()`: every new prompt length '
    "is one more compilation",
    _PAD_PROMPTS,
    examples=(
        Example(
            before='inputs = tokenizer(prompt, return_tensors="pt")\noutputs = model.generate(**inputs)\n'
        ),
    ),
)
UNPADDED_TRAINING = Rule(
    "NM802",
    Severity.WARNING,
    "Training batches padded to their longest row only (a Trainer or a `backward()` loop without fixed-length "
    "padding): each new sequence length compiles again",
    _PAD_BATCHES,
    examples=(
        Example(
            before="from transformers import Trainer\n\n"
            "trainer = Trainer(model=model, args=args, train_dataset=dataset)\ntrainer.train()\n"
        ),
    ),
)
PADDING_FREE = Rule(
    "NM803",
    Severity.WARNING,
    "`SFTConfig(padding_free=True)` flattens batches to varying lengths",
    _PAD_BATCHES,
    fixed_by=("NM203:padding_free",),
    examples=(Example(before='config = SFTConfig(output_dir="out", padding_free=True)\n'),),
)
NO_PAD_MULTIPLE = Rule(
    "NM804",
    Severity.WARNING,
    "`SFTConfig(pad_to_multiple_of=None)` turns off TRL's padding to a multiple of 128 on neuron",
    _PAD_BATCHES,
    examples=(Example(before='config = SFTConfig(output_dir="out", pad_to_multiple_of=None)\n'),),
)
DYNAMIC_COMPILE = Rule(
    "NM805",
    Severity.WARNING,
    "`torch.compile(dynamic=True)`: the neuron backend compiles static shapes only",
    _STATIC_SHAPES,
    fixed_by=("NM406",),
    examples=(Example(before="compiled = torch.compile(model, dynamic=True)\n"),),
)
MARK_DYNAMIC = Rule(
    "NM806",
    Severity.WARNING,
    "`torch._dynamo.mark_dynamic()` asks for a dynamic dimension",
    _STATIC_SHAPES,
    examples=(Example(before="torch._dynamo.mark_dynamic(input_ids, 1)\n"),),
)
DYNAMIC_BATCH = Rule(
    "NM807",
    Severity.WARNING,
    "A dynamic batch size (`dynamic_batch_size=True`, `--dynamic-batch-size`)",
    _STATIC_SHAPES,
    fixed_by=("NM105:dynamic_batch_size",),
    examples=(
        Example(
            before="model = NeuronModelForSequenceClassification.from_pretrained(\n"
            '    "distilbert-base-uncased", export=True, dynamic_batch_size=True\n)\n'
        ),
        Example(
            before="optimum-cli export neuron --model distilbert-base-uncased --dynamic-batch-size out/\n",
            kind="shell",
        ),
    ),
)
AUTOMATIC_DYNAMIC = Rule(
    "NM808",
    Severity.WARNING,
    "`torch._dynamo.config.automatic_dynamic_shapes = True`",
    _STATIC_SHAPES,
    examples=(Example(before="torch._dynamo.config.automatic_dynamic_shapes = True\n"),),
)
ASYNC_LOAD = Rule(
    "NM809",
    Severity.WARNING,
    f"Weights loaded with `from_pretrained()` while `{ASYNC_LOAD_VARIABLE}` is not set: asynchronous loading "
    "hangs on TorchNeuron",
    f"Set {ASYNC_LOAD_VARIABLE}=1 before the first from_pretrained(): "
    f'`os.environ.setdefault("{ASYNC_LOAD_VARIABLE}", "1")` at the top of the script, or export it in the '
    "launcher.",
    fixed_by=("NM404", "NM465"),
    examples=(Example(before='model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B")\n'),),
)
RULES = (
    UNPADDED_PROMPTS,
    UNPADDED_TRAINING,
    PADDING_FREE,
    NO_PAD_MULTIPLE,
    DYNAMIC_COMPILE,
    MARK_DYNAMIC,
    DYNAMIC_BATCH,
    AUTOMATIC_DYNAMIC,
    ASYNC_LOAD,
)
HANDLER = None  # found by reports/scan.py
