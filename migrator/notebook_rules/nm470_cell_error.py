"""NM470: a code cell IPython cannot parse is left as it is, with a TODO (`with_error_todo`); the other cells
are migrated. `migrator/notebook.py` finds such cells as it reads them."""

from __future__ import annotations

from migrator.notebook_rules import example
from migrator.rules import Example, Rule, Severity
from migrator.transform import TODO_PREFIX

CELL_ERROR = Rule(
    "NM470",
    Severity.ERROR,
    "A notebook code cell that IPython cannot parse, or whose rewrite would not parse",
    "Left unchanged but for a TODO above its code (the other cells are migrated): fix the cell so that it runs, "
    "then migrate again.",
    examples=(
        Example(
            example(">>> import torch_xla.core.xla_model as xm\n>>> device = xm.xla_device()").before,
            example(
                "# TODO(neuron-migrate): NM470 IPython cannot parse this cell, so it is left as it is: fix it so "
                "that it runs, then migrate again\n>>> import torch_xla.core.xla_model as xm\n"
                ">>> device = xm.xla_device()"
            ).before,
            kind="notebook",
        ),
    ),
)
RULES = (CELL_ERROR,)
HOOKS = {"unparsed_cell": "with_error_todo"}  # the events of `migrator/notebook.py` it takes

_CELL_ERROR_TODO = (
    f"{TODO_PREFIX} {CELL_ERROR.code} IPython cannot parse this cell, so it is left as it is: fix it so that it "
    "runs, then migrate again"
)


def with_error_todo(source: str) -> str | None:
    """The cell with the TODO of a cell that does not parse above its code (after a `%%bash` line; a cell of
    another magic, whose first line must stay first, cannot take one); None when it has one or cannot."""
    if _CELL_ERROR_TODO in source:
        return None
    header, newline, body = source.partition("\n")
    if source.startswith(("%%bash", "%%sh")):
        return f"{header}\n{_CELL_ERROR_TODO}\n{body}"
    if source.startswith("%%"):
        return None
    # Indented as the cell's first line: IPython strips that indentation from every line only when the first
    # line has it, so a TODO at column 0 would make an indented cell that runs stop parsing.
    first = next((line for line in source.splitlines() if line.strip()), "")
    return f"{first[: len(first) - len(first.lstrip())]}{_CELL_ERROR_TODO}\n{source}"
