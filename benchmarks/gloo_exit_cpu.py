"""A process group left to the interpreter's exit, on plain CPU (gloo, torchrun, no stand-in): how often a
finished two-process program aborts ("terminate called without an active exception", SIGABRT) without
`torch.distributed.destroy_process_group()`, and with it. PyTorch's own behaviour (pytorch/pytorch#179291): what
neuron-migrate's `_init_process_group()` helper avoids by destroying the group it creates at exit, and what a try
reports as PyTorch's when a program of its own leaves one (try_run/upstream_failures.json).

    .venv/bin/python benchmarks/gloo_exit_cpu.py [--runs 12]

Prints one JSON line: torch's version and, for each way, the runs and those that aborted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

PROGRAM = """
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.ones(2) * dist.get_rank()
dist.all_reduce(total)
print(dist.get_rank(), total.tolist(), flush=True)
"""
ABORT = "terminate called without an active exception"


def aborted_runs(program: Path, runs: int) -> int:
    aborted = 0
    for _ in range(runs):
        result = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", str(program)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        aborted += result.returncode != 0 and ABORT in result.stdout + result.stderr
    return aborted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12, help="two-process runs of each way")
    args = parser.parse_args()
    figures = {"torch": torch.__version__, "runs": args.runs}
    with tempfile.TemporaryDirectory() as folder:
        for way, ending in (("without_destroy", ""), ("with_destroy", "dist.destroy_process_group()\n")):
            program = Path(folder, f"{way}.py")
            program.write_text(PROGRAM + ending)
            figures[way] = {"aborted": aborted_runs(program, args.runs)}
            print(f"{way}: {figures[way]['aborted']} of {args.runs} aborted", file=sys.stderr, flush=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
