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


def test_the_folders_a_script_puts_on_sys_path_from_its_own_location():
    import ast
    from pathlib import Path

    from usercode.python import sys_path_folders

    script = Path("/repo/pkg/tools/train.py")
    code = """
import os, sys
from pathlib import Path
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
sys.path.append(str(Path(__file__).resolve().parent.parent.parent))
sys.path.insert(0, os.path.dirname(__file__) + "/lib")  # a concatenation: not read
sys.path.append(Path(__file__).parents[1] / "vendor")
sys.path.insert(0, "src")  # relative to the working directory, which the script does not know
sys.path.insert(0, os.environ["CODE_DIR"])  # read at run time
sys.path.append(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "common"))
"""
    assert sys_path_folders(ast.parse(code), script) == [
        Path("/repo/pkg"),
        Path("/repo"),
        Path("/repo/pkg/vendor"),
        Path("/repo/pkg/common"),
    ]


def test_a_module_found_through_the_scripts_own_sys_path_entry_is_read_with_it(tmp_path):
    from try_run import plan

    (tmp_path / "project" / "scripts").mkdir(parents=True)
    (tmp_path / "project" / "model.py").write_text("import timm\n")
    script = tmp_path / "project" / "scripts" / "train.py"
    script.write_text(
        "import os, sys\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))\nfrom model import Net\n"
    )
    assert plan.local_modules(script, [script.parent]) == [tmp_path / "project" / "model.py"]
