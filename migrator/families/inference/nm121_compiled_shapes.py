"""NM121: `model.neuron_config.batch_size` / `.sequence_length` of a compiled decoder the file loads through
`_from_neuron_export` (NM106) read the same values from the record that helper keeps."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import source_code
from migrator.families.inference.loads import FROM_NEURON_EXPORT_SOURCE
from migrator.families.inference.state import HINTS, TRIGGERS, InferenceFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

# The fields of optimum-neuron's neuron config that the helper's record holds for every model, compiled or not.
SHAPES = ("batch_size", "sequence_length")

COMPILED_SHAPES = Rule(
    "NM121",
    Severity.INFO,
    "`model.neuron_config.batch_size` / `model.neuron_config.sequence_length` of a compiled decoder loaded "
    "through `_from_neuron_export` (NM106)",
    '-> `model.neuron_export["batch_size"]` / `["sequence_length"]`: the shapes the model was compiled for, from '
    "the compiled model's record, which the helper keeps on the model (for a checkpoint, those optimum-neuron's "
    "export defaulted to: batch size 1, the model's positions up to 4096). Other `neuron_config` fields stay "
    "with NM501's TODO.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM

model = NeuronModelForCausalLM.from_pretrained("./llama-neuron")
prompts = prompts + [prompts[-1]] * (model.neuron_config.batch_size - len(prompts))
""",
            after=f"""\
import os
from transformers import AutoModelForCausalLM

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")


{FROM_NEURON_EXPORT_SOURCE.strip()}


model = _from_neuron_export(AutoModelForCausalLM, "./llama-neuron", device_map="neuron")
prompts = prompts + [prompts[-1]] * (model.neuron_export["batch_size"] - len(prompts))
""",
        ),
    ),
)
RULES = (COMPILED_SHAPES,)


class CompiledShapes(Handler):
    HINTS = HINTS | {"neuron_config"}
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(InferenceFile)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        if not (
            m.matches(original, m.Attribute(value=m.Attribute(attr=m.Name("neuron_config"))))
            and original.attr.value in SHAPES
        ):
            return updated
        model = source_code(original.value.value)
        if model not in self.file.compiled_decoders or model not in self.file.models_in_scope():
            return updated
        field = original.attr.value
        quote = self.ctx.free_quote()
        if quote is None:
            return updated  # (NM501's TODO stays)
        self.ctx.report(
            original,
            COMPILED_SHAPES,
            f'`{model}.neuron_config.{field}` -> `{model}.neuron_export["{field}"]`: the {field.replace("_", " ")} '
            "it was compiled for, from the record `_from_neuron_export` keeps.",
            subject=field,
        )
        return cst.Subscript(
            value=cst.Attribute(value=updated.value.value, attr=cst.Name("neuron_export")),
            slice=[cst.SubscriptElement(cst.Index(cst.SimpleString(f"{quote}{field}{quote}")))],
        )


HANDLER = CompiledShapes
