"""The main job: scripts/demo.sh migrates the examples and writes the report and the checklist."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "fixtures" / "compat" / "results-neuron-sim.jsonl"


@pytest.mark.skipif(
    not REFERENCE.is_file(), reason="the reference run (fixtures/compat) is not committed yet"
)
def test_demo_writes_everything_and_says_where():
    examples_before = {
        path: path.read_bytes() for path in (REPO / "fixtures" / "examples").rglob("*") if path.is_file()
    }
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "demo.sh")],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr
    for name in ("compat.html", "checklist.html", "checklist.md"):
        path = REPO / "out" / name
        assert path.is_file() and path.stat().st_size > 1000
        assert str(path) in result.stdout
    # --output-dir writes the whole tree: the migrated examples and every other file beside them.
    assert sorted(p.name for p in (REPO / "out" / "migrated").iterdir()) == sorted(
        p.name for p in (REPO / "fixtures" / "examples").iterdir()
    )
    # The checklist sits next to the report: its models link to their rows there.
    assert 'href="compat.html#arch-' in (REPO / "out" / "checklist.html").read_text()
    # The migrated Trainer example ran on the stand-in; the checklist shows what the try measured.
    (run,) = json.loads((REPO / "out" / "try.json").read_text())["runs"]
    assert run["command"].startswith("python sft_llama.py") and run["status"] == "ran", run["reason"]
    assert run["steps"] >= 2 and run["loss_finite"] is True
    assert "Tried: `python sft_llama.py" in (REPO / "out" / "checklist.md").read_text()
    # The examples themselves are never modified.
    assert examples_before == {path: path.read_bytes() for path in examples_before}
