"""NM802: training batches padded to their longest row (a Trainer, or a `backward()` loop)."""

from __future__ import annotations

from collections.abc import Iterator

from migrator.risks.base import PAD_BATCHES, Risk, at, pads_to_fixed_length, tokenizer_calls
from migrator.rules import Example, Rule, Severity
from usercode.python import callee
from usercode.reading import Code

UNPADDED_TRAINING = Rule(
    "NM802",
    Severity.WARNING,
    "Training batches padded to their longest row only (a Trainer or a `backward()` loop without fixed-length "
    "padding): each new sequence length compiles again",
    PAD_BATCHES,
    examples=(
        Example(
            before="from transformers import Trainer\n\n"
            "trainer = Trainer(model=model, args=args, train_dataset=dataset)\ntrainer.train()\n"
        ),
    ),
)
RULES = (UNPADDED_TRAINING,)
# Trainers that pad each batch to its longest row (TRL's pad to multiples of 128 on neuron themselves).
LONGEST_ROW_TRAINERS = frozenset({"Trainer", "Seq2SeqTrainer", "NeuronTrainer"})


def find(code: Code) -> Iterator[Risk]:
    """A module that trains (a Transformers Trainer, a `backward()` loop) and never pads to a fixed length;
    the risk points at the data collator to change when there is one."""
    for module in code.python:
        names = [callee(call) for call in module.calls]
        calls = list(zip(module.calls, names, strict=True))
        steps = [call for call, name in calls if name in LONGEST_ROW_TRAINERS]
        steps += [call for call, name in calls if name == "backward"]
        collators = [call for call, name in calls if name.startswith("DataCollator")]
        if not steps or any(pads_to_fixed_length(call) for call in tokenizer_calls(module) + collators):
            continue
        where = next((call for call in collators if not pads_to_fixed_length(call)), steps[0])
        detail = "training batches are padded to their longest row only: sequence lengths vary between steps"
        yield at(UNPADDED_TRAINING, module, where, detail)
