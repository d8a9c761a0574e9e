"""NM110 (and NM111, NM118, each defined in its own module): tokenizer outputs for a model that optimum-neuron
kept on CPU move to the migrated model's device; unpadded prompts are flagged (every new length runs new
kernels). NM118: a tokenizer's chat template keeps returning the token ids the code uses (Transformers 5
returns a BatchEncoding by default)."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import find_keyword, keyword_arg, literal_value, unpacked_mapping, with_appended
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
    HINTS = HINTS | {"apply_chat_template"}
    TRIGGERS = TRIGGERS

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.file = ctx.state(InferenceFile)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        """`tokenizer.apply_chat_template(...)` that tokenizes keeps returning the ids (NM118)."""
        # A processor's apply_chat_template still defaults to return_dict=False.
        if not (
            m.matches(original.func, m.Attribute(attr=m.Name("apply_chat_template")))
            and self.file.preprocessor_kind(original.func) == "tokenizer"
            and find_keyword(original, "return_dict") is None
        ):
            return updated
        tokenize = find_keyword(original, "tokenize")
        if tokenize is not None and literal_value(tokenize.value) is False:
            return updated  # the formatted text, in both versions
        unpacked = unpacked_mapping(original, self.ctx.module)
        if unpacked is not None and "return_dict" in unpacked:
            return updated
        if unpacked is None:
            self.ctx.todo(
                original,
                "NM118",
                "Transformers 5's apply_chat_template returns a BatchEncoding unless return_dict=False, and the "
                "unpacked arguments may set it",
                "pass return_dict=False where the code uses the result as token ids",
            )
            return updated
        self.ctx.report(original, "NM118")
        return updated.with_changes(
            args=with_appended(list(updated.args), [keyword_arg("return_dict", cst.Name("False"))])
        )

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
