"""Where things are in the input file, computed once per file: `SourceIndex` (every identifier and string,
from Python's AST) and `SourceMap` (the character range of every node, from one plain codegen pass).

The dispatcher uses both to skip statements no rule has a hint for, and to place findings on the input.
`module_code` prints a module reusing the text already printed for its unchanged top-level statements.
"""

from __future__ import annotations

import ast
import inspect
import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import NamedTuple

import libcst as cst

# Not re-exported by libcst: the base of its own PositionProvider codegen states (libcst 1.9, pinned).
from libcst._nodes.internal import CodegenState

from usercode.python import ast_nodes

STATEMENT_TYPES = (cst.SimpleStatementLine, cst.BaseCompoundStatement)
# libcst's concrete node classes, and its statement classes: `type(node) in NODE_CLASSES` spares a walk an
# ABC isinstance check per node.
NODE_CLASSES = frozenset(
    kind
    for kind in vars(cst).values()
    if isinstance(kind, type) and issubclass(kind, cst.CSTNode) and not inspect.isabstract(kind)
)
STATEMENT_CLASSES = frozenset(kind for kind in NODE_CLASSES if issubclass(kind, STATEMENT_TYPES))
# Whitespace, comments, operators, punctuation and brackets: 60 % of a module's nodes, holding only each other.
TOKEN_CLASSES = frozenset(
    kind
    for kind in NODE_CLASSES
    if kind.__module__ in ("libcst._nodes.whitespace", "libcst._nodes.op")
    or kind.__name__.startswith(("Left", "Right"))
)


@dataclass(frozen=True)
class SourceIndex:
    """Every identifier and string constant of the input file, read from its Python AST.

    Lets a family answer a whole-file question ("does the script use `init_process_group`?") without
    walking the libcst tree again: `ast` parses and walks a file many times faster than libcst.
    """

    identifiers: frozenset[str]  # names, attributes, keywords, parameters, definitions, imports
    strings: frozenset[str]  # string literals, f-string text included
    # (name, string) for each name or attribute compared to a string literal (`device == "xla"`,
    # `mode in ("xla", "cuda")`): a rule that rewrites the string a variable holds must see these too.
    compared: frozenset[tuple[str, str]] = frozenset()

    @classmethod
    def of(cls, code: str, tree: ast.Module | None = None) -> SourceIndex:
        """`tree`: Python's parse of `code`, when the caller has it."""
        identifiers: set[str] = set()
        strings: set[str] = set()
        compared: set[tuple[str, str]] = set()
        for node in ast_nodes(tree or ast.parse(code)):
            kind = type(node)  # the commonest kinds first, by identity: most nodes are none of these
            if kind is ast.Name:
                identifiers.add(node.id)
            elif kind is ast.Attribute:
                identifiers.add(node.attr)
            elif kind is ast.Constant:
                if isinstance(node.value, str):
                    strings.add(node.value)
            elif kind not in _OTHER_KINDS:
                continue
            elif kind is ast.Compare or (
                kind is ast.Call and isinstance(node.func, ast.Attribute) and node.func.attr in _STRING_TESTS
            ):
                compared.update(_compared(node))
            elif kind is ast.keyword or kind is ast.arg:
                identifiers.add(node.arg or "")
            elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.ClassDef:
                identifiers.add(node.name)
            elif kind is ast.alias:
                identifiers.update(node.name.split("."))
                identifiers.add(node.asname or "")
            elif kind is ast.ImportFrom:
                identifiers.update((node.module or "").split("."))
            elif kind is ast.Global or kind is ast.Nonlocal:
                identifiers.update(node.names)
            elif kind is ast.ExceptHandler or kind is ast.MatchAs or kind is ast.MatchStar:
                identifiers.add(node.name or "")
            elif kind is ast.MatchMapping:
                identifiers.add(node.rest or "")
            elif kind is ast.MatchClass:
                identifiers.update(node.kwd_attrs)
        identifiers.discard("")
        return cls(frozenset(identifiers), frozenset(strings), frozenset(compared))


# String methods that compare the string they are called on with their argument.
_STRING_TESTS = frozenset({"startswith", "endswith", "__eq__"})
# The other kinds of node `SourceIndex.of` reads something from.
_OTHER_KINDS = frozenset(
    {
        ast.Compare,
        ast.Call,
        ast.keyword,
        ast.arg,
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.ClassDef,
        ast.alias,
        ast.ImportFrom,
        ast.Global,
        ast.Nonlocal,
        ast.ExceptHandler,
        ast.MatchAs,
        ast.MatchStar,
        ast.MatchMapping,
        ast.MatchClass,
    }
)


def _compared(node: ast.Compare | ast.Call) -> set[tuple[str, str]]:
    """`device == "xla"`, `args.device in ("xla", "cuda")`, `str(value).lower() == "xla"`, `device.startswith("xla")`."""
    if isinstance(node, ast.Call):  # a string test method called on the value
        name = _compared_name(node.func.value)
        literal = node.args[0] if len(node.args) == 1 else None
        if name and isinstance(literal, ast.Constant) and isinstance(literal.value, str):
            return {(name, literal.value)}
        return set()
    names: list[str] = []
    literals: list[str] = []
    for operand in (node.left, *node.comparators):
        name = _compared_name(operand)
        if name:
            names.append(name)
        for value in operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else (operand,):
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                literals.append(value.value)
    return {(name, literal) for name in names for literal in literals}


def _compared_name(operand: ast.expr) -> str | None:
    """The variable (last part of an attribute) an operand reads, through string methods (`value.lower()`) and
    `str(value)`."""
    while isinstance(operand, ast.Call):
        if isinstance(operand.func, ast.Attribute):
            operand = operand.func.value
        elif isinstance(operand.func, ast.Name) and operand.func.id == "str" and len(operand.args) == 1:
            operand = operand.args[0]
        else:
            break
    if isinstance(operand, ast.Name):
        return operand.id
    return operand.attr if isinstance(operand, ast.Attribute) else None


class _TokenSpans(CodegenState):
    """Codegen that notes the range of tokens every node prints, with PositionProvider's rules (a node's
    syntactic range when it records one, else the range including its own whitespace), and the whole
    range of each statement (decorators and leading comments included)."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        # By node id (the module is held while they are read): CSTNode's own hash is a Python call per node.
        self.spans: dict[int, tuple[int, int]] = {}
        self.statements: dict[cst.CSTNode, tuple[int, int]] = {}
        self.open: list[int] = []
        self.popped: list[str] = []

    # Tokens get no range (no finding is placed on one, and they are most of the nodes printed), but those
    # that end an import's syntactic range.
    def before_codegen(self, node: cst.CSTNode) -> None:
        if type(node) not in _UNPLACED:
            self.open.append(len(self.tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        if type(node) in _UNPLACED:
            return
        span = (self.open.pop(), len(self.tokens))
        self.spans.setdefault(id(node), span)  # a syntactic range noted while it printed stays
        if type(node) in STATEMENT_CLASSES:
            self.statements[node] = span

    def record_syntactic_position(self, node, *, start_node=None, end_node=None) -> _SyntacticSpan:
        return _SyntacticSpan(self, node, start_node, end_node)

    def pop_trailing_newline(self) -> None:
        # Kept aside, not dropped: the token indices already noted must still map to offsets.
        if self.tokens:
            self.popped.append(self.tokens.pop())


class _SyntacticSpan:
    """`with state.record_syntactic_position(node)`: notes the node's syntactic range (a plain class: libcst
    enters one per node it prints, and a generator context manager costs several times more)."""

    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(self, state: _TokenSpans, node, start_node, end_node) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.start = len(self.state.tokens)

    def __exit__(self, *exc_info) -> None:
        spans = self.state.spans
        spans[id(self.node)] = (
            spans[id(self.start_node)][0] if self.start_node is not None else self.start,
            spans[id(self.end_node)][1] if self.end_node is not None else len(self.state.tokens),
        )


class PlainCodegen(CodegenState):
    """libcst's codegen state, less its per-node context manager for positions nobody reads (a generator
    context manager entered for every expression printed: a fifth of a print's time)."""

    def record_syntactic_position(self, node, *, start_node=None, end_node=None) -> _NoSpan:
        return _NO_SPAN


class _NoSpan:
    __slots__ = ()

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc_info) -> None:
        pass


_NO_SPAN = _NoSpan()

_UNPLACED = TOKEN_CLASSES - {cst.RightParen, cst.ImportStar}

_NEWLINE = re.compile(r"\r\n?|\n")


class SourceMap:
    """Where each node of the unmodified module lies in its code, from one plain codegen pass.

    Gives the character range of a node (the dispatcher searches statements for hints there instead of
    printing each one again) and the line and column of a finding, as libcst's PositionProvider would,
    at a fraction of its cost (no position object per token and node).
    """

    def __init__(self, module: cst.Module, code: str) -> None:
        state = _TokenSpans(module)
        module._codegen(state)
        self._spans = state.spans
        self._statements = state.statements
        self._offsets = [0, *accumulate(len(token) for token in [*state.tokens, *state.popped])]
        self._line_starts = [0, *(match.end() for match in _NEWLINE.finditer(code))]
        self._printed = "".join([*state.tokens, *state.popped])
        self._module = module

    def top_level_texts(self) -> dict[cst.CSTNode, str]:
        """The printed text of each top-level statement of the unmodified module (`module_code`'s `known`)."""
        texts = {}
        for statement in self._module.body:
            start, end = self._statements[statement]
            texts[statement] = self._printed[self._offsets[start] : self._offsets[end]]
        return texts

    def statement_span(self, node: cst.CSTNode) -> tuple[int, int] | None:
        """Character offsets (start, end) of a statement of the unmodified module, all its lines included."""
        tokens = self._statements.get(node)
        return (self._offsets[tokens[0]], self._offsets[tokens[1]]) if tokens else None

    def position(self, node: cst.CSTNode) -> tuple[int, int] | None:
        """1-based line and column where a node of the unmodified module starts (None for most whitespace and
        operator nodes, and for a node not in the module)."""
        tokens = self._spans.get(id(node))
        if tokens is None:
            return None
        start = self._offsets[tokens[0]]
        line = bisect_right(self._line_starts, start)
        return line, start - self._line_starts[line - 1] + 1


class PrintedModule(NamedTuple):
    code: str
    statements: dict[cst.CSTNode, str]  # the text of each top-level statement, in order
    header_length: int  # characters before the first statement (the module's leading comment lines)

    def statement_lines(self) -> Iterator[tuple[cst.CSTNode, int, int]]:
        """Each top-level statement, the 1-based line where its text starts and the one after it ends."""
        first = len(_NEWLINE.findall(self.code, 0, self.header_length)) + 1
        for statement, text in self.statements.items():
            after = first + len(_NEWLINE.findall(text))
            yield statement, first, after
            first = after


def module_code(module: cst.Module, known: dict[cst.CSTNode, str] | None = None) -> PrintedModule:
    """`module.code`, each top-level statement found in `known` written as its text there, and the text of
    each top-level statement. A statement at the top level prints the same wherever it stands (no enclosing
    indentation), so a transform's unchanged statements (the same objects) need not be printed again: most
    of a large file a migration barely touches."""
    if not module.has_trailing_newline:  # its last newline is dropped: printed the usual way
        return PrintedModule(module.code, {}, 0)
    known = known or {}
    state = PlainCodegen(default_indent=module.default_indent, default_newline=module.default_newline)
    tokens = state.tokens
    for line in module.header:
        line._codegen(state)
    header_length = sum(map(len, tokens))
    texts = {}
    for statement in module.body:
        text = known.get(statement)
        if text is None:
            start = len(tokens)
            statement._codegen(state)
            text = "".join(tokens[start:])
            del tokens[start:]
        tokens.append(text)
        texts[statement] = text
    for line in module.footer:
        line._codegen(state)
    if not tokens:  # nothing in the module: its trailing newline alone, as libcst prints it
        tokens.append(state.default_newline)
    return PrintedModule("".join(tokens), texts, header_length)
