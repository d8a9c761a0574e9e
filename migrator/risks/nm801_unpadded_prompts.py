"""NM801: prompts tokenized to their own length, then generated from."""

from __future__ import annotations

from collections.abc import Iterator

from migrator.risks.base import Risk, at, pads_to_fixed_length, tokenizer_calls
from migrator.rules import Example, Rule, Severity
from usercode.python import callee
from usercode.reading import Code

UNPADDED_PROMPTS = Rule(
    "NM801",
    Severity.WARNING,
    'Prompts tokenized without `padding="max_length"`, then passed to `generate()`: every new prompt length '
    "is one more compilation",
    'Tokenize with `padding="max_length"` and a fixed `max_length` (or a few bucket lengths), keep the batch '
    'size fixed, and generate with `cache_implementation="static"`.',
    examples=(
        Example(
            before='inputs = tokenizer(prompt, return_tensors="pt")\noutputs = model.generate(**inputs)\n'
        ),
    ),
)
RULES = (UNPADDED_PROMPTS,)


def find(code: Code) -> Iterator[Risk]:
    """The first unpadded tokenizer call of each module (a script, a cell) that also generates."""
    for module in code.python:
        unpadded = [call for call in tokenizer_calls(module) if not pads_to_fixed_length(call)]
        if unpadded and any(callee(call) == "generate" for call in module.calls):
            detail = "prompts are tokenized without padding='max_length', then passed to generate()"
            yield at(UNPADDED_PROMPTS, module, unpadded[0], detail)
