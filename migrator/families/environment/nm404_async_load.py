"""NM404: a migrated file that loads weights sets `HF_DEACTIVATE_ASYNC_LOAD=1` after its imports."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import descendants, dotted_name, imports_end, method_calls
from migrator.families.environment.state import HINTS, EnvironmentFile
from migrator.families.environment.variables import ASYNC_LOAD_VARIABLE
from migrator.families.inference.tables import FROM_NEURON_EXPORT
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

ASYNC_LOAD_ADDED = Rule(
    "NM404",
    Severity.INFO,
    f"Weights are loaded with `from_pretrained` but `{ASYNC_LOAD_VARIABLE}` is not set",
    f'Added `os.environ.setdefault("{ASYNC_LOAD_VARIABLE}", "1")` after the imports: asynchronous weight '
    "loading is not supported on TorchNeuron.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForSequenceClassification

model = NeuronModelForSequenceClassification.from_pretrained(
    "distilbert-base-uncased-finetuned-sst-2-english", export=True, batch_size=1, sequence_length=128
)
""",
            after="""\
import os
from transformers import AutoModelForSequenceClassification

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForSequenceClassification.from_pretrained(
    "distilbert-base-uncased-finetuned-sst-2-english", device_map="neuron"
)
""",
        ),
    ),
)
RULES = (ASYNC_LOAD_ADDED,)


# Loads the inference rules write in place of optimum's pipelines (a pipeline loads its model's weights).
_LOADS_WRITTEN = frozenset({"transformers.pipeline", FROM_NEURON_EXPORT})
# The statement added (parsed once: nodes are immutable).
_SETTING = cst.parse_statement(f'os.environ.setdefault("{ASYNC_LOAD_VARIABLE}", "1")\n').with_changes(
    leading_lines=[cst.EmptyLine()]
)


class AsyncLoad(Handler):
    HINTS = HINTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.file = ctx.state(EnvironmentFile)

    def leave_Module(self, original: cst.Module, updated: cst.Module):
        if not self.file.legacy() or not self._loads_weights(updated):
            return updated
        # The text test is cheap and necessary; the tree search decides.
        if any(ASYNC_LOAD_VARIABLE in string for string in self.ctx.source.strings) and m.findall(
            original, m.SimpleString(value=m.MatchIfTrue(lambda value: ASYNC_LOAD_VARIABLE in value))
        ):
            return updated
        index = imports_end(updated)
        anchor = self.file.first_load or (original.body[imports_end(original)] if original.body else original)
        self.ctx.report(anchor, ASYNC_LOAD_ADDED)
        self.ctx.add_import("os")
        body = list(updated.body)
        if index < len(body) and not body[index].leading_lines:
            body[index] = body[index].with_changes(leading_lines=[cst.EmptyLine()])
        return updated.with_changes(body=[*body[:index], _SETTING, *body[index:]])

    def _loads_weights(self, updated: cst.Module) -> bool:
        """A `from_pretrained` call in the input, or a load written by a rule (the inference rules turn `export`
        calls into loads, optimum's pipelines into Transformers' and compiled decoders' loads into
        `_from_neuron_export`)."""
        if self.file.first_load is not None:
            return True
        if "export" in self.ctx.code and method_calls(updated, "from_pretrained"):
            return True
        return "pipeline" in self.ctx.code and any(
            dotted_name(call.func) in _LOADS_WRITTEN for call in descendants(updated, cst.Call)
        )


HANDLER = AsyncLoad
