"""Migrated fixture scripts run: each output the installed stack can import is run as `import` runs it (its
module-level code, not its `__main__` part) in a subprocess, with fakes for the `neuron` device only
(`run_fixture_outputs.py`). It must run, or stop at its data (the Hub is offline here, files are absent).

An output that imports, at module level, a module this environment lacks (left for manual work, like
`optimum.neuron` kept with a TODO, or a package the fixture's user has and the test stack does not, like
torchvision) is not a complete script here; which ones are is printed with `-rA`.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.migrator.run_fixture_outputs import FAKED_MODULES

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "migrator"
RUNNER = Path(__file__).with_name("run_fixture_outputs.py")
TODO_PREFIX = "# TODO(neuron-migrate):"
OUTPUTS = sorted({*FIXTURES.rglob("*.expected.py"), *FIXTURES.rglob("unchanged_*.py")})


def unresolved(path: Path) -> list[str]:
    """What keeps a script from being imported here: top-level modules it imports at module level (outside a
    `try`, whose `except` may stand in) that are neither installed, nor beside it, nor the device fake; and
    imports left with a TODO (a name the installed library no longer has, for a person to replace)."""
    text = path.read_text()
    lines = text.splitlines()
    pending = list(ast.parse(text).body)
    names, todo = [], []
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)) and lines[node.lineno - 2].strip().startswith(
            TODO_PREFIX
        ):
            todo.append(f"line {node.lineno} (TODO)")
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.append(node.module or "")
        elif isinstance(node, ast.If):
            pending += [*node.body, *node.orelse]
    missing = []
    for top in sorted({name.partition(".")[0] for name in names}):
        beside = (path.parent / f"{top}.py").exists() or (path.parent / top).is_dir()
        if not beside and top not in FAKED_MODULES and importlib.util.find_spec(top) is None:
            missing.append(top)
    return missing + sorted(todo)


def run_outputs(scripts: list[Path], directory: Path) -> dict[str, list[str]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **os.environ,
        # Never the Hub, never a cache this machine happens to have.
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(directory / "hf"),
        # A one-process torchrun world, for the scripts that initialise a process group at import.
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }
    out = directory / "results.json"
    subprocess.run(
        [sys.executable, str(RUNNER), str(out), *map(str, scripts)],
        cwd=directory,
        env=env,
        timeout=600,
        check=True,
        capture_output=True,
    )
    return json.loads(out.read_text())


def test_every_complete_fixture_output_runs_as_imported(tmp_path: Path) -> None:
    complete = [path for path in OUTPUTS if not unresolved(path)]
    for path in sorted(set(OUTPUTS) - set(complete)):
        print(f"not complete here: {path.relative_to(FIXTURES)} imports {', '.join(unresolved(path))}")
    results = run_outputs(complete, tmp_path)
    for script, (outcome, detail) in results.items():
        print(f"{outcome}: {Path(script).relative_to(FIXTURES)} {detail}")
    failed = {Path(s).relative_to(FIXTURES).as_posix(): d for s, (o, d) in results.items() if o == "failed"}
    assert failed == {}
    # Most complete outputs run through their module-level code: the check is not a list of skips.
    assert sum(outcome == "ran" for outcome, _ in results.values()) >= len(complete) // 2


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        ('import torch\ndevice = torch.device("neuron", 0)\n', "ran"),
        ('import torch.distributed as dist\ndist.init_process_group("neuron")\n', "ran"),
        ("from transformers import AutoConfig\nAutoConfig.from_pretrained('gpt2')\n", "needs data"),
        (
            "import os\nfrom transformers import DistributedConfig\nDistributedConfig(tp_size=2, fsdp_size=int(os.environ['WORLD_SIZE']) // 2)\n",
            "needs launch",
        ),
        ("import torch\nmodel = torch.nn.Linear(2, 2)\nmodel.modul.weight\n", "failed"),
        ('import torch\ntorch.ones(2, device="neuron")\n', "needs device"),
        ('if __name__ == "__main__":\n    raise SystemExit(3)\n', "ran"),
    ],
)
def test_the_runner_tells_a_broken_script_from_one_that_needs_its_data(tmp_path: Path, code, outcome) -> None:
    script = tmp_path / "script.py"
    script.write_text(code)
    assert run_outputs([script], tmp_path)[str(script)][0] == outcome


def test_an_import_left_for_manual_work_makes_a_script_incomplete(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import os\ntry:\n    import torch_neuronx\nexcept ImportError:\n    pass\nimport optimum.neuron\n"
    )
    assert unresolved(script) == ["optimum"]
