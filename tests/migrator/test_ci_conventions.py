"""What CI setups use: the pre-commit hook runs `neuron-migrate --check` on the files it is given, and the
code-scanning workflow of docs/using/ci.md uploads the SARIF report the CLI writes."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from commands.neuron_migrate import main

ROOT = Path(__file__).resolve().parents[2]


def _hook() -> dict:
    """The hook as pre-commit reads it, its defaults filled in (pre-commit's own manifest loader)."""
    from pre_commit.clientlib import load_manifest

    (hook,) = load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))
    return hook


def _files_for_hook(hook: dict, root: Path) -> list[str]:
    """The files of `root` pre-commit hands the hook (its own file filter and `identify` tags)."""
    from pre_commit.commands.run import Classifier, filter_by_include_exclude

    names = sorted(path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file())
    old = Path.cwd()
    os.chdir(root)
    try:
        classifier = Classifier(names)
        included = filter_by_include_exclude(classifier.filenames, hook["files"], hook["exclude"])
        return sorted(classifier.by_types(included, hook["types"], hook["types_or"], hook["exclude_types"]))
    finally:
        os.chdir(old)


@pytest.fixture
def repository(tmp_path):
    """A repository as users keep one: scripts, a notebook, launchers with and without a suffix, pip
    requirements files, an extensionless Python tool, docs, data and an image."""
    files = {
        "train.py": "import torch\n",
        "notebooks/explore.ipynb": json.dumps(
            {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        ),
        "scripts/run.sh": "#!/bin/bash\ntorchrun train.py\n",
        "scripts/launch": "#!/usr/bin/env bash\ntorchrun train.py\n",
        "jobs/train.sbatch": "#!/bin/bash\n#SBATCH --nodes=1\nsrun torchrun train.py\n",
        "requirements.txt": "torch\n",
        "requirements-dev.txt": "pytest\n",
        "docker/dev_requirements.txt": "ruff\n",
        "bin/tool": "#!/usr/bin/env python3\nprint('a Python script without a suffix')\n",
        "Makefile": "all:\n\tpython train.py\n",
        "README.md": "# project\n",
        "data/train.csv": "a,b\n1,2\n",
        "docs/figure.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00",
    }
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    (tmp_path / "scripts" / "launch").chmod(0o755)
    (tmp_path / "bin" / "tool").chmod(0o755)
    return tmp_path


def _run_hook(hook: dict, root: Path, names: list[str]):
    program, *options = shlex.split(hook["entry"])
    assert (
        f'{program} = "commands.neuron_migrate:main"' in (ROOT / "pyproject.toml").read_text()
    )  # [project.scripts]
    # pre-commit appends the staged file names to the entry, run from the repository's top.
    old = Path.cwd()
    os.chdir(root)
    try:
        return CliRunner().invoke(main, [*options, *names], catch_exceptions=False)
    finally:
        os.chdir(old)


def test_pre_commit_hook_gets_every_file_the_tool_reads_and_nothing_else(repository):
    hook = _hook()
    assert hook["language"] == "python" and "--check" in hook["entry"]
    names = _files_for_hook(hook, repository)
    read = {
        "train.py",
        "notebooks/explore.ipynb",
        "scripts/run.sh",
        "scripts/launch",
        "jobs/train.sbatch",
        "requirements.txt",
        "requirements-dev.txt",
        "docker/dev_requirements.txt",
    }
    assert read <= set(names)
    assert not {"README.md", "data/train.csv", "docs/figure.png"} & set(names)
    # What it is given but does not read (a file without a suffix and without a shell #! line) is left out,
    # never a failure: an extensionless Python script made the hook exit 2 and check nothing.
    clean = _run_hook(hook, repository, names)
    assert clean.exit_code == 0, clean.output
    assert f"{len(read)} files checked" in clean.stderr


def test_pre_commit_hook_fails_on_legacy_code_and_pins(repository):
    hook = _hook()
    (repository / "requirements.txt").write_text("optimum-neuron==0.4.5\ntorch\n")
    (repository / "scripts" / "launch").write_text(
        "#!/bin/bash\nexport NEURON_FUSE_SOFTMAX=1\ntorchrun train.py\n"
    )
    (repository / "train.py").write_text("import torch_xla.core.xla_model as xm\n\nxm.mark_step()\n")
    names = _files_for_hook(hook, repository)
    failing = _run_hook(hook, repository, names)
    assert failing.exit_code == 1, failing.output
    for name in ("requirements.txt:1", "scripts/launch:2", "train.py:3"):
        assert name in failing.stdout
    assert "mark_step" in (repository / "train.py").read_text()  # it reports, it writes nothing


def test_pre_commit_environment_installs_only_what_neuron_migrate_imports(tmp_path):
    """pre-commit installs the package with its dependencies: those are what `neuron-migrate` imports, and
    nothing of the harness (torch, Transformers...) or of the pages (pandas, jinja2)."""
    base = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~\[ ;]", requirement)[0].lower() for requirement in base}
    assert names == {"libcst", "click", "nbformat", "ipython", "tree-sitter", "tree-sitter-bash", "packaging"}
    heavy = ["torch", "transformers", "trl", "peft", "accelerate", "pandas", "numpy", "jinja2", "psutil"]
    blocker = textwrap.dedent(
        f"""
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {heavy!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        sys.meta_path.insert(0, Block())
        from commands.neuron_migrate import main
        main()
        """
    )
    every_kind = ROOT / "fixtures" / "migrator"
    run = subprocess.run(
        [sys.executable, "-c", blocker, "--check", "-j", "2", str(every_kind)], capture_output=True, text=True
    )
    assert run.returncode == 1, run.stderr[-2000:]
    assert "error" not in run.stderr.split("\n")[-2] and "No module named" not in run.stdout + run.stderr
    checklist = subprocess.run(
        [sys.executable, "-c", blocker, "checklist", str(every_kind)], capture_output=True, text=True
    )
    assert checklist.returncode == 2
    extra = "which the reports extra installs: pip install 'neuron-migrate[reports]'"
    assert re.search(rf"needs (jinja2|pandas), {re.escape(extra)}", checklist.stderr)


def test_the_code_scanning_workflow_uploads_the_sarif_file_the_cli_writes(tmp_path):
    page = (ROOT / "docs" / "using" / "ci.md").read_text()
    workflow = yaml.safe_load(re.search(r"```yaml\n(# \.github/workflows/.*?)```", page, re.S)[1])
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


def test_both_commands_take_dash_h_and_complete_in_the_shell(tmp_path):
    """`neuron-compat -h` was an error; shell completion (docs/using/ci.md) offers the subcommands and paths."""
    from commands.neuron_compat import main as compat

    for command, args in (
        (main, ["-h"]),
        (main, ["checklist", "-h"]),
        (compat, ["-h"]),
        (compat, ["report", "-h"]),
    ):
        result = CliRunner().invoke(command, args)
        assert result.exit_code == 0 and result.output.startswith("Usage:"), args
    completion = subprocess.run(
        [sys.executable, "-c", "from commands.neuron_migrate import main; main(prog_name='neuron-migrate')"],
        env=os.environ
        | {
            "_NEURON_MIGRATE_COMPLETE": "bash_complete",
            "COMP_WORDS": "neuron-migrate che",
            "COMP_CWORD": "1",
        },
        capture_output=True,
        text=True,
    )
    assert completion.stdout.split() == ["plain,checklist", "file,che"]
