"""NM115: optimum-neuron inference symbols with no mechanical equivalent get a TODO naming the replacement
(table `MANUAL_SYMBOLS` in `tables.py`)."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import source_code
from migrator.families.inference import tables as t
from migrator.families.inference.state import HINTS, TRIGGERS
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

MANUAL_SYMBOL = Rule(
    "NM115",
    Severity.ERROR,
    "An optimum-neuron inference symbol with no mechanical equivalent (embeddings, sentence-transformers, "
    "ControlNet pipelines, base classes, exporters, compilation configs)",
    "Left with a TODO that names the replacement.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForSentenceTransformers

model = NeuronModelForSentenceTransformers.from_pretrained("BAAI/bge-small-en-v1.5", export=True)
""",
            after="""\
# TODO(neuron-migrate): NM115 `NeuronModelForSentenceTransformers`: the traced model returns `outputs.sentence_embedding`; use sentence_transformers.SentenceTransformer(model_id, device="neuron") and `model.encode(...)` instead
from optimum.neuron import NeuronModelForSentenceTransformers
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = NeuronModelForSentenceTransformers.from_pretrained("BAAI/bge-small-en-v1.5", export=True)
""",
        ),
    ),
)
RULES = (MANUAL_SYMBOL,)


class ManualSymbols(Handler):
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = source_code(node.module)
        for alias in node.names:
            qualified = f"{module}.{alias.name.value}"
            why = t.MANUAL_SYMBOLS.get(qualified)
            if why is None and module.startswith(t.EXPORTERS_MODULE):
                why = t.EXPORTERS_WHY
            if why:
                self.ctx.todo(alias, MANUAL_SYMBOL, f"`{alias.name.value}`: {why}", subject=qualified)


HANDLER = ManualSymbols
