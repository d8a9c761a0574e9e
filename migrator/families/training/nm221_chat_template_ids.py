"""NM221: `tokenizer.apply_chat_template(...)` keeps returning the token ids under Transformers 5."""

from __future__ import annotations

import libcst as cst

from migrator.cst_helpers import find_keyword, is_literal, keyword_arg, with_appended
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler

CHAT_TEMPLATE_IDS = Rule(
    "NM221",
    Severity.INFO,
    "`tokenizer.apply_chat_template(...)` that tokenizes, in code written for Transformers 4 (optimum-neuron)",
    "`return_dict=False` added: Transformers 5 made a tokenizer's apply_chat_template return a BatchEncoding "
    "(return_dict=True) where Transformers 4 returned the token ids, so `generate(ids)` or `ids.shape` would fail; "
    "a processor's default is already False. Not added where the call says return_dict, does not tokenize "
    "(tokenize=False) or passes `**kwargs`.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM
from transformers import AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct")
model = NeuronModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct", export=True, batch_size=1, sequence_length=1024)
ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
output = model.generate(ids, max_new_tokens=64)
""",
            after="""\
from transformers import AutoModelForCausalLM, AutoTokenizer
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct")
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct", device_map="neuron")
model.generation_config.cache_implementation = "static"
model.generation_config.max_cache_len = 1024
ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=False).to(model.device)
output = model.generate(ids, max_new_tokens=64)
""",
        ),
    ),
)
RULES = (CHAT_TEMPLATE_IDS,)


class ChatTemplateIds(Handler):
    HINTS = frozenset({"apply_chat_template"})
    TRIGGERS = frozenset({"apply_chat_template"})

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if not (
            isinstance(original.func, cst.Attribute) and original.func.attr.value == "apply_chat_template"
        ):
            return updated
        tokenize = find_keyword(original, "tokenize")
        if (
            find_keyword(original, "return_dict") is not None
            or any(arg.star for arg in original.args)
            or (tokenize is not None and is_literal(tokenize.value, "False"))
        ):
            return updated
        self.ctx.report(original, CHAT_TEMPLATE_IDS)
        return updated.with_changes(
            args=with_appended(list(updated.args), [keyword_arg("return_dict", cst.Name("False"))])
        )


HANDLER = ChatTemplateIds
