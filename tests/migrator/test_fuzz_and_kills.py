"""The measurement scripts, small and bounded (the full runs and their figures: docs/reference/safety.md): mutation
fuzzing and kills / races of in-place runs find no violation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_script(name: str, *args: str) -> dict:
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), *args], capture_output=True, text=True, timeout=600
    )
    assert run.stdout.strip(), f"{name} printed no figures (exit {run.returncode}): {run.stderr[-3000:]}"
    figures = json.loads(run.stdout)
    assert figures["violations"] == [], figures["violations"]
    assert run.returncode == 0, run.stderr[-2000:]
    return figures


def test_mutation_fuzz_finds_no_violation():
    figures = run_script("mutation_fuzz.py", "--mutants", "30", "--seed", "22")
    assert sum(figures["outcome_under_check"].values()) == 30
    assert figures["bad_input_runs"] >= 10


def test_kills_edits_and_concurrent_runs_lose_nothing():
    figures = run_script("kill_race.py", "--kills", "3", "--edits", "2", "--concurrent", "1", "--copies", "1")
    assert figures["kills"]["runs"] == 3 and figures["edits_during_a_run"]["runs"] == 2
