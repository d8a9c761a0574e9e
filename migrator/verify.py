"""Every output is checked with the parser of its kind before it is written; a failing one never is."""

from __future__ import annotations

import ast
import builtins
import contextlib
import re
import shutil
import subprocess
import symtable
import sys

import libcst as cst


class MigrationError(Exception):
    """A file could not be migrated (parse error, rewrite that would not parse); it is left untouched."""


PYTHON_RECURSION_LIMIT = 1000  # Python's default, under which `python script.py` compiles a script


def python_tree(content: str) -> ast.Module:
    """Python's own parse of a file, before libcst's: Python refuses cleanly (and fast) what is nested too
    deeply, where libcst's native parser can overflow its stack and kill the process, or take minutes. It
    parses under Python's default recursion limit (workers raise it for libcst's walks): a file nested deeper
    than Python itself compiles (a 10,000-term sum) is refused in milliseconds."""
    limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(min(limit, PYTHON_RECURSION_LIMIT))
        return ast.parse(content)
    except SyntaxError as error:
        raise MigrationError(_python_message(content, error)) from None
    except ValueError as error:  # Python 3.11: null bytes
        raise MigrationError(_python_message(content, SyntaxError(str(error)))) from None
    except (RecursionError, MemoryError):
        raise MigrationError(
            "cannot parse: nested too deeply for Python's own parser (under its default recursion limit); "
            "file left untouched"
        ) from None
    finally:
        sys.setrecursionlimit(limit)


def _python_message(content: str, error: SyntaxError) -> str:
    if error.lineno is None and "\0" in content:  # Python gives no position for a NUL byte
        at = content.index("\0")
        line, column = content.count("\n", 0, at) + 1, at - content.rfind("\n", 0, at)
        return f"line {line}, column {column}: cannot parse: a NUL byte (Python source cannot contain one)"
    if error.lineno is None:
        return f"cannot parse: {error.msg}"
    return f"line {error.lineno}, column {error.offset}: cannot parse: {error.msg}"


def syntax_error_message(error: cst.ParserSyntaxError) -> str:
    """libcst's own message, for code Python's parser accepted (`python_tree` reports the rest as Python does)."""
    return f"line {error.raw_line}, column {error.raw_column + 1}: cannot parse: {error.message}"


def _internal(what: str) -> MigrationError:
    return MigrationError(f"internal error: {what}; file left untouched, please report this")


def verify_python(before: str, code: str) -> None:
    """The rewrite must parse with Python itself (it is libcst's codegen of the tree libcst parsed, so libcst
    reads it back; parsing it again with libcst would add most of a round trip to every migrated file), and use
    no global name that it does not bind where the input bound it (an import removed while a use is left).
    Python's symbol tables parse the code too: one parse serves both checks."""
    try:
        unbound = _unbound_globals(code)
    except SyntaxError:
        unbound = set()  # the tables refuse more than the grammar does (`nonlocal` at the top): parse alone
        try:
            ast.parse(code)
        except SyntaxError as error:
            raise _internal(
                f"the migrated code would not parse (line {error.lineno}: {error.msg})"
            ) from error
    if unbound:  # names the input itself reads unbound are not the rewrite's doing
        with contextlib.suppress(SyntaxError):
            unbound -= _unbound_globals(before)
    if unbound:
        raise _internal(f"the migrated code uses {', '.join(sorted(unbound))}, which it no longer binds")


# Names every module has without binding them.
STAR_IMPORT = re.compile(r"^\s*from\s+\S+\s+import\s+\(?\s*\*", re.MULTILINE)
_MODULE_NAMES = frozenset(dir(builtins)) | {"__file__", "__builtins__", "__annotations__", "__path__"}


def _unbound_globals(code: str) -> set[str]:
    """Global names the code reads and never binds at module level (Python's own symbol tables), or nothing
    when it cannot be known (a star import binds names no table shows). Raises SyntaxError where Python
    refuses the code."""
    if STAR_IMPORT.search(code):
        ast.parse(code)
        return set()
    module = symtable.symtable(code, "<code>", "exec")
    bound = {
        symbol.get_name() for symbol in module.get_symbols() if symbol.is_assigned() or symbol.is_imported()
    }
    read: set[str] = set()
    tables = [module]
    while tables:
        table = tables.pop()
        tables.extend(table.get_children())
        for symbol in table.get_symbols():
            if symbol.is_referenced() and (table is module or symbol.is_global()):
                read.add(symbol.get_name())
            elif symbol.is_declared_global() and symbol.is_assigned():  # `global NAME` then assigned
                bound.add(symbol.get_name())
    return read - bound - _MODULE_NAMES


def verify_shell(before: str, after: str) -> None:
    """No more tree-sitter ERROR/MISSING nodes than the input had, and `bash -n` no worse than on the input."""
    from usercode.shell import problems

    added = problems(after.encode()) - problems(before.encode())
    if added > 0:
        raise _internal(f"the migrated shell script has {added} more syntax error(s) than the input")
    if _bash_n(after) is False and _bash_n(before) is not False:
        raise _internal("`bash -n` rejects the migrated shell script")


def _bash_n(script: str) -> bool | None:
    """Whether `bash -n` accepts the script; None when there is no bash to ask."""
    bash = shutil.which("bash")
    if bash is None:
        return None
    run = subprocess.run([bash, "-n"], input=script.encode(), capture_output=True, timeout=30)
    return run.returncode == 0
