"""NM110 (and NM111, defined in `nm111_unpadded_prompts.py`): tokenizer outputs for a model that optimum-neuron
kept on CPU move to the migrated model's device; unpadded prompts are flagged (every new length runs new
kernels): one look at each tokenizer call's assignment decides both."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import literal_value
from migrator.families.inference.state import HINTS, TRIGGERS, InferenceFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

INPUTS_TO_DEVICE = Rule(
    "NM110",
    Severity.INFO,
    'Tokenizer outputs (padded to `"max_length"`) for a model that optimum-neuron kept on CPU',
    "`.to(model.device)` appended: the migrated model lives on neuron, its inputs must too.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM
from transformers import AutoTokenizer

model = NeuronModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", export=True, batch_size=1, sequence_length=512)
tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")
inputs = tokenizer(prompt, return_tensors="pt", padding="max_length", max_length=128)
""",
            after="""\
from transformers import AutoModelForCausalLM, AutoTokenizer
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", device_map="neuron")
model.generation_config.cache_implementation = "static"
model.generation_config.max_cache_len = 512
tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")
inputs = tokenizer(prompt, return_tensors="pt", padding="max_length", max_length=128).to(model.device)
""",
        ),
    ),
)
RULES = (INPUTS_TO_DEVICE,)


class InputsToDevice(Handler):
    HINTS = HINTS
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(InferenceFile)

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign):
        """`inputs = tokenizer(..., return_tensors="pt")[.attr]` next to a migrated model: move the inputs to the
        model's device (processors: also cast floating tensors to its dtype); check the prompt padding."""
        if len(original.targets) != 1:
            return updated
        call, updated_call = original.value, updated.value
        # `processor(...).input_features`: move the whole batch, then take the attribute
        if isinstance(call, cst.Attribute) and isinstance(updated_call, cst.Attribute):
            call, updated_call = call.value, updated_call.value
        if not (
            isinstance(call, cst.Call)
            and isinstance(updated_call, cst.Call)
            and self.file.preprocessor_kind(call.func)
            and any(m.matches(arg, m.Arg(keyword=m.Name("return_tensors"))) for arg in call.args)
        ):
            return updated
        model = self.file.model_in_scope()
        if model is None:
            return updated
        kind = self.file.preprocessor_kind(call.func)
        target = [f"{model}.device"]
        if kind == "processor":
            target.append(f"{model}.dtype")
            self.ctx.report(
                call,
                INPUTS_TO_DEVICE,
                "`.to(model.device, model.dtype)` appended: the migrated model "
                "lives on neuron, its inputs must too (floating-point features take the model's dtype).",
            )
        else:
            padded = any(
                m.matches(arg, m.Arg(keyword=m.Name("padding"))) and literal_value(arg.value) == "max_length"
                for arg in call.args
            )
            self.ctx.report(call, INPUTS_TO_DEVICE if padded else "NM111")
        template = cst.parse_expression(f"_.to({', '.join(target)})")
        moved_call = template.with_changes(func=template.func.with_changes(value=updated_call))
        if isinstance(updated.value, cst.Attribute):
            return updated.with_changes(value=updated.value.with_changes(value=moved_call))
        return updated.with_changes(value=moved_call)


HANDLER = InputsToDevice
