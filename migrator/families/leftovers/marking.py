"""After every rewrite of a file, the legacy references left in its output get a TODO and a finding.

Code and strings count, comments do not: Python is read with `ast` (its string literals mark where strings
are; outside them a `#` starts a comment, blanked), shell with tree-sitter's bash grammar (its `comment`
nodes are blanked). Text a program only shows is not a decision either: strings it prints, logs, raises, asserts or
gives as help (`print`, `logger.info`, `raise`, `assert`, `help=`, a pytest skip reason; `echo`, `printf`, a
heredoc `cat` prints) are skipped. Each statement that holds a reference gets the TODO, unless a TODO of
neuron-migrate already covers it (a rule's, which reports it, or this scan's from a previous run, which adds
none); the same reference in one block (a module-level function or class, a notebook cell, the rest of the
module) is one decision: one manual finding that names the other lines, placed on the input line the first
statement came from.
"""

from __future__ import annotations

import ast
import difflib
import io
import itertools
import re
import tokenize
from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from migrator.cst_helpers import shows
from migrator.families.environment.variables import torchneuron_code
from migrator.families.leftovers import nm501_legacy_reference, nm502_platform
from migrator.families.leftovers.patterns import Pattern
from migrator.rules import Finding, Rule, also_on
from migrator.transform import CELL_MARKER_PREFIX, TODO_PREFIX
from usercode.python import ast_nodes, parsed

PATTERNS: tuple[Pattern, ...] = (*nm501_legacy_reference.PATTERNS, *nm502_platform.PATTERNS)
_SCAN_CODES = frozenset(pattern.rule.code for pattern in PATTERNS)
_UNINSTALL = re.compile(r"\bpip3?\W+uninstall\b")


@dataclass(frozen=True)
class _Hit:
    pattern: Pattern
    found: str
    offset: int  # in the output
    line: int  # 0-based line of the reference in the output
    column: int  # 1-based column of the reference
    statement: int  # 0-based first line of the statement that holds it (where its TODO goes)
    scope: int  # 0-based first line of the outermost function (or class) that holds it, -1 outside them
    # A statement that uses a name a legacy import binds: its TODO's reason, which says whose name it is.
    use_of: str | None = None
    use_action: str | None = None  # ... and what to do, where it is not the pattern's

    @property
    def why(self) -> str:
        return self.use_of or self.pattern.why.format(self.found)

    @property
    def action(self) -> str:
        return self.use_action or self.pattern.action

    @property
    def todo(self) -> str:
        return f"{TODO_PREFIX} {self.pattern.rule.code} {self.why}; {self.action}"


def mark_python(
    before: str, after: str, findings: list[Finding], python_rules: Mapping[str, Rule]
) -> tuple[str, list[Finding]]:
    """`after` (the migrated module) with TODOs on its leftovers, and `findings` with theirs added;
    `python_rules`: the Python rules by code (`registry.PYTHON_RULES`), whose old TODOs it accounts for."""
    # Blanking comments and docstrings only takes matches away: without one in the raw text (or an old
    # TODO to account for), there is nothing to parse for.
    if TODO_PREFIX not in after and not any(next(pattern.finditer(after), None) for pattern in PATTERNS):
        return after, findings
    python = parsed(after)
    masked, strings, todo_comments = _python_code(after, python)
    if masked is None:  # not Python that Python's parser reads (libcst parsed it): nothing to place TODOs by
        return after, findings
    lines = _split_lines(after)
    findings = findings + _unreported_todos(before, lines, todo_comments, findings, python_rules)
    statements: list[_Statements] = []  # read for the first hit only

    def tree() -> _Statements:
        if not statements:
            statements.append(_Statements(python, len(lines) + 1, after))
        return statements[0]

    def where(line: int, offset: int) -> tuple[int, int] | None:
        if tree().shown(offset):
            return None
        return tree().start_of(line), tree().scope_of(line)

    hits = _hits(masked, strings, where)
    if hits and torchneuron_code(before):  # its compiler settings are TorchNeuron's
        hits = [hit for hit in hits if not hit.pattern.torchneuron_setting]
    if not hits:
        return after, findings
    users = tree().import_users(hits)
    return _apply(before, after, lines, hits, findings, users, notebook=bool(tree().cells))


def legacy_statements(code: str, original: str) -> dict[int, str]:
    """Where legacy code survives in `code` (`original` migrated): the 0-based first line of each statement that
    holds a reference the scan looks for (in code or a string it does not only show) or uses a name a legacy
    import binds -> the reference (or that name). What every such statement must carry: a TODO, or a rewrite."""
    python = parsed(code)
    masked, strings, _ = _python_code(code, python)
    if masked is None:
        return {}
    statements = _Statements(python, len(_split_lines(code)) + 1, code)

    def where(line: int, offset: int) -> tuple[int, int] | None:
        return None if statements.shown(offset) else (statements.start_of(line), statements.scope_of(line))

    hits = _hits(masked, strings, where)
    if torchneuron_code(original):  # its compiler settings are TorchNeuron's
        hits = [hit for hit in hits if not hit.pattern.torchneuron_setting]
    found = {hit.statement: hit.found for hit in reversed(hits)}
    for users in statements.import_users(hits).values():
        for user, (what, _) in users.items():
            found.setdefault(user, what)
    return dict(sorted(found.items()))


def todos_above(code: str, line: int) -> set[str]:
    """The neuron-migrate TODO comments directly above the 0-based `line` of `code`."""
    return _todos_above(_split_lines(code), line)


def _unreported_todos(
    before: str,
    lines: list[str],
    todo_comments: list[tuple[int, str]],
    findings: list[Finding],
    python_rules: Mapping[str, Rule],
) -> list[Finding]:
    """A TODO a Python rule left in an earlier run is manual work still there, even when that rule has
    nothing left to match (its rewrite is done, e.g. NM504): one finding per such TODO (the same text once)."""
    if not todo_comments:
        return []
    reported = {finding.code for finding in findings if not finding.fixed}
    found: dict[tuple[str, str], int] = {}
    for line, comment in todo_comments:
        code, _, text = comment[len(TODO_PREFIX) :].strip().partition(" ")
        if code in python_rules and code not in reported and code not in _SCAN_CODES:
            found.setdefault((code, text), line)
    if not found:
        return []
    to_input = _line_map(before, lines)
    return [
        Finding(python_rules[code], to_input(line) + 1, 1, text, False)
        for (code, text), line in found.items()
    ]


def _split_lines(text: str) -> list[str]:
    """Lines ended by `\n`, as tree-sitter counts them (`str.splitlines` also breaks at form feeds)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def mark_shell(before: str, after: str, findings: list[Finding]) -> tuple[str, list[Finding]]:
    """The same for a shell script (a notebook's commands arrive as one script)."""
    from usercode.shell import ancestors, block_statement, parse, shown_by_shell

    data = after.encode()
    tree = parse(data)
    masked = bytearray(data)
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        # An `unset` ends a setting NM456 decided: dropped with it, or kept beside one kept with a TODO.
        if node.type in ("comment", "unset_command"):
            masked[node.start_byte : node.end_byte] = b" " * (node.end_byte - node.start_byte)
        stack.extend(node.children)
    # Offsets of the masked text are characters; tree-sitter's are bytes: identical for ASCII scripts,
    # mapped through the encoded prefix otherwise.
    text = masked.decode()
    ascii_only = text.isascii()

    def where(line: int, offset: int) -> tuple[int, int] | None:
        byte = offset if ascii_only else len(text[:offset].encode())
        node = tree.root_node.descendant_for_byte_range(byte, byte)
        if node is None:
            return line, -1
        if shown_by_shell(node):
            return None
        statement = block_statement(node)
        functions = [n for n in ancestors(node) if n.type == "function_definition"]
        function = functions[-1] if functions else None
        return (
            statement.start_point[0] if statement is not None else line,
            function.start_point[0] if function is not None else -1,
        )

    return _apply(before, after, _split_lines(after), _hits(text, None, where), findings)


def _python_code(
    code: str, tree: ast.Module | None
) -> tuple[str | None, list[tuple[int, int]], list[tuple[int, str]]]:
    """The module with its comments and docstrings blanked (a string that is a statement of its own does
    nothing: it is documentation), the character ranges of its other string literals, and its
    neuron-migrate TODO comments (0-based line, text). The literals are read from Python's parse of the code
    (`tree`; None where Python refuses the code: nothing to read), the comments from its text: outside the
    literals, a `#` starts one."""
    if tree is None:
        return None, [], []
    nodes = ast_nodes(tree)
    # An f-string is one literal, with what its braces hold (its parts' positions are not their own in 3.11).
    nested = {
        id(part)
        for node in nodes
        if type(node) is ast.JoinedStr
        for part in itertools.islice(ast.walk(node), 1, None)
    }
    documentation = {id(node.value) for node in nodes if type(node) is ast.Expr}
    positions = _Positions(code)
    chars = list(code)
    strings = []
    for node in nodes:
        if id(node) in nested or not (
            type(node) is ast.JoinedStr or (type(node) is ast.Constant and type(node.value) in (str, bytes))
        ):
            continue
        for start, end in _literal_parts(code, *positions.span(node)):
            if id(node) in documentation:
                chars[start:end] = [char if char == "\n" else " " for char in chars[start:end]]
            else:
                strings.append((start, end))
    strings.sort()
    string_starts = [start for start, _ in strings]
    todo_comments = []
    line_start = 0
    for number, line in enumerate(_split_lines(code)):
        column = line.find("#")
        while column >= 0:
            index = bisect_right(string_starts, line_start + column) - 1
            if index >= 0 and line_start + column < strings[index][1]:  # in a literal: look after it
                column = line.find("#", strings[index][1] - line_start)
                continue
            comment = _COMMENT.match(line, column).group()
            chars[line_start + column : line_start + column + len(comment)] = " " * len(comment)
            if comment.startswith(TODO_PREFIX):
                todo_comments.append((number, comment))
            column = line.find("#", column + len(comment))
        line_start += len(line)
    return "".join(chars), strings, todo_comments


_COMMENT = re.compile(r"#[^\r\n]*")


def _literal_parts(code: str, start: int, end: int) -> list[tuple[int, int]]:
    """The literals of one string node (`start`, `end`: its span): itself, or the parts of an implicit
    concatenation whose lines hold a `#` that may be a comment between them (read with `tokenize`: rare)."""
    text = code[start:end]
    if "#" not in text or "\n" not in text:
        return [(start, end)]
    wrapped = "(" + text + ")"  # inside brackets, line breaks between the parts are no statement ends
    starts = list(itertools.accumulate(map(len, _split_lines(wrapped)), initial=0))
    return [
        (start + starts[first[0] - 1] + first[1] - 1, start + starts[last[0] - 1] + last[1] - 1)
        for first, last in _string_tokens(wrapped)
    ]


def _string_tokens(code: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where each string literal of `code` starts and ends, as `tokenize` reads it (an f-string is one STRING
    token before Python 3.12, FSTRING_START ... FSTRING_END since)."""
    found, depth, begin = [], 0, (0, 0)
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.STRING and depth == 0:
            found.append((token.start, token.end))
        elif token.type == getattr(tokenize, "FSTRING_START", None):
            begin = token.start if depth == 0 else begin
            depth += 1
        elif token.type == getattr(tokenize, "FSTRING_END", None):
            depth -= 1
            if depth == 0:
                found.append((begin, token.end))
    return found


class _Positions:
    """Character offsets in `code` of Python's parse positions (1-based lines, as Python counts them: at `\\n`,
    `\\r\\n` or `\\r`; columns in UTF-8 bytes)."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.ascii = code.isascii()
        self.starts = [0] + [match.end() for match in re.finditer(r"\r\n?|\n", code)]

    def offset(self, line: int, column: int) -> int:
        start = self.starts[min(line, len(self.starts)) - 1]
        if self.ascii:
            return start + column
        return start + len(self.code[start : start + column].encode()[:column].decode(errors="replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)


class _Statements:
    """The statements of the migrated module, from its AST: where each line's statement starts, which function
    holds it, the import statements, and the strings the program only shows (`shown`)."""

    def __init__(self, tree: ast.Module, count: int, code: str = "") -> None:
        self.tree = tree
        self.code = code
        self._shown: list[tuple[int, int]] | None = None
        self.definitions: list[tuple[int, int]] = []  # 0-based first and last lines of each function, class
        self.cells: list[int] = []  # 0-based lines of the markers between a notebook's cells
        # For each 0-based line of the module, the first line of the innermost statement that holds it.
        self.starts = list(range(count))
        self.imports: dict[int, ast.Import | ast.ImportFrom] = {}  # first line -> import statement
        # Outer statements first, inner ones overwrite: each line ends with its innermost statement.
        stack = [(node, 0) for node in tree.body]
        ordered = []
        while stack:
            node, depth = stack.pop()
            ordered.append((depth, node))
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.imports[node.lineno - 1] = node
                if depth == 0 and node.names[0].name.startswith(CELL_MARKER_PREFIX):
                    self.cells.append(node.lineno - 1)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.definitions.append((node.lineno - 1, (node.end_lineno or node.lineno) - 1))
            for child in ast.iter_child_nodes(node):
                # The statements of an `except` / `case` block sit one level down, in the handler or case.
                inner = child.body if isinstance(child, (ast.excepthandler, ast.match_case)) else [child]
                stack.extend((statement, depth + 1) for statement in inner if isinstance(statement, ast.stmt))
        for _, node in sorted(ordered, key=lambda item: item[0]):
            for line in range(node.lineno - 1, min(node.end_lineno or node.lineno, count)):
                self.starts[line] = node.lineno - 1

    def start_of(self, line: int) -> int:
        return self.starts[min(line, len(self.starts) - 1)]

    def scope_of(self, line: int) -> int:
        """The first line of the outermost function or class that holds `line`; outside them, -1, or in a
        notebook the line of its cell's marker, negated (each cell is a block of its own)."""
        holders = [first for first, last in self.definitions if first <= line <= last]
        if holders:
            return min(holders)
        if self.cells:
            return -2 - max((cell for cell in self.cells if cell <= line), default=-1)
        return -1

    def shown(self, offset: int) -> bool:
        """Whether the character at `offset` is in a string the program only shows (see `_ShownStrings`)."""
        if self._shown is None:
            finder = _ShownStrings(self.code)
            finder.visit(self.tree)
            self._shown = sorted(finder.spans)
        index = bisect_right(self._shown, (offset, float("inf"))) - 1
        return index >= 0 and self._shown[index][0] <= offset < self._shown[index][1]

    def import_users(self, hits: list[_Hit]) -> dict[int, dict[int, tuple[str, int]]]:
        """First line of each import statement a hit is on -> the first line of each statement that uses a
        name it binds -> that name and where it comes from (`` `pl` (`torch_xla.distributed.parallel_loader`)
        ``), and the statement's scope (`scope_of`).

        An import is kept because code that uses it is kept: each use is legacy code too, and the import is
        the first statement a person fixing the file meets (see `_apply`)."""
        bound: dict[str, tuple[int, str]] = {}
        for hit in hits:
            node = self.imports.get(hit.statement)
            aliases = node.names if node is not None else []
            if isinstance(node, ast.Import):  # `import torch, torch_neuron`: only the legacy module's name
                aliases = [a for a in aliases if (a.name + ".").startswith(hit.found + ".")] or aliases
            for alias in aliases:
                name = alias.asname or alias.name.split(".")[0]  # `import a.b` binds `a`
                origin = alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
                what = f"`{name}`" if name == origin else f"`{name}` (`{origin}`)"
                bound[name] = (hit.statement, what)
        if not bound:
            return {}
        users: dict[int, dict[int, tuple[str, int]]] = {line: {} for line, _ in bound.values()}
        for node in _loads(self.tree, frozenset(bound)):
            line, what = bound[node.id]
            statement = self.start_of(node.lineno - 1)
            users[line].setdefault(statement, (what, self.scope_of(statement)))
        return {line: dict(sorted(found.items())) for line, found in users.items()}


def _loads(tree: ast.AST, names: frozenset[str]) -> list[ast.Name]:
    """The reads of `names` in `tree`, less those in a function that binds the name itself (a local `layers`
    list is not the `layers` module a legacy import binds)."""
    found = []
    stack: list[tuple[ast.AST, frozenset[str]]] = [(tree, names)]
    while stack:
        node, visible = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            local = {arg.arg for arg in ast_nodes(node.args) if isinstance(arg, ast.arg)}
            local |= {
                child.id
                for child in ast_nodes(node)
                if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store)
            }
            visible = visible - local
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in visible:
            found.append(node)
        if visible:
            stack.extend((child, visible) for child in ast.iter_child_nodes(node))
    return sorted(found, key=lambda name: (name.lineno, name.col_offset))


# Keyword arguments (and `metadata={"help": ...}` keys) that hold text for a person: help, usage, a skip reason.
_TEXT_KEYWORDS = frozenset({"help", "description", "epilog", "usage", "reason", "msg"})


class _ShownStrings(ast.NodeVisitor):
    """Character spans of the string literals a program only prints, logs, raises, asserts or shows as help."""

    def __init__(self, code: str) -> None:
        self._span = _Positions(code).span
        self.spans: list[tuple[int, int]] = []

    def _strings(self, node: ast.AST | None) -> None:
        """The string literals in `node`; an f-string's text, not the code in its braces (`{model.neuron_config}`
        still runs)."""
        if node is None:
            return
        if isinstance(node, ast.JoinedStr):
            start, end = self._span(node)
            for value in node.values:
                if isinstance(value, ast.FormattedValue):
                    hole_start, hole_end = self._span(value.value)
                    self.spans.append((start, hole_start))
                    start = hole_end
                    self._strings(value.value)
            self.spans.append((start, end))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            self.spans.append(self._span(node))
        else:
            for child in ast.iter_child_nodes(node):
                self._strings(child)

    def visit_Call(self, node: ast.Call) -> None:
        if _shows(node.func):
            self._strings(node)
            return
        for keyword in node.keywords:
            if keyword.arg in _TEXT_KEYWORDS:
                self._strings(keyword.value)
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and key.value in _TEXT_KEYWORDS:
                self._strings(value)
        self.generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> None:
        self._strings(node.exc)

    def visit_Assert(self, node: ast.Assert) -> None:
        self._strings(node)


def _shows(func: ast.expr) -> bool:
    """`print`, `logger.info`, `warnings.warn`, `xm.master_print`, `st.write`, `pytest.skip`: a call that shows
    its arguments to a person (`cst_helpers.shows`)."""
    names = []
    while isinstance(func, ast.Attribute):
        names.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        names.append(func.id)
    return bool(names) and shows(".".join(reversed(names)))


def _hits(
    text: str,
    strings: list[tuple[int, int]] | None,
    where: Callable[[int, int], tuple[int, int] | None],
) -> list[_Hit]:
    """Every match of every pattern, with the first line of its statement and of its function (`where(line,
    offset)`, None for text the program only shows). A match inside the text an earlier pattern matched is
    that reference already (the package name in an optimum-neuron script's URL)."""
    line_starts = [0] + [match.end() for match in re.finditer("\n", text)]
    string_starts = [start for start, _ in strings] if strings is not None else []
    hits = []
    matched: list[tuple[int, int]] = []
    for pattern in PATTERNS:
        for match in pattern.finditer(text):
            if any(start <= match.start() and match.end() <= end for start, end in matched):
                continue
            if pattern.strings_only and strings is not None:
                index = bisect_right(string_starts, match.start()) - 1
                if index < 0 or match.end() > strings[index][1]:
                    continue
            if pattern.foreign is not None and pattern.foreign(match.group(0), text):
                continue
            line = bisect_right(line_starts, match.start()) - 1
            if _UNINSTALL.search(text, line_starts[line], match.start()):
                continue  # `pip uninstall torch-xla`: removing the legacy package is the migration
            column = match.start() - line_starts[line] + 1
            found = where(line, match.start())
            if found is not None:
                hits.append(_Hit(pattern, match.group(0), match.start(), line, column, *found))
                matched.append(match.span())
    return sorted(hits, key=lambda hit: hit.offset)


def _apply(
    before: str,
    after: str,
    lines: list[str],
    hits: list[_Hit],
    findings: list[Finding],
    import_users: dict[int, dict[int, tuple[str, int]]] | None = None,
    notebook: bool = False,
) -> tuple[str, list[Finding]]:
    """`import_users`: see `_Statements.import_users`; `notebook`: the module is a notebook's cells, whose
    line numbers a person does not see (a TODO quotes code instead)."""
    if not hits:
        return after, findings
    # A TODO of another rule above the statement covers it, provided that rule reported manual work.
    manual_reported = any(not finding.fixed for finding in findings)
    groups: dict[tuple[int, str, str], list[_Hit]] = {}  # (function, code, subject) -> hits: one decision
    covered: set[int] = set()  # statements a group of hits stands for
    import_users = import_users or {}
    to_input = _line_map(before, lines)
    # Statements a rule's TODO stands for, above another statement of their block: covered like the others.
    also = {line for finding in findings if not finding.fixed for line in finding.also}
    if also:
        covered.update(line for line in range(len(lines)) if to_input(line) + 1 in also)
    by_rule = set(covered)
    kept: list[tuple[_Hit, list[int]]] = []  # imports kept only for uses that wait on a rule's TODO
    # Imports last: whether the statements that use them carry a TODO includes the ones added here.
    for hit in sorted(hits, key=lambda hit: hit.statement in import_users):
        above = _todos_above(lines, hit.statement)
        others = hit.statement in by_rule or any(not _is_scan_todo(todo) for todo in above)
        users = import_users.get(hit.statement, {})
        if hit.todo not in above and manual_reported and others:
            # A rule's TODO on the import: each use of what it binds waits on that decision, and says so.
            codes = ", ".join(_codes({todo for todo in above if not _is_scan_todo(todo)})) or "a rule"
            why = f"comes from an import that carries the {codes} TODO"
            _add_uses(
                hit, users, why, "the same decision: rewrite this statement with it", lines, groups, covered
            )
            continue
        # The import is the first statement a person fixing the file meets: it carries a TODO of its own, which
        # names the uses it waits for when each of them waits on a rule's decision.
        if users and all(_waits_on_rule(lines, user, by_rule) for user in users):
            kept.append((hit, list(users)))
            covered.add(hit.statement)
            continue
        scope = -1 if hit.pattern.whole_file else hit.scope
        key = (scope, hit.pattern.rule.code, hit.pattern.subject_of(hit.found))
        groups.setdefault(key, []).append(hit)
        covered.add(hit.statement)
        # Every other use of what it binds is legacy code too (`isinstance(x, MpDeviceLoader)`): its own TODO.
        _add_uses(hit, users, "is still used here: " + hit.why, hit.action, lines, groups, covered)
    if not groups and not kept:
        return after, findings
    inserts: dict[int, list[str]] = {}
    added = []
    for group in groups.values():
        # Every statement of the group carries the TODO (a person fixes the file from its TODOs); the finding
        # stands on the first (where a previous run's TODO already was, after a rerun, as it was then).
        statements: dict[int, list[_Hit]] = {}
        for hit in group:
            statements.setdefault(hit.statement, []).append(hit)
        for statement, held in statements.items():
            if not any(hit.todo in _todos_above(lines, statement) for hit in held):
                inserts.setdefault(statement, []).append(held[0].todo)
        first = group[0]
        others = sorted({to_input(hit.line) + 1 for hit in group if hit.statement != first.statement})
        added.append(_finding(first, first.why + also_on(others), first.action, to_input, others))
    replaced = _kept_imports(lines, kept, inserts, added, to_input, notebook)
    out = []
    for number, line in enumerate(lines):
        if number in inserts:
            indent = line[: len(line) - len(line.lstrip(" \t"))]
            newline = "\r\n" if line.endswith("\r\n") else "\n"
            out += [f"{indent}{todo}{newline}" for todo in inserts[number]]
        out.append(replaced.get(number, line))
    merged = sorted([*findings, *added], key=lambda f: (f.line, f.column, f.code))
    return "".join(out), merged


def _add_uses(
    hit: _Hit,
    users: dict[int, tuple[str, int]],
    why: str,
    action: str,
    lines: list[str],
    groups: dict[tuple[int, str, str], list[_Hit]],
    covered: set[int],
) -> None:
    """The statements that use what the import of `hit` binds and carry no TODO yet (or this one, from a
    previous run) join the groups, with a TODO that says `{name} {why}; {action}`."""
    for user, (what, scope) in users.items():
        use = replace(
            hit, line=user, column=1, statement=user, scope=scope, use_of=f"{what} {why}", use_action=action
        )
        above = _todos_above(lines, user)
        if use.todo in above or (not above and user not in covered):
            subject = hit.pattern.subject_of(hit.found)
            groups.setdefault(
                (-1 if hit.pattern.whole_file else scope, hit.pattern.rule.code, subject), []
            ).append(use)
            covered.add(user)


def _codes(todos: set[str]) -> list[str]:
    """The rule codes of TODO comments."""
    return sorted({todo[len(TODO_PREFIX) :].split()[0] for todo in todos})


def _finding(hit: _Hit, why: str, action: str, to_input, others: list[int]) -> Finding:
    return Finding(
        hit.pattern.rule,
        to_input(hit.line) + 1,
        hit.column,
        f"{why}; {action}",
        False,
        why=why,
        action=action,
        subject=hit.pattern.subject_of(hit.found),
        also=tuple(others),
    )


def _waits_on_rule(lines: list[str], statement: int, by_rule: set[int]) -> bool:
    """Whether a rule's TODO stands for the statement (above it, or on its block's first such statement)."""
    return statement in by_rule or any(not _is_scan_todo(todo) for todo in _todos_above(lines, statement))


def _kept_imports(
    lines: list[str],
    kept: list[tuple[_Hit, list[int]]],
    inserts: dict[int, list[str]],
    added: list[Finding],
    to_input,
    notebook: bool,
) -> dict[int, str]:
    """The TODO of each import kept only for uses that wait on a rule's TODO, naming them: added to `inserts`
    (or replacing, in the lines returned, the one a previous run wrote when those uses moved), its finding to
    `added`. Lines are those of the output, TODOs included: what the person reading it sees."""
    if not kept:
        return {}
    heads = {hit.statement: _kept_head(hit) for hit, _ in kept}
    written = {
        statement: number
        for statement, head in heads.items()
        for number in _comment_lines_above(lines, statement)
        if lines[number].strip().startswith(head)
    }
    # The lines each statement gets above it: the other TODOs, and this TODO where no previous run wrote it.
    inserted = [(statement, len(todos)) for statement, todos in inserts.items()]
    inserted += [(statement, 1) for statement in heads if statement not in written]

    def shown_line(line: int) -> int:
        return line + 1 + sum(count for statement, count in inserted if statement <= line)

    replaced = {}
    for hit, users in kept:
        by_codes: dict[str, list[str]] = {}  # the rules whose TODOs they carry -> the statements
        for user in users:
            codes = _codes(_todos_above(lines, user))
            code = lines[user].strip()
            where = (
                f"`{code if len(code) <= 60 else code[:57] + '...'}`" if notebook else str(shown_line(user))
            )
            by_codes.setdefault(", ".join(codes), []).append(where)
        uses = [
            (_listed(wheres) if notebook else f"line{'s' if len(wheres) > 1 else ''} {_listed(wheres)}")
            + (f" ({codes})" if codes else "")
            for codes, wheres in by_codes.items()
        ]
        why = (
            f"{heads[hit.statement].removeprefix(f'{TODO_PREFIX} {hit.pattern.rule.code} ')}{_listed(uses)}, "
        )
        one = len(users) == 1
        why += f"under {'its' if one else 'their'} own TODO: {hit.why}"
        action = f"remove this import once {'that statement is' if one else 'those statements are'} rewritten"
        todo = f"{TODO_PREFIX} {hit.pattern.rule.code} {why}; {action}"
        if hit.statement in written:
            number = written[hit.statement]
            old = lines[number]
            indent = old[: len(old) - len(old.lstrip(" \t"))]
            replaced[number] = f"{indent}{todo}{old[len(old.rstrip()) :]}"
        else:
            inserts.setdefault(hit.statement, []).append(todo)
        added.append(_finding(hit, why, action, to_input, []))
    return replaced


def _kept_head(hit: _Hit) -> str:
    """How the TODO of an import kept for other statements' decisions begins (a rerun finds it by this)."""
    return f"{TODO_PREFIX} {hit.pattern.rule.code} `{hit.found}` stays imported only for "


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _comment_lines_above(lines: list[str], line: int) -> list[int]:
    numbers = []
    for number in range(line - 1, -1, -1):
        if not lines[number].strip().startswith("#"):
            break
        numbers.append(number)
    return numbers


def _todos_above(lines: list[str], line: int) -> set[str]:
    above = {lines[number].strip() for number in _comment_lines_above(lines, line)}
    return {text for text in above if text.startswith(TODO_PREFIX)}


def _is_scan_todo(todo: str) -> bool:
    code = todo[len(TODO_PREFIX) :].split(None, 1)[0] if len(todo) > len(TODO_PREFIX) else ""
    return code in _SCAN_CODES


def _likeliest_source(line: str, before_lines: list[str], start: int, end: int) -> int:
    """The line of a rewritten block (`before_lines[start:end]`) that an output line of it most resembles (a
    rewritten statement keeps most of its text); the block's first line for a line added there."""
    first = min(start, max(len(before_lines) - 1, 0))
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(line.strip())
    best, best_ratio = first, 0.6  # below: a line of its own, not a rewrite of one of them
    for index in range(start, end):
        matcher.set_seq1(before_lines[index].strip())
        if matcher.real_quick_ratio() > best_ratio and matcher.ratio() > best_ratio:
            best, best_ratio = index, matcher.ratio()
    return best


def _line_map(before: str, after_lines: list[str]) -> Callable[[int], int]:
    """0-based output line -> the input line it came from (an added line: where its block was)."""
    before_lines = _split_lines(before)
    if before_lines == after_lines:
        return lambda line: line
    blocks = difflib.SequenceMatcher(None, before_lines, after_lines, autojunk=False).get_opcodes()

    def to_input(line: int) -> int:
        for tag, i1, i2, j1, j2 in blocks:
            if j1 <= line < j2:
                if tag == "equal":
                    return i1 + (line - j1)
                return _likeliest_source(after_lines[line], before_lines, i1, i2)
        return max(len(before_lines) - 1, 0)

    return to_input
