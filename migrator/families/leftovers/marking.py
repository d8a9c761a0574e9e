"""After every rewrite of a file, the legacy references left in its output get a TODO and a finding.

Code and strings count, comments do not: Python is read with `tokenize` (its COMMENT tokens are blanked,
its STRING tokens mark where strings are), shell with tree-sitter's bash grammar (its `comment` nodes are
blanked). Text a program only shows is not a decision either: strings it prints, logs, raises, asserts or
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
import re
import tokenize
from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from migrator.cst_helpers import shows
from migrator.families.environment.variables import torchneuron_code
from migrator.families.leftovers import nm501_legacy_reference, nm502_platform
from migrator.families.leftovers.patterns import Pattern
from migrator.rules import Finding, Rule, also_on
from migrator.transform import CELL_MARKER_PREFIX, TODO_PREFIX

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

    @property
    def todo(self) -> str:
        why = self.pattern.why.format(self.found)
        return f"{TODO_PREFIX} {self.pattern.rule.code} {why}; {self.pattern.action}"


def mark_python(
    before: str, after: str, findings: list[Finding], python_rules: Mapping[str, Rule]
) -> tuple[str, list[Finding]]:
    """`after` (the migrated module) with TODOs on its leftovers, and `findings` with theirs added;
    `python_rules`: the Python rules by code (`registry.PYTHON_RULES`), whose old TODOs it accounts for."""
    # Blanking comments and docstrings only takes matches away: without one in the raw text (or an old
    # TODO to account for), there is nothing to tokenize for.
    if TODO_PREFIX not in after and not any(next(pattern.finditer(after), None) for pattern in PATTERNS):
        return after, findings
    masked, strings, todo_comments = _python_code(after)
    if masked is None:  # not Python that tokenize reads (libcst parsed it): nothing to place TODOs by
        return after, findings
    lines = _split_lines(after)
    findings = findings + _unreported_todos(before, lines, todo_comments, findings, python_rules)
    statements: list[_Statements] = []  # read from the AST for the first hit only

    def tree() -> _Statements:
        if not statements:
            statements.append(_Statements.of(after, len(lines) + 1))
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
    return _apply(before, after, lines, hits, findings, tree().import_users(hits))


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
    """Lines as tokenize and tree-sitter count them (`str.splitlines` also breaks at form feeds)."""
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


def _python_code(code: str) -> tuple[str | None, list[tuple[int, int]], list[tuple[int, str]]]:
    """The module with its comments and docstrings blanked (a string that is a statement of its own does
    nothing: it is documentation), the character ranges of its other string literals, and its
    neuron-migrate TODO comments (0-based line, text)."""
    line_starts = [0]
    for line in _split_lines(code):
        line_starts.append(line_starts[-1] + len(line))
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return None, [], []
    significant = [token for token in tokens if token.type not in (tokenize.NL, tokenize.COMMENT)]
    chars = list(code)
    strings = []
    for index, token in enumerate(significant):
        if token.type != tokenize.STRING:
            continue
        start = line_starts[token.start[0] - 1] + token.start[1]
        end = line_starts[token.end[0] - 1] + token.end[1]
        if (index == 0 or significant[index - 1].type in _LINE_STARTS) and (
            index + 1 == len(significant) or significant[index + 1].type in _LINE_ENDS
        ):
            chars[start:end] = [char if char == "\n" else " " for char in chars[start:end]]
        else:
            strings.append((start, end))
    todo_comments = []
    for token in tokens:
        if token.type == tokenize.COMMENT:
            start = line_starts[token.start[0] - 1] + token.start[1]
            chars[start : start + len(token.string)] = " " * len(token.string)
            if token.string.startswith(TODO_PREFIX):
                todo_comments.append((token.start[0] - 1, token.string))
    return "".join(chars), strings, todo_comments


_LINE_STARTS = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
_LINE_ENDS = (tokenize.NEWLINE, tokenize.ENDMARKER)


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

    @classmethod
    def of(cls, code: str, count: int) -> _Statements:
        try:
            tree = ast.parse(code)
        except SyntaxError:  # code libcst reads and Python's parser does not: TODOs go on the line itself
            tree = ast.Module(body=[], type_ignores=[])
        return cls(tree, count, code)

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

    def import_users(self, hits: list[_Hit]) -> dict[int, list[int]]:
        """First line of each import statement a hit is on -> first lines of the statements that use a
        name it binds.

        An import is kept because code that uses it is kept: when every such statement carries a TODO, the
        import needs none of its own (the imports machinery drops it once those statements are rewritten).
        """
        bound: dict[str, int] = {}
        for hit in hits:
            node = self.imports.get(hit.statement)
            for alias in node.names if node is not None else ():
                bound[alias.asname or alias.name.split(".")[0]] = hit.statement
        if not bound:
            return {}
        users: dict[int, list[int]] = {line: [] for line in bound.values()}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in bound:
                users[bound[node.id]].append(self.start_of(node.lineno - 1))
        return users


# Keyword arguments (and `metadata={"help": ...}` keys) that hold text for a person: help, usage, a skip reason.
_TEXT_KEYWORDS = frozenset({"help", "description", "epilog", "usage", "reason", "msg"})


class _ShownStrings(ast.NodeVisitor):
    """Character spans of the string literals a program only prints, logs, raises, asserts or shows as help."""

    def __init__(self, code: str) -> None:
        self.lines = _split_lines(code)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        self.spans: list[tuple[int, int]] = []

    def _offset(self, line: int, column: int) -> int:
        text = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        return self.starts[line - 1] + len(text.encode()[:column].decode(errors="replace"))

    def _span(self, node: ast.AST) -> tuple[int, int]:
        return self._offset(node.lineno, node.col_offset), self._offset(node.end_lineno, node.end_col_offset)

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
    import_users: dict[int, list[int]] | None = None,
) -> tuple[str, list[Finding]]:
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
    # Imports last: whether the statements that use them carry a TODO includes the ones added here.
    for hit in sorted(hits, key=lambda hit: hit.statement in import_users):
        users = import_users.get(hit.statement)
        if users and all(_todos_above(lines, user) or user in covered for user in users):
            continue
        above = _todos_above(lines, hit.statement)
        others = hit.statement in by_rule or any(not _is_scan_todo(todo) for todo in above)
        if hit.todo not in above and manual_reported and others:
            continue
        scope = -1 if hit.pattern.whole_file else hit.scope
        key = (scope, hit.pattern.rule.code, hit.pattern.subject_of(hit.found))
        groups.setdefault(key, []).append(hit)
        covered.add(hit.statement)
    if not groups:
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
        why = first.pattern.why.format(first.found) + also_on(others)
        added.append(
            Finding(
                first.pattern.rule,
                to_input(first.line) + 1,
                first.column,
                f"{why}; {first.pattern.action}",
                False,
                why=why,
                action=first.pattern.action,
                subject=first.pattern.subject_of(first.found),
                also=tuple(others),
            )
        )
    out = []
    for number, line in enumerate(lines):
        if number in inserts:
            indent = line[: len(line) - len(line.lstrip(" \t"))]
            newline = "\r\n" if line.endswith("\r\n") else "\n"
            out += [f"{indent}{todo}{newline}" for todo in inserts[number]]
        out.append(line)
    merged = sorted([*findings, *added], key=lambda f: (f.line, f.column, f.code))
    return "".join(out), merged


def _todos_above(lines: list[str], line: int) -> set[str]:
    above = set()
    for number in range(line - 1, -1, -1):
        text = lines[number].strip()
        if not text.startswith("#"):
            break
        above.add(text)
    return {text for text in above if text.startswith(TODO_PREFIX)}


def _is_scan_todo(todo: str) -> bool:
    code = todo[len(TODO_PREFIX) :].split(None, 1)[0] if len(todo) > len(TODO_PREFIX) else ""
    return code in _SCAN_CODES


def _line_map(before: str, after_lines: list[str]) -> Callable[[int], int]:
    """0-based output line -> the input line it came from (an added line: where its block was)."""
    before_lines = _split_lines(before)
    if before_lines == after_lines:
        return lambda line: line
    blocks = difflib.SequenceMatcher(None, before_lines, after_lines, autojunk=False).get_opcodes()

    def to_input(line: int) -> int:
        for tag, i1, _, j1, j2 in blocks:
            if j1 <= line < j2:
                return i1 + (line - j1) if tag == "equal" else min(i1, max(len(before_lines) - 1, 0))
        return max(len(before_lines) - 1, 0)

    return to_input
