"""NM221: calls the migrated stack (Transformers 5, huggingface_hub 1.x, datasets 4+) no longer takes, in any file
of a migrated tree: `use_auth_token=`, `tokenizer.encode_plus` / `batch_encode_plus`, `from_pretrained(...,
torchscript=...)`, `upload_folder(..., multi_commits=...)`... Rewritten where the replacement is exact, a TODO on the statement otherwise.

Each removal was checked by running it against the pinned packages (constraints.txt; the table's `source`
says where the library records it); `tests/migrator/test_stack_calls.py` runs them again."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from migrator.cst_helpers import (
    descendants,
    dotted_name,
    find_keyword,
    is_method_call,
    keyword_arg,
    literal_value,
    source_code,
    tidy_args,
    with_appended,
    without_args,
)
from migrator.families.torchscript_loads import TRAINS, TorchscriptLoads, model_type
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
        "load_in_8bit",
        "TypeError: <Model>.__init__() got an unexpected keyword argument 'load_in_8bit' (False as well)",
        "Transformers 4.57 `modeling_utils.from_pretrained` (deprecated: `load_in_4bit` / `load_in_8bit` built "
        "a BitsAndBytesConfig from them and the other BitsAndBytesConfig keywords of the call); gone in 5.x",
    ),
    Removal(
        "load_in_4bit",
        "TypeError: <Model>.__init__() got an unexpected keyword argument 'load_in_4bit' (False as well)",
        "Transformers 4.57 `modeling_utils.from_pretrained` (deprecated: `load_in_4bit` / `load_in_8bit` built "
        "a BitsAndBytesConfig from them and the other BitsAndBytesConfig keywords of the call); gone in 5.x",
    ),
    Removal(
        "resume_download",
        "TypeError: <Model>.__init__() got an unexpected keyword argument 'resume_download'",
        "huggingface_hub 0.23 release notes (`resume_download` deprecated: downloads always resume, the value is "
        "ignored; Transformers 4.57 requires huggingface_hub >= 0.34); Transformers 5's from_pretrained passes it "
        "to the model",
    ),
    Removal(
        "as_target_tokenizer",
        "AttributeError: the tokenizer has no as_target_tokenizer",
        "Transformers 4.57 `tokenization_utils_base.as_target_tokenizer` (deprecated, 'will be removed in v5': "
        "tokenize the labels with the `text_target` argument of the tokenizer's call); gone in 5.x",
    ),
    Removal(
        "pad_to_max_length",
        "ignored without a word by Transformers 5 tokenizers: nothing is padded (and a max_length with padding "
        "no longer truncates as Transformers 4's pad_to_max_length did), so every batch keeps its own length",
        "Transformers 4.57 `tokenization_utils_base._get_padding_truncation_strategies` (deprecated "
        "pad_to_max_length: padding to max_length, to the longest without one; max_length with padding=False "
        "turned truncation on); gone in 5.x",
    ),
    Removal(
        "multi_commits",
        "TypeError: HfApi.upload_folder() got an unexpected keyword argument 'multi_commits' (and "
        "'multi_commits_verbose')",
        "huggingface_hub 0.27 (pull request 2622: the experimental multi-commit upload removed from "
        "`upload_folder`; `upload_large_folder` uploads large folders in resumable chunks)",
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
QUANTIZE_KEYWORDS = ("load_in_8bit", "load_in_4bit")
MULTI_COMMIT_KEYWORDS = ("multi_commits", "multi_commits_verbose")
# A file that declares its own `pad_to_max_length` (a parameter, a dataclass field such as run_glue.py's
# DataTrainingArguments): its calls with that keyword may be its own, not a tokenizer's.
OWN_PAD_TO_MAX_LENGTH = re.compile(
    r"^\s*pad_to_max_length\s*:|\bdef \w+\([^)]*\bpad_to_max_length\b", re.MULTILINE
)
# The keywords of Transformers 4's `from_pretrained` that went into the BitsAndBytesConfig it built from
# `load_in_*bit` (the config's parameters; `tests/migrator/test_stack_calls.py` reads them from the class).
BITSANDBYTES_KEYWORDS = frozenset(
    {
        *QUANTIZE_KEYWORDS,
        "llm_int8_threshold",
        "llm_int8_skip_modules",
        "llm_int8_enable_fp32_cpu_offload",
        "llm_int8_has_fp16_weight",
        "bnb_4bit_compute_dtype",
        "bnb_4bit_quant_type",
        "bnb_4bit_use_double_quant",
        "bnb_4bit_quant_storage",
    }
)

STACK_CALLS = Rule(
    "NM221",
    Severity.WARNING,
    "A call the migrated stack no longer takes, in any file of the tree (plain Transformers scripts included): "
    "`use_auth_token=`, `tokenizer.encode_plus(...)` / `batch_encode_plus(...)`, `from_pretrained(..., "
    "torchscript=...)`, `from_pretrained(..., load_in_8bit=True)`, `from_pretrained(..., resume_download=True)`, `with tokenizer.as_target_tokenizer():`, "
    "a tokenizer call's `pad_to_max_length=`, `upload_folder(..., multi_commits=True)`",
    "`use_auth_token=` -> `token=` (same values); `tok.encode_plus(x, ...)` / `tok.batch_encode_plus(xs, ...)` "
    "-> `tok(x, ...)` / `tok(xs, ...)` (the tokenizer's call takes the same text, pairs and keywords); "
    "`torchscript=False` (the default) and `resume_download=` (ignored since huggingface_hub 0.23) are dropped; "
    "`multi_commits=` / `multi_commits_verbose=` are dropped from `upload_folder` (one commit uploads the same "
    "folder to the same branch or pull request); "
    "`load_in_8bit=` / `load_in_4bit=` -> "
    "`quantization_config=BitsAndBytesConfig(...)` with the call's other BitsAndBytesConfig keywords, as "
    "Transformers 4 built it (`... if flag else None` for a variable switch; False dropped); "
    "`with tok.as_target_tokenizer(): labels = tok(targets, ...)` -> `labels = tok(text_target=targets, ...)`; "
    '`pad_to_max_length=True` -> `padding="max_length", truncation=True` with a max_length (`padding=True` '
    'without one), as Transformers 4 read it (a variable: `padding="max_length" if flag else False`; '
    "beside `padding=` it was ignored and is dropped). "
    "`torchscript=True` in a file that trains nothing keeps the tuples it made the model return (the embeddings "
    "it untied hold the same weights): `return_dict=False` at the load for the architectures where the pinned "
    "Transformers takes it there (BERT, DistilBERT, RoBERTa, ALBERT, ELECTRA, DeBERTa-v2, ResNet: by class or a "
    "literal checkpoint id); for any other, `torchscript=True` is dropped and each call of the model the file "
    "makes passes `return_dict=False` (which Transformers 5 reads at the outermost call, where the config's breaks "
    "ViT, Llama, CLIP... forwards), the model followed through its names, the file's own functions and wrapper "
    "classes (`self.model = model`, then `self.model(...)`), while a trace of it returns the tuples a trace did "
    "(NM317). "
    "A TODO where it is not exact: `torchscript=True` in a file that trains (untied embeddings train apart), "
    "computed, or where the model goes on where its outputs are not followed (returned, stored in a container, "
    "handed to another library or to a helper that is also called with something else), "
    "positional arguments past the ones both take alike, `use_auth_token=` "
    "beside `token=`, `load_in_*bit=` beside `quantization_config=` or `**kwargs`, a target block that uses "
    "the tokenizer otherwise than to call it on one text.",
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
last_hidden_state = model(**inputs)[0]
""",
            after="""\
from transformers import AutoModel
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModel.from_pretrained("bert-base-uncased", return_dict=False)
last_hidden_state = model(**inputs)[0]
""",
        ),
        Example(
            before="""\
import torch
from transformers import ViTForImageClassification


class Classifier(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model(pixel_values)[0].softmax(-1)


vit = ViTForImageClassification.from_pretrained("google/vit-base-patch16-224", torchscript=True)
classifier = Classifier(vit.eval())
logits, = vit(pixel_values)
""",
            after="""\
import torch
from transformers import ViTForImageClassification
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")


class Classifier(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model(pixel_values, return_dict=False)[0].softmax(-1)


vit = ViTForImageClassification.from_pretrained("google/vit-base-patch16-224")
classifier = Classifier(vit.eval())
logits, = vit(pixel_values, return_dict=False)
""",
        ),
        Example(
            before="""\
from transformers import AutoModelForMaskedLM

model = AutoModelForMaskedLM.from_pretrained("bert-base-uncased", torchscript=True)
model(**batch)[0].backward()
""",
            after="""\
from transformers import AutoModelForMaskedLM
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

# TODO(neuron-migrate): NM221 `torchscript=True` made the model return tuples and untie its tied embeddings for torch.jit.trace, and Transformers 5 rejects it (TypeError); this file trains, where untied embeddings train apart; delete it, pass return_dict=False if the code reads the outputs as a tuple, and compile with torch.compile(model, backend="neuron") instead of tracing
model = AutoModelForMaskedLM.from_pretrained("bert-base-uncased", torchscript=True)
model(**batch)[0].backward()
""",
        ),
        Example(
            before="""\
from transformers import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained("gpt2", load_in_8bit=True, llm_int8_threshold=6.0)
tokenizer = AutoTokenizer.from_pretrained("t5-small")
with tokenizer.as_target_tokenizer():
    labels = tokenizer(targets, max_length=128, truncation=True)
""",
            after="""\
from transformers import BitsAndBytesConfig, AutoModelForCausalLM, AutoTokenizer
import os

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForCausalLM.from_pretrained("gpt2", quantization_config=BitsAndBytesConfig(load_in_8bit=True, llm_int8_threshold=6.0))
tokenizer = AutoTokenizer.from_pretrained("t5-small")
labels = tokenizer(text_target=targets, max_length=128, truncation=True)
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
        if original in self.ctx.state(TorchscriptLoads).calls:
            updated = self._tuple_call(original, updated)
        if loads and find_keyword(original, "resume_download") is not None:
            self.ctx.report(
                original,
                STACK_CALLS,
                "`resume_download=` dropped: huggingface_hub ignored it (downloads always resume).",
                subject="resume_download",
            )
            resume = find_keyword(updated, "resume_download")
            updated = updated.with_changes(args=tidy_args(without_args(list(updated.args), {resume})))
        if _is_upload_folder(func) and any(find_keyword(original, name) for name in MULTI_COMMIT_KEYWORDS):
            self.ctx.report(
                original,
                STACK_CALLS,
                "`multi_commits=` / `multi_commits_verbose=` dropped: huggingface_hub uploads the folder in one "
                "commit, to the same branch or pull request (`upload_large_folder` splits a very large one).",
                subject="multi_commits",
            )
            dropped = {find_keyword(updated, name) for name in MULTI_COMMIT_KEYWORDS} - {None}
            updated = updated.with_changes(args=tidy_args(without_args(list(updated.args), dropped)))
        if loads and any(find_keyword(original, name) is not None for name in QUANTIZE_KEYWORDS):
            updated = self._quantization(original, updated)
        if find_keyword(original, "pad_to_max_length") is not None and not OWN_PAD_TO_MAX_LENGTH.search(
            self.ctx.code
        ):
            updated = self._pad_to_max_length(original, updated)
        return updated

    def _pad_to_max_length(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """Transformers 4's reading of `pad_to_max_length=` (`_get_padding_truncation_strategies`): with
        padding=False (the default) it padded to max_length, or to the longest without one; max_length with
        padding=False turned truncation on, which padding= now given would not."""
        old = find_keyword(updated, "pad_to_max_length")
        flag = literal_value(old.value)
        padding = find_keyword(original, "padding")
        given = padding is not None and literal_value(padding.value) is not False
        max_length = find_keyword(original, "max_length")
        sized = max_length is not None and literal_value(max_length.value) is not None
        if given or flag is False or flag is None:  # ignored beside padding=; False pads nothing
            self.ctx.report(original, STACK_CALLS, "`pad_to_max_length=` dropped: it padded nothing here.")
            return updated.with_changes(args=tidy_args(without_args(list(updated.args), {old})))
        if any(arg.star for arg in original.args) or (flag is ... and dotted_name(old.value) is None):
            self.ctx.todo(
                original,
                STACK_CALLS,
                "`pad_to_max_length=` is ignored by Transformers 5 tokenizers (nothing is padded), and this call "
                "unpacks arguments or computes the flag",
                'pass padding="max_length" (and truncation=True with a max_length) instead',
                subject="pad_to_max_length",
            )
            return updated
        target = '"max_length"' if sized else "True"
        value = target if flag is True else f"{target} if {source_code(old.value)} else False"
        self.ctx.report(
            original, STACK_CALLS, f"`pad_to_max_length=` -> `padding={value}`.", subject="pad_to_max_length"
        )
        renamed = [old.with_changes(keyword=cst.Name("padding"), value=cst.parse_expression(value))]
        if sized and find_keyword(original, "truncation") is None:
            truncation = cst.Arg(keyword=cst.Name("truncation"), value=cst.Name("True"), equal=old.equal)
            # the comma before it carries the layout of the arguments' lines
            position = list(updated.args).index(old)
            before = updated.args[position - 1].comma if position else None
            comma = (
                before
                if isinstance(before, cst.Comma)
                else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
            renamed = [renamed[0].with_changes(comma=comma), truncation.with_changes(comma=old.comma)]
        # padding=False beside it: the new padding= replaces it
        false_padding = find_keyword(updated, "padding")
        args = without_args(list(updated.args), {false_padding} if false_padding is not None else set())
        args = [new for arg in args for new in (renamed if arg is old else [arg])]
        return updated.with_changes(args=tidy_args(args))

    def leave_With(self, original: cst.With, updated: cst.With):
        """`with tok.as_target_tokenizer(): labels = tok(targets, ...)` -> `labels = tok(text_target=targets,
        ...)`: the tokenizer's call encodes `text_target` in target mode, as the block did."""
        if not (
            len(original.items) == 1
            and original.items[0].asname is None
            and is_method_call(original.items[0].item, "as_target_tokenizer")
            and not original.items[0].item.args
        ):
            return updated
        tokenizer = source_code(original.items[0].item.func.value)
        calls = _target_calls(updated.body, tokenizer)
        if calls is None:
            self.ctx.todo(
                original,
                STACK_CALLS,
                "`as_target_tokenizer()` is gone from Transformers 5 tokenizers (AttributeError), and this block "
                f"uses `{tokenizer}` otherwise than in calls `{tokenizer}(texts, ...)` of one text each",
                f"tokenize the labels with `{tokenizer}(text_target=texts, ...)` and remove the with block",
                subject="as_target_tokenizer",
            )
            return updated
        self.ctx.report(
            original,
            STACK_CALLS,
            f"`with {tokenizer}.as_target_tokenizer():` -> `{tokenizer}(text_target=...)` in its block.",
            subject="as_target_tokenizer",
        )
        body = updated.body.visit(_TextTarget(calls))
        statements = (
            list(body.body)
            if isinstance(body, cst.IndentedBlock)
            else [cst.SimpleStatementLine(body=list(body.body))]
        )
        comment = (
            body.header.comment if isinstance(body, cst.IndentedBlock) else body.trailing_whitespace.comment
        )
        lines = [*updated.leading_lines, *([cst.EmptyLine(comment=comment)] if comment else [])]
        statements[0] = statements[0].with_changes(leading_lines=[*lines, *statements[0].leading_lines])
        return cst.FlattenSentinel(statements)

    def _quantization(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """`load_in_8bit=` / `load_in_4bit=` -> `quantization_config=BitsAndBytesConfig(...)`, as Transformers 4's
        from_pretrained built it: from them and the call's other BitsAndBytesConfig keywords."""
        given = [arg for arg in updated.args if arg.keyword and arg.keyword.value in QUANTIZE_KEYWORDS]
        switches = [arg for arg in given if literal_value(arg.value) is not False]
        if not switches:  # every one False: the load quantized nothing
            self.ctx.report(original, STACK_CALLS, "`load_in_*bit=False` dropped.", subject="load_in_bit")
            return updated.with_changes(args=tidy_args(without_args(list(updated.args), set(given))))
        conditions = [source_code(arg.value) for arg in switches if literal_value(arg.value) is not True]
        if (
            find_keyword(original, "quantization_config") is not None
            or any(arg.star for arg in original.args)
            or any(dotted_name(arg.value) is None for arg in switches if literal_value(arg.value) is not True)
        ):
            self.ctx.todo(
                original,
                STACK_CALLS,
                "`load_in_8bit=` / `load_in_4bit=` are gone from Transformers 5's from_pretrained (TypeError), and "
                "this call also passes quantization_config=, unpacks arguments or computes the switch",
                "pass quantization_config=BitsAndBytesConfig(load_in_8bit=..., ...) (from transformers import "
                "BitsAndBytesConfig) instead",
                subject="load_in_bit",
            )
            return updated
        moved = [arg for arg in updated.args if arg.keyword and arg.keyword.value in BITSANDBYTES_KEYWORDS]
        config = "BitsAndBytesConfig({})".format(
            ", ".join(f"{arg.keyword.value}={source_code(arg.value)}" for arg in moved)
        )
        if len(conditions) == len(switches):  # switched at run time: off, as before, when every switch is off
            config = f"{config} if {' or '.join(conditions)} else None"
        value = cst.parse_expression(config)
        self.ctx.add_import("transformers", "BitsAndBytesConfig")
        self.ctx.report(
            original,
            STACK_CALLS,
            f"`load_in_*bit=` -> `quantization_config={config}`.",
            subject="load_in_bit",
        )
        first = moved[0].with_changes(keyword=cst.Name("quantization_config"), value=value)
        args = [first if arg is moved[0] else arg for arg in updated.args]
        return updated.with_changes(args=tidy_args(without_args(args, set(moved[1:]))))

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

    def visit_Module(self, node: cst.Module) -> None:
        """The walk must reach every call of a model whose tuples are kept call by call (`TorchscriptLoads`)."""
        for name in self.ctx.state(TorchscriptLoads).names:
            self.ctx.watch(name)

    def _torchscript(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        keyword = find_keyword(updated, "torchscript")
        if keyword is None:
            return updated
        flag = literal_value(keyword.value)
        if flag is False:  # the default: dropping it changes nothing
            self.ctx.report(
                original, STACK_CALLS, "`torchscript=False` (the default) dropped.", subject="torchscript"
            )
            return updated.with_changes(args=tidy_args(without_args(list(updated.args), {keyword})))
        if flag is not True:
            self.ctx.todo(
                original,
                STACK_CALLS,
                "`torchscript=` made the model return tuples and untie its tied embeddings for torch.jit.trace when "
                "true, and Transformers 5 rejects it (TypeError); this load computes the flag",
                "delete it and, where it was true, pass return_dict=False to the calls of the model whose outputs "
                "are read as a tuple",
                subject="torchscript",
            )
            return updated
        if TRAINS.search(self.ctx.code):
            self.ctx.todo(
                original,
                STACK_CALLS,
                "`torchscript=True` made the model return tuples and untie its tied embeddings for "
                "torch.jit.trace, and Transformers 5 rejects it (TypeError); this file trains, where untied "
                "embeddings train apart",
                "delete it, pass return_dict=False if the code reads the outputs as a tuple, and compile with "
                'torch.compile(model, backend="neuron") instead of tracing',
                subject="torchscript",
            )
            return updated
        # Inference: the untied embeddings were copies of the same weights; what is left is the tuples.
        given = find_keyword(original, "return_dict")
        if given is not None and literal_value(given.value) is False:
            self.ctx.report(
                original,
                STACK_CALLS,
                "`torchscript=True` dropped beside `return_dict=False`.",
                subject="torchscript",
            )
            return updated.with_changes(args=tidy_args(without_args(list(updated.args), {keyword})))
        if given is None and model_type(self.ctx.module, original) is not None:
            self.ctx.report(
                original,
                STACK_CALLS,
                "`torchscript=True` -> `return_dict=False`: the model still returns tuples (its only effect on "
                "a model that is not trained: the tied embeddings it untied hold the same weights).",
                subject="torchscript",
            )
            args = [
                arg.with_changes(keyword=cst.Name("return_dict"), value=cst.Name("False"))
                if arg is keyword
                else arg
                for arg in updated.args
            ]
            return updated.with_changes(args=args)
        uses = self.ctx.state(TorchscriptLoads).loads.get(original)
        if uses is not None and uses.unfollowed is None:
            count = len(uses.calls)
            calls = f"{count} call{'s' if count != 1 else ''} of it now pass{'es' if count == 1 else ''}"
            kept = [f"{calls} return_dict=False"] if count else []
            if uses.traces:
                kept.append("where NM317 replaces its trace, the replacement returns tuples as the trace did")
            kept = kept or ["the file never calls it"]
            self.ctx.report(
                original,
                STACK_CALLS,
                f"`torchscript=True` dropped: the model's outputs stay tuples where this file reads them "
                f"({'; '.join(kept)}); `return_dict=False` at the load would break many architectures' forward "
                "in Transformers 5 (ViT, Llama, Swin, CLIP...).",
                subject="torchscript",
            )
            return updated.with_changes(args=tidy_args(without_args(list(updated.args), {keyword})))
        where = (
            f"the model goes on at `{uses.unfollowed}`, and how its outputs are read from there is not followed"
            if uses is not None
            else "this load also passes return_dict= other than False, which torchscript=True overrode"
        )
        self.ctx.todo(
            original,
            STACK_CALLS,
            "`torchscript=True` made the model return tuples (for torch.jit.trace), and Transformers 5 rejects "
            "it (TypeError); its equivalent, `return_dict=False` at the load, breaks many architectures in the "
            "pinned Transformers (ViT, GPT-2, Llama, Swin, CLIP...: AttributeError inside their forward), and "
            f"{where}",
            "delete it and pass return_dict=False to each call of the model whose outputs are read as a tuple "
            "(or read them by name)",
            subject="torchscript",
        )
        return updated

    def _tuple_call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """A call of a model loaded with `torchscript=True`: `return_dict=False` keeps the tuples it returned
        (Transformers 5's output decorators read it at the outermost call only, unlike the config's)."""
        if find_keyword(updated, "return_dict") is not None:
            return updated
        self.ctx.report(
            original,
            STACK_CALLS,
            "`return_dict=False` added: the model was loaded with `torchscript=True`, which made it return tuples.",
            subject="torchscript",
        )
        return updated.with_changes(
            args=with_appended(list(updated.args), [keyword_arg("return_dict", cst.Name("False"))])
        )


def _target_calls(body: cst.BaseSuite, tokenizer: str) -> set[cst.Call] | None:
    """The calls `tokenizer(text, ...)` in `body`, when every use of `tokenizer` there is such a call with one
    positional text and no text_target (and there is at least one); None otherwise."""
    calls, uses = set(), 0
    for node in descendants(body, (cst.Call, cst.Name, cst.Attribute)):
        if isinstance(node, cst.Call) and source_code(node.func) == tokenizer:
            positional = [arg for arg in node.args if arg.keyword is None]
            if (
                len(positional) != 1
                or positional[0].star
                or any(arg.keyword and arg.keyword.value in ("text", "text_target") for arg in node.args)
            ):
                return None
            calls.add(node)
        elif not isinstance(node, cst.Call) and source_code(node) == tokenizer:
            uses += 1
    return calls if calls and uses == len(calls) else None


class _TextTarget(cst.CSTTransformer):
    """The calls found by `_target_calls`, their text passed as `text_target=`."""

    def __init__(self, calls: set[cst.Call]) -> None:
        super().__init__()
        self.calls = calls

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if original not in self.calls:
            return updated
        args = [
            arg.with_changes(
                keyword=cst.Name("text_target"),
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
                ),
            )
            if arg.keyword is None
            else arg
            for arg in updated.args
        ]
        return updated.with_changes(args=args)


HANDLER = StackCalls


def _is_upload_folder(func: cst.BaseExpression) -> bool:
    """`api.upload_folder(...)` or huggingface_hub's function of that name."""
    return (isinstance(func, cst.Attribute) and func.attr.value == "upload_folder") or (
        isinstance(func, cst.Name) and func.value == "upload_folder"
    )
