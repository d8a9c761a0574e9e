"""The shared core of the Python rules: one libcst walk that runs every rule's handler over a module.

Rules do not each walk the tree: the dispatcher walks it once and, at every node, calls the
`visit_<Node>` / `leave_<Node>` methods of each active handler in registry order (Fixit's batching,
applied to transforms). One walk keeps every finding tied to a node of the original file and the cost
to a single traversal, whatever the number of rules. One plain codegen of the input (`SourceMap`) gives
the text of each statement, so the walk skips those no rule has a hint for, and the positions of the
findings. The dispatcher also does what every rule needs after a change: it keeps the comments of
removed statements and puts TODO comments above the statements that hold manual findings.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

import libcst as cst

from migrator.cst_helpers import (
    TOKEN_CLASSES,
    CommentKeeper,
    block_comments,
    dotted_name,
    shows,
    transform,
    without_empty_branches,
    without_empty_try,
)
from migrator.imports import ImportRequest, add_missing_imports, code_without_unused_imports
from migrator.rules import Finding, Rule, also_on
from migrator.source_map import STATEMENT_CLASSES, STATEMENT_TYPES, SourceIndex, SourceMap, module_code

TODO_PREFIX = "# TODO(neuron-migrate):"
# How a notebook's Python cells are marked once joined into one module (`migrator.notebook`).
CELL_MARKER_PREFIX = "__neuron_migrate_cell_"
# Module prefixes whose imports mark a file as something to migrate.
SOURCE_MODULES = (
    "optimum.neuron",
    "optimum.exporters.neuron",
    "torch_xla",
    "torch_neuronx",
    "neuronx_distributed",
)
# Nodes whose removal hands their comment lines on, and which take the comments of a removed neighbour.
_COMMENT_HOLDERS = STATEMENT_CLASSES | {cst.IndentedBlock, cst.Module}

State = TypeVar("State")


@dataclass
class _Report:
    node: cst.CSTNode
    rule: Rule
    message: str
    fixed: bool
    why: str | None = None
    action: str | None = None
    subject: str | None = None
    also: list[cst.CSTNode] = field(default_factory=list)  # the same TODO's other nodes in its block


@dataclass
class FileContext:
    """What the rules share while one file is rewritten: imports seen, the statement being walked,
    per-file state of each family (created once, on first use), findings and import edits."""

    module: cst.Module  # the input, unmodified
    code: str  # its text
    # Every rule by its code (`migrator.registry.RULES`): a handler reports another module's code through
    # `rule(code)`, so that no rule module imports another.
    rules: Mapping[str, Rule] = field(default_factory=dict)
    handlers: tuple[type[Handler], ...] = ()  # the handlers of this walk, in dispatch order
    imported: dict[str, str] = field(default_factory=dict)  # local name -> qualified name
    # The imports the module makes outside functions and classes, wherever they stand (under `if __name__ ==
    # "__main__":`, in a `try`, after the functions): bound by the time a function runs (see `qualified`).
    module_imports: dict[str, str] = field(default_factory=dict)
    functions: list[cst.FunctionDef] = field(default_factory=list)  # the functions the walk is inside
    # The module-level function or class the walk is in, else the notebook cell (its marker statement): the
    # block where one TODO stands for a decision repeated in it.
    definition: cst.FunctionDef | cst.ClassDef | None = None
    cell: cst.CSTNode | None = None
    # The calls the walk is inside whose arguments are only shown (`print(...)`, `logger.info(...)`): a value
    # read there decides nothing (see `cst_helpers.shows`).
    shown: list[cst.Call] = field(default_factory=list)
    # The quotes of the f-strings the walk is inside: a string a rule writes there must use another (before
    # Python 3.12, an f-string's expressions cannot hold its own quote).
    fstring_quotes: list[str] = field(default_factory=list)
    # Statement -> the next statement of its block (the block itself after its last), for the blocks the walk
    # has entered: what a rule deciding on a run of statements (an import block) reads ahead.
    next_statement: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)
    # Qualified names (or module prefixes) some rule handles; an imported source symbol outside is NM901.
    claimed: frozenset[str] = frozenset()
    line: cst.SimpleStatementLine | None = None  # the simple statement the walk is in (original node)
    reports: list[_Report] = field(default_factory=list)
    pending_todos: list[str] = field(default_factory=list)
    imports_to_add: list[ImportRequest] = field(default_factory=list)
    imports_to_remove: list[ImportRequest] = field(default_factory=list)
    # Strings that send the walk into a statement mentioning one; None: every statement is walked.
    hints: set[str] | None = None
    # The code runs in a notebook kernel: one process, which torchrun cannot start (see `launch`).
    notebook: bool = False
    # Statements a rule inserts before the statement it rewrites: that statement's TODOs go below them.
    inserted_before: set[cst.CSTNode] = field(default_factory=set)
    _hint_pattern: re.Pattern[str] | None = None
    _states: dict[type, object] = field(default_factory=dict)
    _todo_blocks: dict[tuple[cst.CSTNode | None, str], _Report] = field(default_factory=dict)
    tree: ast.Module | None = None  # Python's parse of `code`, when the caller made one

    @cached_property
    def source(self) -> SourceIndex:
        return SourceIndex.of(self.code, self.tree)

    @cached_property
    def source_map(self) -> SourceMap:
        return SourceMap(self.module, self.code)

    def rule(self, rule: Rule | str) -> Rule:
        """The rule `rule` names (`"NM318"`, defined in the module named after it), or `rule` itself."""
        return self.rules[rule] if isinstance(rule, str) else rule

    def state(self, kind: type[State]) -> State:
        """The file's one instance of a family's state (`kind(ctx)`), shared by that family's rules."""
        found = self._states.get(kind)
        if found is None:
            found = self._states[kind] = kind(self)
        return found

    def free_quote(self) -> str | None:
        """A quote a string written at the walk's position may use: one no enclosing f-string uses."""
        return next((q for q in ('"', "'") if not any(q in around for around in self.fstring_quotes)), None)

    def watch(self, name: str) -> None:
        """From here on, walk into the statements that mention `name` (a rule started tracking it, and
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
        if base is None and self.functions:
            base = self.module_imports.get(head)
        if base is None:
            return name
        return f"{base}.{rest}" if rest else base

    def module_qualified(self, node: cst.BaseExpression | str) -> str | None:
        """Qualified name of a Name/Attribute chain (or its dotted text) through the module's top-level imports,
        wherever the walk is: what a rule reads before the walk reaches the imports (`qualified` reads the
        imports seen so far). Names not imported come back as written."""
        name = node if isinstance(node, str) else dotted_name(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        base = self.module_imports.get(head)
        return name if base is None else f"{base}.{rest}" if rest else base

    def report(
        self,
        node: cst.CSTNode,
        rule: Rule | str,
        message: str | None = None,
        *,
        fixed: bool = True,
        subject: str | None = None,
    ) -> None:
        """Record a finding on an ORIGINAL node (positions are looked up on the unmodified tree); `rule`: a
        rule, or the code of one (see `rule`)."""
        rule = self.rule(rule)
        self.reports.append(_Report(node, rule, message or rule.action, fixed, subject=subject))

    def todo(
        self,
        node: cst.CSTNode,
        rule: Rule | str,
        why: str | None = None,
        action: str | None = None,
        *,
        subject: str | None = None,
    ) -> _Report:
        """Record a manual finding and put a TODO comment above the statement that holds `node`; returns the
        finding's report (the block's first one, when the same TODO already stands in the block: the comment
        goes on this statement too, the finding names its line).

        The finding says why the code was left as it is and what to do (`<why>; <action>` in the
        message and the TODO); without them, the rule's own action.
        """
        rule = self.rule(rule)
        text = f"{why}; {action}" if why and action else why or rule.action
        comment = _todo_comment(rule, text)
        # Every statement where the legacy code stays carries the TODO (a person fixes a file from its TODOs);
        # the same TODO again in one block (a module-level function or class, a notebook cell, the rest of the
        # module) is the same decision: one finding, which names the other lines.
        self.pending_todos.append(comment)
        block = (self.definition or self.cell, comment)
        first = self._todo_blocks.get(block)
        if first is not None:
            first.also.append(node)
            return first
        self._todo_blocks[block] = report = _Report(node, rule, text, False, why, action, subject)
        self.reports.append(report)
        return report

    def todo_again(self, node: cst.CSTNode, report: _Report) -> None:
        """The decision of `report` (a `todo`'s) again at `node`, wherever it is in the file (a parallel layer
        model code uses in every class): the same TODO on this statement too, and the finding names its line."""
        self.pending_todos.append(_todo_comment(report.rule, report.message))
        report.also.append(node)

    def launch(self, processes: str = "N", script: str = "train.py") -> str:
        """What to do so that a rewrite runs as `processes` processes (one per rank, as Transformers'
        DistributedConfig and DistributedDataParallel need). A notebook kernel is a single process that
        torchrun cannot start: the code has to move into a script the notebook runs with `!torchrun`."""
        if self.notebook:
            return (
                "a notebook kernel is one process, so the owner decides: keep the processes by moving this code "
                f"into a script (a `%%writefile {script}` cell) run with `!torchrun --nproc_per_node={processes} "
                f"{script}`, or run it here as one process on one NeuronCore, without the parallel setting, where "
                "one core's memory holds it"
            )
        return f"launch the script with `torchrun --nproc_per_node={processes}`"

    def report_launch(
        self,
        node: cst.CSTNode,
        rule: Rule | str,
        done: str,
        processes: str = "N",
        note: str = "",
        *,
        script: str = "train.py",
        subject: str | None = None,
    ) -> None:
        """A rewrite (`done`) that needs `processes` processes: a finding with the launch in a script; in a
        notebook cell, where it cannot run as it is, a TODO that says where it can (`note` follows both)."""
        if self.notebook:
            self.todo(node, rule, done, self.launch(processes, script) + note, subject=subject)
        else:
            self.report(node, rule, f"{done}; {self.launch(processes)}{note}.", subject=subject)

    def add_import(self, module: str, obj: str | None = None, asname: str | None = None) -> None:
        self.imports_to_add.append((module, obj, asname))

    def remove_import(self, module: str, obj: str | None = None, asname: str | None = None) -> None:
        """Drop an import if nothing uses it any more once the rewrite is done."""
        self.imports_to_remove.append((module, obj, asname))


def _todo_comment(rule: Rule, text: str) -> str:
    # A comment is one line: code quoted from several lines (an argument split over them) is joined.
    return f"{TODO_PREFIX} {rule.code} {' '.join(text.split())}"


class Handler:
    """The matcher of a rule (or of a tight group of rules). Subclasses define `visit_<Node>(node)` and/or
    `leave_<Node>(original, updated) -> node` like a libcst transformer (field handlers such as
    `visit_Call_func` are not dispatched), plus:

    - `SYMBOLS`: qualified names of the optimum-neuron/XLA symbols the handler rewrites or marks with a
      TODO; an imported source symbol no handler claims is reported as NM901.
    - `TRIGGERS`: identifiers of which at least one must appear in a file for the handler to have
      anything to do there (checked on the file's AST index); a handler without triggers always runs.
    - `CALLS`: qualified names of the calls (`ctx.qualified(call.func)`) whose `leave_Call` the handler
      decides on; the dispatcher does not call it for other calls. None (the default): every call.
    - `STATEMENTS`: qualified names of the calls the handler rewrites where a call is a whole expression
      statement (in its `leave_SimpleStatementLine`: `xm.mark_step()`, `xm.save(...)`).
    - `DECIDES`: qualified names of other calls the handler decides on (rewrites, or leaves with its own
      finding) without a `CALLS` filter. A family's catch-all (NM318) leaves alone every call its rules
      declare in `CALLS`, `STATEMENTS` or `DECIDES` (`families/xla/state.declared_calls`).
    - `HINTS`: strings of which one appears in the code of every statement the handler acts on or learns
      from, or in the qualified name of an import the statement uses (then the import's local name
      counts as a hint). When every handler at work in a file has hints, the walk does not descend into
      statements without any. None (the default): the handler needs to see every node.

    Removing a statement (`cst.RemoveFromParent()`) is enough: the dispatcher hands its comment lines to
    the next statement. State shared with the family's other rules lives in `self.ctx.state(...)`.
    """

    SYMBOLS: frozenset[str] = frozenset()
    TRIGGERS: frozenset[str] = frozenset()
    CALLS: frozenset[str] | None = None
    STATEMENTS: frozenset[str] = frozenset()
    DECIDES: frozenset[str] = frozenset()
    HINTS: frozenset[str] | None = None
    # The visit_/leave_ methods a handler class defines, noted once (a failed hasattr per handler and
    # node type, for each file, costs more than the lookups the dispatcher saves).
    METHODS: frozenset[str] = frozenset()

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls.METHODS = frozenset(name for name in dir(cls) if name.startswith(("visit_", "leave_")))

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx


class MigrationTransformer(cst.CSTTransformer):
    """Dispatches every node to the handlers' methods, in registry order."""

    def __init__(self, ctx: FileContext, handlers: Iterable[type[Handler]]) -> None:
        super().__init__()
        self.ctx = ctx
        handlers = list(handlers)
        # A handler with nothing to do in this file costs a method call per node: leave it out.
        identifiers = ctx.source.identifiers
        active = [
            handler
            for handler in handlers
            if not handler.TRIGGERS or not handler.TRIGGERS.isdisjoint(identifiers)
        ]
        ctx.claimed = frozenset().union(*(handler.SYMBOLS for handler in handlers))
        ctx.module_imports = module_imports(ctx.module)
        self.comments = CommentKeeper()
        ctx.next_statement = self.comments.following
        self._visitors: dict[str, list] = {}
        self._leavers: dict[str, list] = {}
        self._call_leavers: dict[str | None, list] = {}  # qualified callee -> the leave_Call methods for it
        # TODOs queued while a statement is walked are its own (a TODO about an `if` test belongs to the
        # `if`, not to the first statement of its body); a removed statement's go to the next one.
        self._todo_marks: list[int] = []
        self._todo_carry: int | None = None
        if all(handler.HINTS is not None for handler in active):
            # Imports are always visited: they are recorded for `qualified` (and checked for NM901).
            self._static_hints = frozenset({"import"}).union(*(handler.HINTS for handler in active))
            ctx.hints = set(self._static_hints)
            for local, qualified in ctx.module_imports.items():  # a function above the import uses it too
                self._note_hint(local, qualified)
        # Created once the hints are set: a handler (or its family's state) may watch names from the start.
        self.handlers = [handler(ctx) for handler in active]
        # Whitespace, operators and brackets are nobody's business here, unless a handler has a method for one.
        handled = {name.partition("_")[2] for handler in active for name in handler.METHODS}
        self.leave_out = (
            TOKEN_CLASSES if handled.isdisjoint(kind.__name__ for kind in TOKEN_CLASSES) else frozenset()
        )

    def _methods(self, cache: dict[str, list], prefix: str, node_type: str) -> list:
        methods = cache.get(node_type)
        if methods is None:
            name = prefix + node_type
            methods = [getattr(handler, name) for handler in self.handlers if name in handler.METHODS]
            cache[node_type] = methods
        return methods

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node)  # node classes are concrete: identity tests, no isinstance per node
        if kind is cst.Import or kind is cst.ImportFrom:
            self._record_import(node)
        elif kind is cst.Module or kind is cst.IndentedBlock:
            self.comments.index(node)
        elif kind is cst.SimpleStatementLine:
            self.ctx.line = node
            if self.ctx.notebook and self.ctx.definition is None and _is_cell_marker(node):
                self.ctx.cell = node
        elif kind is cst.Call and shows(dotted_name(node.func)):
            self.ctx.shown.append(node)
        elif kind is cst.FormattedString:
            self.ctx.fstring_quotes.append(node.quote)
        elif kind is cst.FunctionDef or kind is cst.ClassDef:
            if kind is cst.FunctionDef:
                self.ctx.functions.append(node)
            if self.ctx.definition is None:
                self.ctx.definition = node
        for method in self._methods(self._visitors, "visit_", kind.__name__):
            method(node)
        if kind in STATEMENT_CLASSES:
            pending = len(self.ctx.pending_todos)
            self._todo_marks.append(pending if self._todo_carry is None else min(pending, self._todo_carry))
            self._todo_carry = None
            # The statement's own handlers run (comments of a removed neighbour, scopes), its insides
            # only when a hint appears in its code.
            return self.ctx.walk_into(node)
        return True

    # No handler handles a single field (`visit_Call_func`...): skip libcst's two lookups per field.
    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        pass

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass

    def _call_methods(self, call: cst.Call) -> list:
        callee = self.ctx.qualified(call.func)
        methods = self._call_leavers.get(callee)
        if methods is None:
            methods = [
                handler.leave_Call
                for handler in self.handlers
                if "leave_Call" in handler.METHODS and (handler.CALLS is None or callee in handler.CALLS)
            ]
            self._call_leavers[callee] = methods
        return methods

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):
        result = updated
        kind = type(original)
        if kind is cst.Call:
            methods = self._call_methods(original)
        else:
            methods = self._methods(self._leavers, "leave_", kind.__name__)
        for method in methods:
            result = method(original, result)
            if not isinstance(result, cst.CSTNode):  # removed or flattened: later handlers see nothing
                break
        if kind is cst.FunctionDef:
            self.ctx.functions.pop()
        elif kind is cst.Call and self.ctx.shown and self.ctx.shown[-1] is original:
            self.ctx.shown.pop()
        elif kind is cst.FormattedString:
            self.ctx.fstring_quotes.pop()
        if original is self.ctx.definition:
            self.ctx.definition = None
        if (kind is cst.If and isinstance(result, cst.If)) or (
            kind is cst.Try and isinstance(result, cst.Try)
        ):
            simplified = (without_empty_branches if kind is cst.If else without_empty_try)(original, result)
            if simplified is not result:
                self.comments.hand_on(original, block_comments(result.body))
                result = simplified
        if kind in _COMMENT_HOLDERS:
            if kind is cst.SimpleStatementLine:
                self.ctx.line = None
                if isinstance(result, cst.SimpleStatementLine) and not result.body:
                    result = cst.RemoveFromParent()  # every small statement on the line was removed
            result = self.comments.left(original, result)
            if kind in STATEMENT_CLASSES:
                mark = self._todo_marks.pop()
                if len(self.ctx.pending_todos) > mark:
                    # Comments above a file's first statement are the module's header, not the statement's.
                    first = self.ctx.module.body[0] is original
                    result = self._attach_todos(
                        self._guarded_line(original, result, mark),
                        mark,
                        self.ctx.module.header if first else (),
                    )
        return result

    def _guarded_line(self, original: cst.CSTNode, result, mark: int):
        """A line a rule put under an `if` (`if rank == 0: print(...)`): its TODOs go on the line itself,
        where the next run, which walks the `if`, finds them."""
        if (
            isinstance(original, cst.SimpleStatementLine)
            and isinstance(result, cst.If)
            and isinstance(result.body, cst.IndentedBlock)
            and isinstance(result.body.body[0], cst.SimpleStatementLine)
        ):
            inner = self._attach_todos(result.body.body[0], mark)
            return result.with_changes(body=result.body.with_changes(body=[inner, *result.body.body[1:]]))
        return result

    def _attach_todos(self, result, mark: int, header: Iterable[cst.EmptyLine] = ()):
        """Put the TODOs queued since `mark` above the statement (innermost statement leaves first), unless
        a previous run already did (in its leading lines, or the module `header` of a file's first one)."""
        if isinstance(result, cst.FlattenSentinel):
            # The statement itself, not one a rule put before it (`os.environ[...] = ...` ahead of the call
            # that read it): a TODO above an inserted line would be added again by the next run.
            nodes = list(result.nodes)
            index = next((i for i, node in enumerate(nodes) if node not in self.ctx.inserted_before), 0)
            nodes[index] = self._attach_todos(nodes[index], mark, header)
            return cst.FlattenSentinel(nodes)
        if not isinstance(result, STATEMENT_TYPES):  # statement removed: the next one carries the TODO
            self._todo_carry = mark
            return result
        existing = {line.comment.value for line in [*header, *result.leading_lines] if line.comment}
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
        for local, qualified in _bindings(node):
            self.ctx.imported[local] = qualified
            if local != qualified:  # `import a.b` binds `a` itself: nothing to watch
                self._note_hint(local, qualified)

    def _note_hint(self, local: str, qualified: str) -> None:
        """`local` names a hinted import (`from os import environ as env`): it is a hint too."""
        if self.ctx.hints is not None and any(hint in qualified for hint in self._static_hints):
            self.ctx.watch(local)


def _is_cell_marker(line: cst.SimpleStatementLine) -> bool:
    """The statement that marks where a notebook's cell starts in the module of its Python cells."""
    statement = line.body[0]
    return (
        isinstance(statement, cst.Import)
        and isinstance(statement.names[0].name, cst.Name)
        and statement.names[0].name.value.startswith(CELL_MARKER_PREFIX)
    )


# Statements whose blocks run as part of the module's own code (a function's or a class's body does not bind
# module names).
_MODULE_LEVEL_BLOCKS = (cst.If, cst.Try, cst.TryStar, cst.With, cst.For, cst.While)


def module_imports(module: cst.Module) -> dict[str, str]:
    """Local name -> qualified name of every import the module's own code makes, at any depth of its `if` /
    `try` / `with` / loop blocks; a name two imports bind differently is left out (which one a function sees
    depends on the branch taken: `module_import_choices` has them)."""
    choices = module_import_choices(module)
    return {local: next(iter(names)) for local, names in choices.items() if len(names) == 1}


def module_import_choices(module: cst.Module) -> dict[str, frozenset[str]]:
    """Local name -> the qualified names the module's own imports bind it to, at any depth of its blocks
    (`import torch_neuron as neuron` in one branch, `import torch_neuronx as neuron` in another: both)."""
    found: dict[str, set[str]] = {}
    stack: list[cst.CSTNode] = list(reversed(module.body))
    while stack:
        statement = stack.pop()
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    for local, qualified in _bindings(small):
                        found.setdefault(local, set()).add(qualified)
        elif isinstance(statement, _MODULE_LEVEL_BLOCKS):
            blocks = [
                statement.body,
                getattr(statement, "orelse", None),
                getattr(statement, "finalbody", None),
            ]
            blocks += [handler.body for handler in getattr(statement, "handlers", ())]
            for block in blocks:
                if isinstance(block, cst.Else | cst.Finally | cst.If):
                    block = block if isinstance(block, cst.If) else block.body
                if isinstance(block, cst.If):  # `elif`
                    stack.append(block)
                elif isinstance(block, cst.IndentedBlock):
                    stack.extend(reversed(block.body))
    return {local: frozenset(names) for local, names in found.items()}


def _bindings(node: cst.Import | cst.ImportFrom) -> list[tuple[str, str]]:
    """(local name, qualified name) of what an import statement binds."""
    if isinstance(node, cst.Import):
        bound = []
        for alias in node.names:
            full = dotted_name(alias.name)
            if alias.asname:
                bound.append((alias.asname.name.value, full))
            else:  # `import a.b` binds `a`
                head = full.split(".")[0]
                bound.append((head, head))
        return bound
    if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
        return []
    module = dotted_name(node.module)
    return [
        (alias.asname.name.value if alias.asname else alias.name.value, f"{module}.{alias.name.value}")
        for alias in node.names
    ]


@dataclass
class PythonResult:
    code: str
    findings: list[Finding]


def migrate_module(
    code: str,
    handlers: Iterable[type[Handler]],
    rules: Mapping[str, Rule],
    notebook: bool = False,
    tree: ast.Module | None = None,
) -> PythonResult:
    """Parse a module and run all handlers over it; return the new code and findings placed on the input.
    `rules`: every rule by its code (what `FileContext.rule` finds); `notebook`: the module is the Python cells of a notebook (see `FileContext.notebook`); `tree`: Python's
    parse of `code`, when the caller has it.

    Raises libcst's ParserSyntaxError when the code does not parse.
    """
    module = cst.parse_module(code)
    handlers = tuple(handlers)
    ctx = FileContext(module, code, rules, handlers, notebook=notebook, tree=tree)
    transformer = MigrationTransformer(ctx, handlers)
    updated = transform(module, transformer, transformer.leave_out)
    if ctx.imports_to_add:
        updated = add_missing_imports(updated, ctx.imports_to_add)
    # The input's text of each top-level statement the walk left as it was, where the walk printed it.
    known = ctx.source_map.top_level_texts() if "source_map" in vars(ctx) else None
    if ctx.imports_to_remove:
        new_code = code_without_unused_imports(updated, ctx.imports_to_remove, known)
    else:
        new_code = module_code(updated, known).code
    if new_code != code and not ctx.reports and new_code == module.code:
        # libcst does not round-trip every input (it drops a whitespace-only line before trailing comments):
        # with nothing rewritten, the input stands as it was.
        new_code = code
    return PythonResult(new_code, _place(ctx))


def _place(ctx: FileContext) -> list[Finding]:
    """Findings at the line and column of the nodes they were reported on (nodes of the input tree)."""
    if not ctx.reports:
        return []
    findings = []
    for report in ctx.reports:
        line, column = ctx.source_map.position(report.node) or (1, 1)
        message, why = report.message, report.why
        others = sorted({(ctx.source_map.position(node) or (line,))[0] for node in report.also} - {line})
        if others:
            why = (why or report.rule.action) + also_on(others)
            message = f"{why}; {report.action}" if report.action else why
        findings.append(
            Finding(
                report.rule,
                line,
                column,
                message,
                report.fixed,
                why=why,
                action=report.action,
                subject=report.subject,
                also=tuple(others),
            )
        )
    return sorted(findings, key=lambda f: (f.line, f.column, f.code))
