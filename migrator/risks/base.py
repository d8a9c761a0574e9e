"""What every compile-risk rule shares: the `Risk` it finds, the advice texts, and the Python facts several
rules read (tokenizer calls, trainers, fixed-length padding)."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from migrator.rules import Rule
from migrator.target_stack import component
from usercode.python import PythonModule, callee, is_constant, keyword, string
from usercode.reading import Code

PAD_BATCHES = (
    'Pad every batch to a fixed length: `padding="max_length"` when tokenizing, or `pad_to_multiple_of=128` '
    f"in the data collator. With TRL >= {component('trl').version} keep `pad_to_multiple_of` at its default and "
    '`padding_free=False` (`packing_strategy="wrapped"` when packing).'
)
STATIC_SHAPES = (
    'Remove dynamic shapes: `torch.compile(backend="neuron", fullgraph=True, dynamic=False)`, no '
    "`mark_dynamic()`, no dynamic batch sizes; pad inputs to fixed shapes."
)
# TRL trainers pad to a multiple of 128 on neuron themselves (TRL >= 1.16, pad_to_multiple_of="auto").
TRL_TRAINERS = frozenset(
    {"SFTTrainer", "NeuronSFTTrainer", "DPOTrainer", "ORPOTrainer", "NeuronORPOTrainer", "GRPOTrainer"}
)
_TOKENIZER_METHODS = {"encode", "encode_plus", "batch_encode_plus", "apply_chat_template"}


@dataclass(frozen=True)
class Risk:
    rule: Rule
    line: int
    cell: int | None  # notebooks: 1-based number among the code cells
    detail: str  # what was found, in a few words


def at(rule: Rule, module: PythonModule, node: ast.AST, detail: str) -> Risk:
    return Risk(rule, module.line(node), module.cell, detail)


def literal_arguments(
    code: Code,
    rule: Rule,
    argument: str,
    value: object,
    detail: Callable[[str], str],
    called=lambda name: True,
) -> Iterator[Risk]:
    """A risk at every call given `argument=value` (the literal True, False or None) whose name `called`
    accepts; `detail(name)` says what was found."""
    for module in code.python:
        for call in module.calls:
            name = callee(call)
            if called(name) and is_constant(keyword(call, argument), value):
                yield at(rule, module, call, detail(name))


def tokenizer_calls(module: PythonModule) -> list[ast.Call]:
    """Calls that tokenize text (`tokenizer(...)`, `tok.encode(...)`, `apply_chat_template(...)`)."""
    return [call for call in module.calls if _is_tokenizer_call(call, callee(call))]


def _is_tokenizer_call(call: ast.Call, name: str) -> bool:
    if is_constant(keyword(call, "tokenize"), False):
        return False  # apply_chat_template(..., tokenize=False) returns text
    if name in _TOKENIZER_METHODS:
        return True
    return isinstance(call.func, ast.Name) and ("tokenizer" in name.lower() or name in {"tok", "processor"})


def pads_to_fixed_length(call: ast.Call) -> bool:
    padding = keyword(call, "padding")
    multiple = keyword(call, "pad_to_multiple_of")
    return string(padding) == "max_length" or (multiple is not None and not is_constant(multiple, None))
