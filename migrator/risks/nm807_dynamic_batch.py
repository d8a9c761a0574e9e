"""NM807: a dynamic batch size, in Python (`dynamic_batch_size=True`) or on a command line."""

from __future__ import annotations

from collections.abc import Iterator

from migrator.risks.base import STATIC_SHAPES, Risk, literal_arguments
from migrator.rules import Example, Rule, Severity
from usercode.reading import Code

DYNAMIC_BATCH = Rule(
    "NM807",
    Severity.WARNING,
    "A dynamic batch size (`dynamic_batch_size=True`, `--dynamic-batch-size`)",
    STATIC_SHAPES,
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
RULES = (DYNAMIC_BATCH,)


def find(code: Code) -> Iterator[Risk]:
    yield from literal_arguments(
        code, DYNAMIC_BATCH, "dynamic_batch_size", True, lambda name: "dynamic_batch_size=True"
    )
    for command in code.commands:
        for word, line in zip(command.words, command.lines, strict=True):
            if word.partition("=")[0].replace("_", "-") == "--dynamic-batch-size":
                yield Risk(DYNAMIC_BATCH, line, command.cell, "--dynamic-batch-size")
