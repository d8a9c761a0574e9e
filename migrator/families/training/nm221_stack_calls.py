"""NM221: calls the migrated stack (Transformers 5, huggingface_hub 1.x, datasets 4+) no longer takes, in any file
of a migrated tree: `use_auth_token=`, `tokenizer.encode_plus` / `batch_encode_plus`, `from_pretrained(...,
torchscript=...)`. Rewritten where the replacement is exact, a TODO on the statement otherwise.

Each removal was checked by running it against the pinned packages (constraints.txt; the table's `source`
says where the library records it); `tests/migrator/test_stack_calls.py` runs them again."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from migrator.cst_helpers import find_keyword, literal_value, tidy_args, without_args
from migrator.rules import Example, Rule, Severity
from migrator.transform import Handler


@dataclass(frozen=True)
class Removal:
    name: str  # the keyword or method name the migrated stack no longer has
    raises: str  # what the pinned stack does with it (checked by running it)
    source: str  # where the library says so


REMOVALS = (
    Removal(
        "use_auth_token",
        "TypeError from a model's from_pretrained; huggingface_hub's downloads and datasets' load_dataset have no "
        "such parameter (a tokenizer load takes it silently and sends no token)",
        "Transformers 5 migration guide (MIGRATION_GUIDE_V5.md, `use_auth_token` removed in favour of `token`); "
        "huggingface_hub 1.0 release notes (deprecated arguments removed)",
    ),
    Removal(
        "encode_plus",
        "AttributeError: the tokenizer has no encode_plus",
        "Transformers 5 migration guide (tokenization: `encode_plus` / `batch_encode_plus` removed, call the "
        "tokenizer)",
    ),
    Removal(
        "batch_encode_plus",
        "AttributeError: the tokenizer has no batch_encode_plus",
        "Transformers 5 migration guide (tokenization: `encode_plus` / `batch_encode_plus` removed, call the "
        "tokenizer)",
    ),
    Removal(
        "torchscript",
        "TypeError: <Model>.__init__() got an unexpected keyword argument 'torchscript' (a config load ignores it)",
        "Transformers 5 migration guide (TorchScript support removed: `torchscript` config attribute gone)",
    ),
)
REMOVED = {removal.name: removal for removal in REMOVALS}

# Packages whose callables took `use_auth_token=` and now take `token=` with the same values (True, a string).
TOKEN_PACKAGES = ("transformers", "huggingface_hub", "datasets", "peft", "trl", "diffusers", "evaluate")
# Methods of Hub-backed objects (models, tokenizers, processors, configs, datasets) that took it.
TOKEN_METHODS = frozenset({"from_pretrained", "push_to_hub", "save_pretrained", "load_dataset"})
# How many positional arguments mean the same to the method and to the tokenizer's `__call__(text, text_pair,
# text_target, ...)`: encode_plus(text, text_pair, add_special_tokens, ...), batch_encode_plus(batch, add_special_tokens).
ENCODE_POSITIONS = {"encode_plus": 2, "batch_encode_plus": 1}

STACK_CALLS = Rule(
    "NM221",
    Severity.WARNING,
    "A call the migrated stack no longer takes, in any file of the tree (plain Transformers scripts included): "
    "`use_auth_token=`, `tokenizer.encode_plus(...)` / `batch_encode_plus(...)`, `from_pretrained(..., "
    "torchscript=...)`",
    "`use_auth_token=` -> `token=` (same values); `tok.encode_plus(x, ...)` / `tok.batch_encode_plus(xs, ...)` "
    "-> `tok(x, ...)` / `tok(xs, ...)` (the tokenizer's call takes the same text, pairs and keywords); "
    "`torchscript=False` (the default) is dropped. A TODO where it is not exact: `torchscript=True` (it made the "
    "model return tuples and untied its embeddings for torch.jit.trace), positional arguments past the ones both "
    "take alike, `use_auth_token=` beside `token=`.",
    examples=(
        Example(
            before="""\
from transformers import AutoModelForSequenceClassification, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased", use_auth_token=True)
model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", torchscript=False)
inputs = tokenizer.encode_plus("Is this good?", max_length=128, padding="max_length", return_tensors="pt")
batch = tokenizer.batch_encode_plus([("a question", "its context")], truncation=True)
""",
            after="""\
from transformers import AutoModelForSequenceClassification, AutoTokenizer
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased", token=True)
model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")
inputs = tokenizer("Is this good?", max_length=128, padding="max_length", return_tensors="pt")
batch = tokenizer([("a question", "its context")], truncation=True)
""",
        ),
        Example(
            before="""\
from transformers import AutoModel

model = AutoModel.from_pretrained("bert-base-uncased", torchscript=True)
traced = torch.jit.trace(model, example_inputs)
""",
            after="""\
from transformers import AutoModel
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

# TODO(neuron-migrate): NM221 `torchscript=True` made the model return tuples and untie its tied embeddings for torch.jit.trace, and Transformers 5 rejects it (TypeError); delete it, pass return_dict=False if the code reads the outputs as a tuple, and compile with torch.compile(model, backend="neuron") instead of tracing
model = AutoModel.from_pretrained("bert-base-uncased", torchscript=True)
traced = torch.jit.trace(model, example_inputs)
""",
        ),
    ),
)
RULES = (STACK_CALLS,)


class StackCalls(Handler):
    HINTS = frozenset(REMOVED)
    TRIGGERS = frozenset(REMOVED)

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        func = original.func
        if isinstance(func, cst.Attribute) and func.attr.value in ENCODE_POSITIONS:
            updated = self._encode(original, updated, func)
        if not isinstance(updated, cst.Call):
            return updated
        if find_keyword(original, "use_auth_token") is not None and self._takes_token(func):
            updated = self._token(original, updated)
        loads = isinstance(func, cst.Attribute) and func.attr.value == "from_pretrained"
        if loads and find_keyword(original, "torchscript") is not None:
            updated = self._torchscript(original, updated)
        return updated

    def _takes_token(self, func: cst.BaseExpression) -> bool:
        qualified = self.ctx.qualified(func) or ""
        if qualified.split(".")[0] in TOKEN_PACKAGES:
            return True
        return isinstance(func, cst.Attribute) and func.attr.value in TOKEN_METHODS

    def _encode(self, original: cst.Call, updated: cst.Call, func: cst.Attribute) -> cst.Call:
        method = func.attr.value
        if re.search(rf"\b(?:def|class) {method}\b", self.ctx.code):  # the file's own: not the tokenizer's
            return updated
        positional = sum(1 for arg in original.args if arg.keyword is None and not arg.star)
        if any(arg.star == "*" for arg in original.args) or positional > ENCODE_POSITIONS[method]:
            self.ctx.todo(
                original,
                STACK_CALLS,
                f"`{method}` is gone from Transformers 5 tokenizers (AttributeError), and this call passes "
                "positional arguments that the tokenizer's own call reads differently",
                "call the tokenizer itself (`tokenizer(text, text_pair, ...)`), passing add_special_tokens and "
                "the rest by keyword",
            )
            return updated
        self.ctx.report(original, STACK_CALLS, f"`.{method}(...)` -> a call of the tokenizer itself.")
        receiver = updated.func.value if isinstance(updated.func, cst.Attribute) else func.value
        return updated.with_changes(func=receiver)

    def _token(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if find_keyword(original, "token") is not None:
            self.ctx.todo(
                original,
                STACK_CALLS,
                "`use_auth_token=` is gone from the migrated stack, and this call passes `token=` too",
                "keep the one token you mean as token= and delete use_auth_token=",
            )
            return updated
        self.ctx.report(original, STACK_CALLS, "`use_auth_token=` -> `token=`.", subject="use_auth_token")
        args = [
            arg.with_changes(keyword=cst.Name("token"))
            if arg.keyword is not None and arg.keyword.value == "use_auth_token"
            else arg
            for arg in updated.args
        ]
        return updated.with_changes(args=args)

    def _torchscript(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        keyword = find_keyword(updated, "torchscript")
        if keyword is None:
            return updated
        if literal_value(keyword.value) is False:  # the default: dropping it changes nothing
            self.ctx.report(
                original, STACK_CALLS, "`torchscript=False` (the default) dropped.", subject="torchscript"
            )
            return updated.with_changes(args=tidy_args(without_args(list(updated.args), {keyword})))
        self.ctx.todo(
            original,
            STACK_CALLS,
            "`torchscript=True` made the model return tuples and untie its tied embeddings for torch.jit.trace, "
            "and Transformers 5 rejects it (TypeError)",
            "delete it, pass return_dict=False if the code reads the outputs as a tuple, and compile with "
            'torch.compile(model, backend="neuron") instead of tracing',
            subject="torchscript",
        )
        return updated


HANDLER = StackCalls
