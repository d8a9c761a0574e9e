"""TP + LoRA on plain CPU (gloo, eager, no stand-in): PEFT 0.21.2's row-parallel adapter fails its first forward,
and the statement NM223 writes makes it train with the loss of one process (benchmarks/tp_compile_cpu.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from try_run import report

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "tp_compile_cpu.py"
TOLERANCE = 1e-3  # bf16, and a TP all-reduce that sums in another order (docs/reference/tensor-parallel.md)


def tp_compile_cpu(processes: int, *arguments: str) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    launcher = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={processes}"]
    command = [*(launcher if processes > 1 else [sys.executable]), str(SCRIPT), *arguments]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stderr[-3000:]
    return json.loads(lines[-1])


def test_a_row_parallel_adapter_fails_without_nm223_and_trains_like_one_process_with_it():
    lora = ["--lora", "--lora-modules", "q_proj,o_proj,down_proj", "--no-compile", "--same-adapter-init"]
    broken = tp_compile_cpu(2, "--tp", "2", *lora)
    assert "is invalid for input of size" in broken["error"]["head"]

    fixed = tp_compile_cpu(2, "--tp", "2", *lora, "--adapter-features")
    reference = tp_compile_cpu(1, "--tp", "1", *lora)
    assert len(fixed["losses"]) == len(reference["losses"]) == 4
    assert max(abs(a - b) for a, b in zip(fixed["losses"], reference["losses"], strict=True)) < TOLERANCE
    # the adapters learned: a loss that stays put would pass the comparison with a frozen adapter too
    assert reference["losses"][-1] < reference["losses"][0] - 0.05


def test_the_compiled_failure_is_named_as_peft_s_with_its_cpu_reproduction():
    message = (
        "RuntimeError when making fake tensor call\n  Explanation: Dynamo failed to run FX node with fake tensors: "
        "call_function <built-in function linear>(*(DTensor(local_tensor=FakeTensor(..., size=(2, 48, 32)"
    )
    known = report.upstream_failure(message)
    assert known["owner"].startswith("PEFT 0.21.2")
    assert "in_features" in known["what"] and "NM223" in known["avoid"]
    assert "--adapter-features" in known["reproduced_by"]
