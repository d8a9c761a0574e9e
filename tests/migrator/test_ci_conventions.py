"""What CI setups use: the pre-commit hook runs `neuron-migrate --check` on the files it is given, and the
README's code-scanning workflow uploads the SARIF report the CLI writes."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import yaml
from click.testing import CliRunner

from migrator.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _hook() -> dict:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    return hook


def test_pre_commit_hook_runs_the_installed_command_in_check_mode(tmp_path):
    hook = _hook()
    program, *options = shlex.split(hook["entry"])
    assert f'{program} = "migrator.cli:main"' in (ROOT / "pyproject.toml").read_text()  # [project.scripts]
    assert options == ["--check"]
    assert hook["language"] == "python" and set(hook["types_or"]) == {"python", "shell", "jupyter"}
    legacy, clean = tmp_path / "train.py", tmp_path / "run.sh"
    legacy.write_text("import torch_xla.core.xla_model as xm\n\nxm.mark_step()\n")
    clean.write_text("#!/bin/bash\ntorchrun train.py\n")
    # pre-commit appends the staged file names to the entry.
    failing = CliRunner().invoke(main, [*options, str(legacy), str(clean)], catch_exceptions=False)
    assert failing.exit_code == 1 and "mark_step" in legacy.read_text()  # reports, writes nothing
    passing = CliRunner().invoke(main, [*options, str(clean)], catch_exceptions=False)
    assert passing.exit_code == 0, passing.output


def test_readme_code_scanning_workflow_uploads_the_sarif_file_the_cli_writes(tmp_path):
    readme = (ROOT / "README.md").read_text()
    workflow = yaml.safe_load(re.search(r"```yaml\n(# \.github/workflows/.*?)```", readme, re.S)[1])
    steps = workflow["jobs"]["neuron-migrate"]["steps"]
    run = next(step["run"] for step in steps if step.get("run", "").lstrip().startswith("neuron-migrate"))
    upload = next(
        step for step in steps if step.get("uses", "").startswith("github/codeql-action/upload-sarif")
    )
    assert workflow["permissions"]["security-events"] == "write"
    command = shlex.split(run.strip().splitlines()[-1])
    assert command[0] == "neuron-migrate"
    report = command[command.index("--report") + 1]
    assert upload["with"]["sarif_file"] == report
    notebook = tmp_path / "train.ipynb"
    cell = {"cell_type": "code", "execution_count": None, "id": "a", "metadata": {}, "outputs": []}
    document = {
        "cells": [{**cell, "source": ["import torch_xla.core.xla_model as xm\n", "xm.mark_step()\n"]}],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    notebook.write_text(json.dumps(document, indent=1) + "\n")
    arguments = [a if a != "." else str(tmp_path) for a in command[1:]]
    arguments[arguments.index("--report") + 1] = str(tmp_path / report)
    result = CliRunner().invoke(main, arguments, catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    sarif = json.loads((tmp_path / report).read_text())
    (finding,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "NM301"]
    line = finding["locations"][0]["physicalLocation"]["region"]["startLine"]
    assert "xm.mark_step()" in notebook.read_text().splitlines()[line - 1]
