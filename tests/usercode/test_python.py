"""`usercode.python`: what a Python text imports, which of its imports the code cannot run without, and its
nodes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from usercode.python import ast_nodes, python_imports, required_imports


@pytest.mark.parametrize("path", sorted(Path("fixtures/migrator").rglob("*.py")), ids=str)
def test_ast_nodes_are_ast_walk_in_its_order(path):
    tree = ast.parse(path.read_text())
    assert [id(node) for node in ast_nodes(tree)] == [id(node) for node in ast.walk(tree)]


def test_required_imports_leave_out_those_the_code_lets_fail():
    code = """
import a
try:
    import b
    from c.d import e
except ImportError:
    b = None
else:
    import f
try:
    import g
except ImportError:
    raise SystemExit("this needs g")
try:
    import h
except (ValueError, ModuleNotFoundError):
    pass
try:
    import i
except ValueError:
    pass


def later():
    import j
"""
    assert required_imports(code) == {"a", "f", "g", "i", "j"}
    assert python_imports(code) >= {"b", "c.d", "h"}
    assert required_imports("not python (") == frozenset()
