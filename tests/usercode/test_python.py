"""`usercode.python`: what a Python text imports, and which of its imports the code cannot run without."""

from __future__ import annotations

from usercode.python import python_imports, required_imports


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
