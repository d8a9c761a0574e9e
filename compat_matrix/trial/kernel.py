"""Runs a notebook's code cells in order in a real kernel (nbclient + ipykernel), for `neuron-migrate try`.

`python -m compat_matrix.trial.kernel NOTEBOOK CELLS.json`: CELLS.json holds the cell sources as the try
runs them (network set-up lines already replaced). The kernel inherits this process's environment, so the
stand-in and the try's instrumentation load in it and in the processes its `!torchrun` lines start.
Exit codes: 0 every cell ran, 1 a cell raised, 3 the kernel died.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

FAILED_CELL_MARK = "neuron-migrate-try-failed-cell:"


def main(argv: list[str]) -> int:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, DeadKernelError

    notebook, cells_file = Path(argv[0]), Path(argv[1])
    sources = json.loads(cells_file.read_text(encoding="utf-8"))
    document = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])
    client = NotebookClient(
        document, timeout=None, kernel_name="python3", resources={"metadata": {"path": str(notebook.parent)}}
    )
    with client.setup_kernel():
        for number, cell in enumerate(document.cells, start=1):
            print(f"[cell {number}/{len(document.cells)}]", flush=True)
            try:
                client.execute_cell(cell, number - 1)
            except CellExecutionError as error:
                print(
                    f"{FAILED_CELL_MARK} {json.dumps({'cell': number, 'ename': error.ename, 'evalue': error.evalue})}"
                )
                return 1
            except DeadKernelError as error:
                print(
                    f"{FAILED_CELL_MARK} {json.dumps({'cell': number, 'ename': 'DeadKernelError', 'evalue': f'the kernel died in cell {number}: {error}'})}"
                )
                return 3
            for output in cell.get("outputs", []):
                text = output.get("text") or output.get("data", {}).get("text/plain", "")
                if text:
                    print(
                        text if isinstance(text, str) else "".join(text),
                        end="" if str(text).endswith("\n") else "\n",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
