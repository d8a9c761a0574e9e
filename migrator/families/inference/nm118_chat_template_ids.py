"""NM118: a tokenizer's chat template keeps returning the token ids the code uses (Transformers 5 returns a
BatchEncoding by default)."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from migrator.cst_helpers import find_keyword, keyword_arg, literal_value, unpacked_mapping, with_appended
from migrator.families.inference.state import HINTS, TRIGGERS, InferenceFile
from migrator.rules import Example, Rule, Severity
from migrator.transform import FileContext, Handler

CHAT_TEMPLATE_IDS = Rule(
    "NM118",
    Severity.INFO,
    "`tokenizer.apply_chat_template(...)` that tokenizes, without `return_dict`",
    "`return_dict=False` added: Transformers 4 (optimum-neuron's) returned the token ids, Transformers 5 returns "
    "a BatchEncoding (a dict) by default, which `generate(ids)` and `ids.shape` do not take as ids.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM
from transformers import AutoTokenizer

model = NeuronModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", export=True, batch_size=1, sequence_length=512)
tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")
ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
output = model.generate(ids, max_new_tokens=64)
""",
            after="""\
from transformers import AutoModelForCausalLM, AutoTokenizer
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", device_map="neuron")
model.generation_config.cache_implementation = "static"
model.generation_config.max_cache_len = 512
tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")
ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=False).to(model.device)
output = model.generate(ids, max_new_tokens=64)
""",
        ),
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM
from transformers import AutoTokenizer

model = NeuronModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", export=True, batch_size=1, sequence_length=512)
tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")


def prompt_ids(messages, **options):
    return tokenizer.apply_chat_template(messages, **options)
""",
            after="""\
from transformers import AutoModelForCausalLM, AutoTokenizer
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", device_map="neuron")
model.generation_config.cache_implementation = "static"
model.generation_config.max_cache_len = 512
tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")


def prompt_ids(messages, **options):
    # TODO(neuron-migrate): NM118 Transformers 5's apply_chat_template returns a BatchEncoding unless return_dict=False, and the unpacked arguments may set it; pass return_dict=False where the code uses the result as token ids
    return tokenizer.apply_chat_template(messages, **options)
""",
        ),
    ),
)
RULES = (CHAT_TEMPLATE_IDS,)


class ChatTemplateIds(Handler):
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


HANDLER = ChatTemplateIds
