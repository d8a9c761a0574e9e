"""Property: whatever the input, the output parses with the parser of its kind and a second run is a no-op.

Over every Python file of the installed transformers, trl and torch (real code nobody wrote for this tool;
the pre-filter skips most, the rest go through every family) and over every fixture of every kind.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import libcst as cst
import pytest

from migrator.engine import REWRITERS, MigrationError, migrate_python
from migrator.notebook_rules.nm470_cell_error import CELL_ERROR
from migrator.shell.installs import parse
from usercode.cells import python_of
from usercode.shell import problems
from usercode.sources import discover, file_kind, read_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "migrator"


@pytest.mark.parametrize("package", ["trl", "transformers", "torch"])
def test_library_sources_parse_after_migration_and_are_stable(package):
    root = Path(importlib.util.find_spec(package).origin).parent
    sources = [source for source in discover([root]) if source.kind == "python"]
    assert len(sources) > 50
    for source in sources:
        text = read_text(source.path, "python").content
        try:
            migrated, findings = migrate_python(text)
        except MigrationError as error:  # only a file Python itself rejects may be refused
            with pytest.raises(SyntaxError):
                ast.parse(text)
            assert "internal error" not in str(error)
            continue
        if migrated == text:
            continue
        assert findings, f"{source.path} changed with no finding"  # every change to a file has a finding
        ast.parse(migrated)
        cst.parse_module(migrated)
        again, again_findings = migrate_python(migrated)
        assert again == migrated, source.path
        assert not [f for f in again_findings if f.fixed], source.path


CASES = sorted(p for p in FIXTURES.rglob("*") if file_kind(p) and ".expected." not in p.name)


@pytest.mark.parametrize("case", CASES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_outputs_parse_with_the_parser_of_their_kind(case):
    kind = file_kind(case)
    source = read_text(case, kind).content
    migrated, findings = REWRITERS[kind](source)
    assert migrated == source or findings, "changed with no finding"
    if kind == "python":
        ast.parse(migrated)
    elif kind == "shell":
        assert problems(migrated.encode()) <= problems(source.encode())
        assert subprocess.run(["bash", "-n"], input=migrated.encode(), capture_output=True).returncode == 0
    elif kind == "requirements":  # every requirement line pip reads (a `\` continues a line)
        joined = re.sub(r"\\\n", " ", migrated)
        lines = [re.sub(r"\s-.*", "", line.split(" #")[0]).strip() for line in joined.splitlines()]
        assert all(parse(line) is not None for line in lines if line and not line.startswith(("#", "-")))
    elif kind == "pyproject":
        tomllib.loads(migrated)
    else:
        broken = {f.cell for f in findings if f.rule is CELL_ERROR}
        code_cells = [c for c in json.loads(migrated)["cells"] if c["cell_type"] == "code"]
        for number, cell in enumerate(code_cells, start=1):
            text = "".join(cell["source"])
            if number not in broken and not text.startswith("%%"):
                python_of(text.splitlines(keepends=True))


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            "from neuronx_distributed.utils.model_utils import get_delay_tracing\n\n"
            "def parameters(cfg, module):\n    if get_delay_tracing(cfg):\n"
            "        for name, p in module.named_parameters():\n            yield name, p\n",
            id="todo-about-an-if-test",
        ),
        pytest.param(
            "# Copyright header\n\nfrom optimum.neuron.cache import synchronize_hub_cache\n\nsynchronize_hub_cache()\n",
            id="todo-above-the-first-statement",
        ),
    ],
)
def test_a_todo_is_written_once(source):
    """Shapes from optimum-neuron and NxD sources where a second run used to add a second TODO."""
    once, findings = migrate_python(source)
    assert once.count("TODO(neuron-migrate)") == 2  # the kept import's own and the statement's
    assert migrate_python(once)[0] == once
    if "if get_delay_tracing" in source:  # the TODO is about the `if` line, so it sits above it
        lines = once.splitlines()
        above = lines[next(i for i, line in enumerate(lines) if "if get_delay_tracing" in line) - 1]
        assert above.startswith("    # TODO(neuron-migrate): NM316")
