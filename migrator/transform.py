"""One libcst pass that runs every rewrite family over a Python module.

Families do not each walk the tree: the dispatcher walks it once and, at every node, calls the
`visit_<Node>` / `leave_<Node>` handlers of each family in turn (Fixit's batching, applied to
transforms). One walk keeps every finding tied to a node of the original file and the cost to a single
traversal, whatever the number of families. One plain codegen of the input (`SourceMap`) gives the text of
each statement, so the walk skips those no family has a hint for, and the positions of the findings.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate

import libcst as cst

# Not re-exported by libcst: the base of its own PositionProvider codegen states (libcst 1.9, pinned).
from libcst._nodes.internal import CodegenState

from migrator.imports import ImportRequest, add_missing_imports, code_without_unused_imports
from migrator.rules import UNKNOWN_OPTIMUM_SYMBOL, Finding, Rule

TODO_PREFIX = "# TODO(neuron-migrate):"
# Module prefixes whose imports mark a file as something to migrate.
SOURCE_MODULES = (
    "optimum.neuron",
    "optimum.exporters.neuron",
    "torch_xla",
    "torch_neuronx",
    "neuronx_distributed",
)


def dotted_name(node: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, None for anything else (calls, subscripts...)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


class _Collector(cst.CSTVisitor):
    def __init__(self, kinds: type | tuple[type, ...]) -> None:
        super().__init__()
        self.kinds = kinds
        self.found: list = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.kinds):
            self.found.append(node)
        return True


def descendants(node: cst.CSTNode, kinds: type | tuple[type, ...]) -> list:
    """Nodes of the given types in `node` (itself included), in source order: `m.findall` for a bare
    node type, without a matcher call per node; several types gather in one walk."""
    collector = _Collector(kinds)
    node.visit(collector)
    return collector.found


def is_method_call(node: cst.CSTNode, method: str) -> bool:
    """`<anything>.<method>(...)`, e.g. any `from_pretrained` call."""
    return (
        isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == method
    )


def method_calls(node: cst.CSTNode, method: str) -> list[cst.Call]:
    """The `<anything>.<method>(...)` calls in `node` (itself included), in source order."""
    return [call for call in descendants(node, cst.Call) if is_method_call(call, method)]


def source_code(node: cst.CSTNode) -> str:
    """The code of one node, printed on its own with libcst's default module settings."""
    return cst.Module([]).code_for_node(node)


def literal_value(node: cst.BaseExpression):
    """Python value of a literal (str, int, bool, None); `...` (Ellipsis) when it is not a literal."""
    if isinstance(node, (cst.SimpleString, cst.Integer)):
        return node.evaluated_value
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    return ...


@dataclass
class _Report:
    node: cst.CSTNode
    rule: Rule
    message: str
    fixed: bool


@dataclass(frozen=True)
class SourceIndex:
    """Every identifier and string constant of the input file, read from its Python AST.

    Lets a family answer a whole-file question ("does the script use `init_process_group`?") without
    walking the libcst tree again: `ast` parses and walks a file many times faster than libcst.
    """

    identifiers: frozenset[str]  # names, attributes, keywords, parameters, definitions, imports
    strings: frozenset[str]  # string literals, f-string text included

    @classmethod
    def of(cls, code: str) -> SourceIndex:
        identifiers: set[str] = set()
        strings: set[str] = set()
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Name):
                identifiers.add(node.id)
            elif isinstance(node, ast.Attribute):
                identifiers.add(node.attr)
            elif isinstance(node, ast.Constant):
                if isinstance(node.value, str):
                    strings.add(node.value)
            elif isinstance(node, (ast.keyword, ast.arg)):
                identifiers.add(node.arg or "")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                identifiers.add(node.name)
            elif isinstance(node, ast.alias):
                identifiers.update(node.name.split("."))
                identifiers.add(node.asname or "")
            elif isinstance(node, ast.ImportFrom):
                identifiers.update((node.module or "").split("."))
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                identifiers.update(node.names)
            elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
                identifiers.add(node.name or "")
            elif isinstance(node, ast.MatchMapping):
                identifiers.add(node.rest or "")
            elif isinstance(node, ast.MatchClass):
                identifiers.update(node.kwd_attrs)
        identifiers.discard("")
        return cls(frozenset(identifiers), frozenset(strings))


class _TokenSpans(CodegenState):
    """Codegen that notes the range of tokens every node prints, with PositionProvider's rules (a node's
    syntactic range when it records one, else the range including its own whitespace), and the whole
    range of each statement (decorators and leading comments included)."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.spans: dict[cst.CSTNode, tuple[int, int]] = {}
        self.statements: dict[cst.CSTNode, tuple[int, int]] = {}
        self.open: list[int] = []
        self.popped: list[str] = []

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.open.append(len(self.tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        span = (self.open.pop(), len(self.tokens))
        if node not in self.spans:
            self.spans[node] = span
        if isinstance(node, _STATEMENT_TYPES):
            self.statements[node] = span

    @contextmanager
    def record_syntactic_position(self, node, *, start_node=None, end_node=None) -> Iterator[None]:
        start = len(self.tokens)
        yield
        end = len(self.tokens)
        self.spans[node] = (
            self.spans[start_node][0] if start_node is not None else start,
            self.spans[end_node][1] if end_node is not None else end,
        )

    def pop_trailing_newline(self) -> None:
        # Kept aside, not dropped: the token indices already noted must still map to offsets.
        if self.tokens:
            self.popped.append(self.tokens.pop())


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

    def statement_span(self, node: cst.CSTNode) -> tuple[int, int] | None:
        """Character offsets (start, end) of a statement of the unmodified module, all its lines included."""
        tokens = self._statements.get(node)
        return (self._offsets[tokens[0]], self._offsets[tokens[1]]) if tokens else None

    def position(self, node: cst.CSTNode) -> tuple[int, int] | None:
        """1-based line and column where a node of the unmodified module starts."""
        tokens = self._spans.get(node)
        if tokens is None:
            return None
        start = self._offsets[tokens[0]]
        line = bisect_right(self._line_starts, start)
        return line, start - self._line_starts[line - 1] + 1


@dataclass
class FileContext:
    """What the families share while one file is rewritten: imports seen, findings, import edits."""

    module: cst.Module  # the input, unmodified
    code: str  # its text
    imported: dict[str, str] = field(default_factory=dict)  # local name -> qualified name
    reports: list[_Report] = field(default_factory=list)
    pending_todos: list[str] = field(default_factory=list)
    imports_to_add: list[ImportRequest] = field(default_factory=list)
    imports_to_remove: list[ImportRequest] = field(default_factory=list)
    # Strings that send the walk into a statement mentioning one; None: every statement is walked.
    hints: set[str] | None = None
    _hint_pattern: re.Pattern[str] | None = None

    @cached_property
    def source(self) -> SourceIndex:
        return SourceIndex.of(self.code)

    @cached_property
    def source_map(self) -> SourceMap:
        return SourceMap(self.module, self.code)

    def watch(self, name: str) -> None:
        """From here on, walk into the statements that mention `name` (a family started tracking it, and
        must see it reassigned or used)."""
        if self.hints is not None and name not in self.hints:
            self.hints.add(name)
            self._hint_pattern = None

    def walk_into(self, statement: cst.CSTNode) -> bool:
        """Whether the walk must descend into a statement of the unmodified module."""
        if self.hints is None:
            return True
        span = self.source_map.statement_span(statement)
        if span is None:
            return True
        if self._hint_pattern is None:
            self._hint_pattern = re.compile("|".join(re.escape(hint) for hint in sorted(self.hints)))
        return self._hint_pattern.search(self.code, *span) is not None

    def qualified(self, node: cst.BaseExpression) -> str | None:
        """Qualified name of a Name/Attribute chain through the imports seen so far.

        `xm.mark_step` with `import torch_xla.core.xla_model as xm` gives
        `torch_xla.core.xla_model.mark_step`; names that were not imported come back as written.
        """
        name = dotted_name(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        base = self.imported.get(head)
        if base is None:
            return name
        return f"{base}.{rest}" if rest else base

    def report(
        self, node: cst.CSTNode, rule: Rule, message: str | None = None, *, fixed: bool = True
    ) -> None:
        """Record a finding on an ORIGINAL node (positions are looked up on the unmodified tree)."""
        self.reports.append(_Report(node, rule, message or rule.action, fixed))

    def todo(self, node: cst.CSTNode, rule: Rule, message: str | None = None) -> None:
        """Record a manual finding and put a TODO comment above the statement that holds `node`."""
        text = message or rule.action
        self.report(node, rule, text, fixed=False)
        self.pending_todos.append(f"{TODO_PREFIX} {rule.code} {text}")

    def add_import(self, module: str, obj: str | None = None, asname: str | None = None) -> None:
        self.imports_to_add.append((module, obj, asname))

    def remove_import(self, module: str, obj: str | None = None, asname: str | None = None) -> None:
        """Drop an import if nothing uses it any more once the rewrite is done."""
        self.imports_to_remove.append((module, obj, asname))


class Family:
    """A family of rewrites. Subclasses define `visit_<Node>(node)` and/or
    `leave_<Node>(original, updated) -> node` like a libcst transformer (field handlers such as
    `visit_Call_func` are not dispatched), plus:

    - `SYMBOLS`: qualified names of the optimum-neuron/XLA symbols the family handles (rewrites or
      marks with a TODO); an imported source symbol no family claims is reported as NM901.
    - `TRIGGERS`: identifiers of which at least one must appear in a file for the family to have
      anything to do there (checked on the file's AST index); a family without triggers always runs.
    - `HINTS`: strings of which one appears in the code of every statement the family acts on or learns
      from, or in the qualified name of an import the statement uses (then the import's local name
      counts as a hint). When every family at work in a file has hints, the walk does not descend into
      statements without any. None (the default): the family needs to see every node.
    """

    name: str = ""
    SYMBOLS: frozenset[str] = frozenset()
    TRIGGERS: frozenset[str] = frozenset()
    HINTS: frozenset[str] | None = None

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx


_STATEMENT_TYPES = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


class MigrationTransformer(cst.CSTTransformer):
    """Dispatches every node to the families' handlers, in family order."""

    def __init__(self, ctx: FileContext, families: Iterable[type[Family]]) -> None:
        super().__init__()
        self.ctx = ctx
        families = list(families)
        # A family with nothing to do in this file costs a handler call per node: leave it out.
        identifiers = ctx.source.identifiers
        self.families = [
            family(ctx)
            for family in families
            if not family.TRIGGERS or not family.TRIGGERS.isdisjoint(identifiers)
        ]
        self.claimed = frozenset().union(*(family.SYMBOLS for family in families))
        self._visitors: dict[str, list] = {}
        self._leavers: dict[str, list] = {}
        # TODOs queued while a statement is walked are its own (a TODO about an `if` test belongs to the
        # `if`, not to the first statement of its body); a removed statement's go to the next one.
        self._todo_marks: list[int] = []
        self._todo_carry: int | None = None
        self._header_comments: frozenset[str] = frozenset()  # the first statement's comments live here
        self._first_statement: cst.CSTNode | None = None
        if all(family.HINTS is not None for family in self.families):
            # Imports are always visited: they are recorded for `qualified` and checked for NM901.
            self._static_hints = frozenset({"import"}).union(*(family.HINTS for family in self.families))
            ctx.hints = set(self._static_hints)

    def _handlers(self, cache: dict[str, list], prefix: str, node_type: str) -> list:
        handlers = cache.get(node_type)
        if handlers is None:
            handlers = [
                getattr(family, prefix + node_type)
                for family in self.families
                if hasattr(family, prefix + node_type)
            ]
            cache[node_type] = handlers
        return handlers

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            self._record_import(node)
        for handler in self._handlers(self._visitors, "visit_", type(node).__name__):
            handler(node)
        if isinstance(node, cst.Module):
            self._header_comments = frozenset(line.comment.value for line in node.header if line.comment)
            self._first_statement = node.body[0] if node.body else None
        if isinstance(node, _STATEMENT_TYPES):
            pending = len(self.ctx.pending_todos)
            self._todo_marks.append(pending if self._todo_carry is None else min(pending, self._todo_carry))
            self._todo_carry = None
            # The statement's own handlers run (comments of a removed neighbour, scopes), its insides
            # only when a hint appears in its code.
            return self.ctx.walk_into(node)
        return True

    # No family handles a single field (`visit_Call_func`...): skip libcst's two lookups per field.
    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        pass

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):
        result = updated
        for handler in self._handlers(self._leavers, "leave_", type(original).__name__):
            result = handler(original, result)
            if not isinstance(result, cst.CSTNode):  # removed or flattened: later families see nothing
                break
        if isinstance(original, _STATEMENT_TYPES):
            mark = self._todo_marks.pop()
            if len(self.ctx.pending_todos) > mark:
                header = self._header_comments if original is self._first_statement else frozenset()
                result = self._attach_todos(result, mark, header)
        return result

    def _attach_todos(self, result, mark: int, header: frozenset[str]):
        """Put the TODOs queued since `mark` above the statement (innermost statement leaves first)."""
        if isinstance(result, cst.FlattenSentinel):
            first, *rest = result.nodes
            return cst.FlattenSentinel([self._attach_todos(first, mark, header), *rest])
        if not isinstance(result, _STATEMENT_TYPES):  # statement removed: the next one carries the TODO
            self._todo_carry = mark
            return result
        existing = header | {line.comment.value for line in result.leading_lines if line.comment}
        new_lines = [
            cst.EmptyLine(comment=cst.Comment(text))
            for text in dict.fromkeys(self.ctx.pending_todos[mark:])
            if text not in existing
        ]
        del self.ctx.pending_todos[mark:]
        if not new_lines:
            return result
        return result.with_changes(leading_lines=[*result.leading_lines, *new_lines])

    def _record_import(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = dotted_name(alias.name)
                if alias.asname:
                    self.ctx.imported[alias.asname.name.value] = full
                    self._note_hint(alias.asname.name.value, full)
                else:  # `import a.b` binds `a`
                    head = full.split(".")[0]
                    self.ctx.imported[head] = head
            return
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted_name(node.module)
        for alias in node.names:
            name = alias.name.value
            local = alias.asname.name.value if alias.asname else name
            qualified = f"{module}.{name}"
            self.ctx.imported[local] = qualified
            self._note_hint(local, qualified)
            if module.startswith(SOURCE_MODULES) and not self._claimed(qualified):
                self.ctx.todo(
                    alias,
                    UNKNOWN_OPTIMUM_SYMBOL,
                    f"`{qualified}` has no rewrite rule; replace it with the plain Transformers/TRL/PEFT/"
                    'Diffusers API on device "neuron" by hand.',
                )

    def _note_hint(self, local: str, qualified: str) -> None:
        """`local` names a hinted import (`from os import environ as env`): it is a hint too."""
        if self.ctx.hints is not None and any(hint in qualified for hint in self._static_hints):
            self.ctx.watch(local)

    def _claimed(self, qualified: str) -> bool:
        # A family may claim a whole module (e.g. "torch_xla.core.xla_model") or one symbol.
        return any(qualified == name or qualified.startswith(name + ".") for name in self.claimed)


@dataclass
class PythonResult:
    code: str
    findings: list[Finding]


def migrate_module(code: str, families: Iterable[type[Family]]) -> PythonResult:
    """Parse a module and run all families over it; return the new code and findings placed on the input.

    Raises libcst's ParserSyntaxError when the code does not parse.
    """
    module = cst.parse_module(code)
    ctx = FileContext(module, code)
    transformer = MigrationTransformer(ctx, families)
    updated = module.visit(transformer)
    if ctx.imports_to_add:
        updated = add_missing_imports(updated, ctx.imports_to_add)
    if ctx.imports_to_remove:
        new_code = code_without_unused_imports(updated, ctx.imports_to_remove)
    else:
        new_code = updated.code
    return PythonResult(new_code, _place(ctx))


def _place(ctx: FileContext) -> list[Finding]:
    """Findings at the line and column of the nodes they were reported on (nodes of the input tree)."""
    if not ctx.reports:
        return []
    findings = []
    for report in ctx.reports:
        line, column = ctx.source_map.position(report.node) or (1, 1)
        findings.append(Finding(report.rule, line, column, report.message, report.fixed))
    return sorted(findings, key=lambda f: (f.line, f.column, f.code))


__all__ = [
    "Family",
    "FileContext",
    "SourceIndex",
    "MigrationTransformer",
    "PythonResult",
    "descendants",
    "dotted_name",
    "is_method_call",
    "literal_value",
    "method_calls",
    "migrate_module",
    "source_code",
]
