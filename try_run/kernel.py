"""Runs a notebook's code cells in order in a real kernel (nbclient + ipykernel), for `neuron-migrate try`.

`python kernel.py NOTEBOOK CELLS.json` (run by path, with any interpreter that has nbclient: it imports
nothing of neuron-migrate): CELLS.json holds the cell sources as the try runs them. The kernel inherits this process's environment, so the
stand-in and the try's instrumentation load in it and in the processes its `!torchrun` lines start.
Exit codes: 0 every cell ran, 1 a cell raised, 3 the kernel died.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

FAILED_CELL_MARK = "neuron-migrate-try-failed-cell:"
CELL_LINE = re.compile(r"^\[cell \d+/\d+\]$")  # printed before each cell's output
KERNEL_DIED = 3
# Run in the kernel after the last cell, so the report never depends on the kernel's exit: a graceful
# shutdown kills a kernel that takes over 5 s to tear torch down (a loaded machine) before its atexit
# hook runs, so the kernel is shut down at once instead.
WRITE_REPORT = "__import__('sys').modules['sitecustomize'].STATE.write()"


def main(argv: list[str]) -> int:
    import nbformat
    from nbclient import NotebookClient

    notebook, cells_file = Path(argv[0]), Path(argv[1])
    sources = json.loads(cells_file.read_text(encoding="utf-8"))
    document = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])
    client = NotebookClient(
        document,
        timeout=None,
        kernel_name="python3",
        shutdown_kernel="immediate",
        resources={"metadata": {"path": str(notebook.parent)}},
    )
    with client.setup_kernel():
        code = _run_cells(client, document)
        if code != KERNEL_DIED:
            client.wait_for_reply(client.kc.execute(WRITE_REPORT, silent=True, store_history=False))
        return code


def _run_cells(client, document) -> int:
    from nbclient.exceptions import CellExecutionError, DeadKernelError

    for number, cell in enumerate(document.cells, start=1):
        print(f"[cell {number}/{len(document.cells)}]", flush=True)
        try:
            client.execute_cell(cell, number - 1)
        except CellExecutionError as error:
            _print_outputs(cell)  # what the cell printed before it failed: a `%%bash` command's own error
            print(
                f"{FAILED_CELL_MARK} {json.dumps({'cell': number, 'ename': error.ename, 'evalue': error.evalue})}"
            )
            return 1
        except DeadKernelError as error:
            _print_outputs(cell)
            evalue = f"the kernel died in cell {number}: {error}"
            print(
                f"{FAILED_CELL_MARK} {json.dumps({'cell': number, 'ename': 'DeadKernelError', 'evalue': evalue})}"
            )
            return KERNEL_DIED
        _print_outputs(cell)
    return 0


def _print_outputs(cell) -> None:
    """The cell's text outputs (streams and results; an error's traceback is the try's report)."""
    texts = []
    for output in cell.get("outputs", []):
        text = output.get("text") or output.get("data", {}).get("text/plain", "")
        texts.append(text if isinstance(text, str) else "".join(text))
        if output.get("output_type") != "stream" and texts[-1] and not texts[-1].endswith("\n"):
            texts.append("\n")  # a result's text/plain has no newline of its own
    text = "".join(texts)  # a stream arrives in pieces: a line can be split between two outputs
    if text:
        print(text, end="" if text.endswith("\n") else "\n", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
