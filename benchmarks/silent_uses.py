"""Legacy code left silent: statements of migrated code where legacy behaviour survives with no
`TODO(neuron-migrate)` on them (issue 32: every such statement carries its TODO, or is rewritten).

Each Python file and notebook under the given paths is migrated in memory (nothing is written; fixtures'
`.expected.` outputs are skipped, their inputs are migrated). In each output a statement is legacy when it
imports a Neuron SDK module (optimum.neuron, torch_xla, NxD, neuronperf, ...), uses a name such an import binds,
or holds a reference the leftover scan looks for (an XLA variable, an `"xla"` device, an inf2 instance type:
NM501 / NM502, in code and strings, not comments; `legacy_statements`); it is silent when no TODO comment stands
directly above it. A notebook is read as the kernel runs it: its code cells in order, through IPython; a cell
magic's body (`%%writefile train.py`, `%%bash`) is another file, migrated as one, with its TODOs inside: not
counted here.

    .venv/bin/python benchmarks/silent_uses.py fixtures/migrator /tmp/corpus [--list]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

from migrator.engine import migrate_notebook, migrate_python
from migrator.families.leftovers.marking import legacy_statements, todos_above
from migrator.verify import MigrationError
from usercode.sources import discover, read_text

CELL_MAGIC = "get_ipython().run_cell_magic("  # how IPython runs a `%%` cell


def notebook_python(notebook: str) -> str:
    """The code cells of a notebook as one module, as IPython runs them (a `pass` between cells keeps one cell's
    last comments from standing above the next cell's first statement)."""
    from IPython.core.inputtransformer2 import TransformerManager

    manager = TransformerManager()
    cells = []
    for cell in json.loads(notebook).get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        try:
            python = manager.transform_cell(source)
            ast.parse(python)  # a multi-line `!` command is no Python: the shell scan's (and not counted)
        except Exception:  # IPython's transforms raise several kinds on input they cannot read
            continue
        cells.append(python)
    return "\npass\n".join(cells)


def silent_uses(path: Path, kind: str) -> tuple[int, list[tuple[int, str, str]]]:
    """(legacy statements in the migrated file, the silent ones as (1-based line, code, reference))."""
    original = read_text(path, kind).content
    try:
        if kind == "notebook":
            before, after = notebook_python(original), notebook_python(migrate_notebook(original)[0])
        else:
            before, after = original, migrate_python(original)[0]
    except (MigrationError, json.JSONDecodeError, SyntaxError):
        return 0, []
    lines = after.splitlines()
    legacy = {
        line: found
        for line, found in legacy_statements(after, before).items()
        if not lines[line].lstrip().startswith(CELL_MAGIC)
    }
    silent = [
        (line + 1, lines[line].strip(), found)
        for line, found in legacy.items()
        if not todos_above(after, line)
    ]
    return len(legacy), silent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--list", action="store_true", help="print each silent statement")
    args = parser.parse_args()
    total = silent_total = files = 0
    for source in discover(args.paths):
        if source.kind not in ("python", "notebook") or ".expected." in source.path.name:
            continue
        files += 1
        legacy, silent = silent_uses(source.path, source.kind)
        total += legacy
        silent_total += len(silent)
        if args.list:
            for line, code, found in silent:
                print(f"{source.path}:{line}: {code[:100]}    [{found}]")
    print(
        f"{silent_total} of {total} legacy statements have no TODO on them ({files} files)", file=sys.stderr
    )


if __name__ == "__main__":
    main()
