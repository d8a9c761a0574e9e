"""`neuron-migrate try`'s sandbox (try_run/sandbox.py), with the reproducers of issue 28: each wrote, deleted,
installed, connected or outlived the run before the sandbox. The user's tree is hashed and the tool's
environment `pip freeze`d before and after."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.compat_matrix.test_trial_runs import CLI, run_try, write
from try_run.device import STANDIN_DEVICE


def tree_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def pip_freeze() -> str:
    return subprocess.run(
        [sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True, check=True
    ).stdout


def surviving(marker: str) -> list[str]:
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in processes.splitlines() if marker in line and "ps -eo" not in line]


# A script that does, in one run, what the reproducers did one by one.
WRITES = """
import os, socket, subprocess, sys, torch
torch.save({"w": torch.zeros(4)}, "model.pt")
os.makedirs("outputs/run1", exist_ok=True)
open("outputs/run1/log.txt", "w").write("written by the script")
from transformers import BertConfig, BertModel
BertModel(BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8,
                     vocab_size=32)).save_pretrained(sys.argv[1])
torch.save({}, os.path.expanduser("~/home_checkpoint.pt"))
torch.save({}, sys.argv[2])
subprocess.Popen(["sleep", "987651"], start_new_session=True)
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[3])), timeout=2).close()
    print("network: connected")
except OSError as error:
    print("network: refused", error)
print("HF_TOKEN:", os.environ.get("HF_TOKEN"), "| AWS:", sorted(k for k in os.environ if k.startswith("AWS_")),
      "| WANDB:", os.environ.get("WANDB_API_KEY"))
"""


@pytest.mark.slow
def test_a_scripts_writes_network_credentials_and_children_stay_in_the_sandbox(
    tmp_path, try_cache, monkeypatch
):
    tree = tmp_path / "project"
    (tree / "data").mkdir(parents=True)
    for index in range(5200):  # past the old copy's 5,000 files, where folders were linked
        (tree / "data" / f"{index}.txt").write_text(str(index))
    (tree / "outputs").mkdir()
    (tree / "model.pt").write_bytes(os.urandom(20 * 1024 * 1024))  # past the old 16 MiB link limit
    write(tree, "train.py", WRITES)
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    in_tmp = Path("/tmp") / f"neuron-migrate-test-{os.getpid()}.pt"
    server = socket.create_server(("127.0.0.1", 0))
    monkeypatch.setenv("XDG_CACHE_HOME", os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HF_TOKEN", "hf_real_secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws_real_secret")
    monkeypatch.setenv("WANDB_API_KEY", "wandb_real_secret")
    before = tree_hash(tree)
    try:
        code, document, stderr = run_try(
            tree,
            "train.py",
            "--",
            str(elsewhere / "saved"),
            str(in_tmp),
            str(server.getsockname()[1]),
            cache=try_cache,
        )
        (tree / "train.py.try.json").unlink()  # the report, written by the tool where it was asked
        assert tree_hash(tree) == before
        assert not elsewhere.exists() and not in_tmp.exists() and not (home / "home_checkpoint.pt").exists()
        (run,) = document["runs"]
        assert code == 0 and run["isolation"] == "isolated", (stderr, run)
        assert "network: refused" in run["output_tail"]
        assert "HF_TOKEN: neuron-migrate-try-offline | AWS: [] | WANDB: None" in run["output_tail"]
        assert not surviving("sleep 987651")
    finally:
        server.close()
        in_tmp.unlink(missing_ok=True)


@pytest.mark.slow
def test_a_launchers_setup_runs_in_the_sandbox_and_changes_nothing(tmp_path, try_cache):
    tree, project, checkpoints = tmp_path / "tree", tmp_path / "project", tmp_path / "checkpoints"
    for folder in (tree / "sub", project, checkpoints, tree / "tiny_pkg" / "tiny_pkg"):
        folder.mkdir(parents=True)
    (checkpoints / "step-100.pt").write_text("a checkpoint")
    write(tree / "tiny_pkg", "pyproject.toml", '[project]\nname = "tiny-pkg-nm-test"\nversion = "1.0"\n')
    (tree / "tiny_pkg" / "tiny_pkg" / "__init__.py").write_text("")
    write(tree / "sub", "train.py", 'open("written.txt", "w").write("x")\nprint("trained")\n')
    write(project, "train.py", 'open("written.txt", "w").write("x")\nprint("the real project")\n')
    write(
        tree,
        "launch.sh",
        f"""
        #!/usr/bin/env bash
        set -euo pipefail
        OUTPUT_DIR={checkpoints}
        rm -rf $OUTPUT_DIR/*
        pip3.11 install --no-deps --no-index --no-build-isolation "$(dirname "$0")/tiny_pkg"
        pip install --isolated --index-url https://pypi.org/simple transformers==4.48.0
        cd "$(dirname "${{BASH_SOURCE[0]}}")/sub"
        python train.py
        cd {project}
        python train.py
        """,
    )
    before, frozen = (tree_hash(tree), tree_hash(project), tree_hash(checkpoints)), pip_freeze()
    started = time.monotonic()
    code, document, stderr = run_try(tree, "launch.sh", cache=try_cache)
    (tree / "launch.sh.try.json").unlink()
    assert (tree_hash(tree), tree_hash(project), tree_hash(checkpoints)) == before
    assert pip_freeze() == frozen
    assert code == 0, (stderr, document)
    assert [run["command"] for run in document["runs"]] == ["python train.py", "python train.py"]
    setup = {entry["command"].split()[0]: entry["outcome"] for entry in document["runs"][0]["skipped"]}
    assert setup["pip3.11"] == "ran in the sandbox: exit 0"  # installed, then discarded
    assert (
        setup["pip"] == "ran in the sandbox: exit 1"
    )  # no network: the downgrade fails, the launch still runs
    assert time.monotonic() - started < 120  # pip fails at once without a network


@pytest.mark.slow
def test_a_notebooks_pip_install_is_discarded(tmp_path, try_cache):
    import nbformat

    (tmp_path / "tiny_pkg" / "tiny_pkg").mkdir(parents=True)
    write(tmp_path / "tiny_pkg", "pyproject.toml", '[project]\nname = "tiny-pkg-nm-test"\nversion = "1.0"\n')
    (tmp_path / "tiny_pkg" / "tiny_pkg" / "__init__.py").write_text("")
    cells = [
        "import subprocess, sys\n"
        'subprocess.check_call([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-build-isolation", "./tiny_pkg"])',
        "import tiny_pkg\nprint('installed in the sandbox')",
        "if True:\n    !pip install --isolated --index-url https://pypi.org/simple transformers==4.48.0\n"
        "    %pip install --no-deps --no-index --no-build-isolation ./tiny_pkg",
    ]
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell) for cell in cells]),
        tmp_path / "n.ipynb",
    )
    frozen = pip_freeze()
    code, document, stderr = run_try(tmp_path, "n.ipynb", cache=try_cache)
    assert pip_freeze() == frozen
    (run,) = document["runs"]
    assert code == 0 and "installed in the sandbox" in run["output_tail"], (stderr, document)
    assert [(entry["cell"], entry["outcome"]) for entry in run["skipped"]] == [
        (3, "ran in the sandbox: exit 1"),  # no network
        (3, "ran in the sandbox: exit 0"),
    ]


# The child's sleep is the test's own mark (tests may run side by side): a child in a session of its own.
SLEEPER = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep({mark})"], start_new_session=True)
print("children started", flush=True)
time.sleep(600)
"""


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT", "--timeout"])
def test_every_process_of_a_run_ends_with_it(tmp_path, stop):
    mark = {"SIGTERM": 987652, "SIGINT": 987654, "--timeout": 987655}[stop]
    write(tmp_path, "sleeper.py", SLEEPER.replace("{mark}", str(mark)))
    timeout = ["--timeout", "8"] if stop == "--timeout" else []
    process = subprocess.Popen(
        [*CLI, "try", "sleeper.py", *timeout],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a shell starts it
    )
    for line in process.stderr:
        if "children started" in line:
            break
    if stop != "--timeout":
        process.send_signal(getattr(signal, stop))
    process.communicate(timeout=60)
    expected = {"SIGTERM": 143, "SIGINT": 130, "--timeout": 1}[stop]
    assert process.returncode == expected
    assert not surviving(f"time.sleep({mark})")


def test_try_refuses_a_report_over_the_tried_file(tmp_path):
    script = write(tmp_path, "train.py", "print(1)\n")
    result = subprocess.run(
        [*CLI, "try", "train.py", "--report", "train.py"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 2 and "is the file being tried" in result.stderr
    assert script.read_text() == "print(1)\n"


def test_where_namespaces_are_missing_try_refuses_in_one_line_unless_told(tmp_path):
    write(tmp_path, "hello.py", "print('hello from the script')\n")
    env = {**os.environ, "PATH": str(tmp_path / "no-tools")}  # no unshare, no nsenter
    command = [*CLI, "try", "hello.py", "--format", "json"]
    refused = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "neuron-migrate: error: the sandbox needs util-linux's unshare and nsenter, not found; `--no-isolation` "
        "runs the try without it (writes, set-up commands and the network are then real)"
    ]
    unisolated = subprocess.run(
        [*command, "--no-isolation"], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert unisolated.returncode == 0 and '"isolation": "not isolated"' in unisolated.stdout


@pytest.mark.slow
def test_neuron_compat_standin_ends_its_command_and_children_on_sigterm(tmp_path):
    write(tmp_path, "sleeper.py", SLEEPER.replace("{mark}", "987656"))
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from commands.neuron_compat import main; main()",
            "standin",
            "--",
            sys.executable,
            str(tmp_path / "sleeper.py"),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    for line in process.stdout:
        if "children started" in line:
            break
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=60)
    assert not surviving("time.sleep(987656)") and not surviving(str(tmp_path / "sleeper.py"))


USES_THE_USERS_PACKAGE = """
import torch
import only_in_the_users_environment

model = torch.nn.Linear(4, 2).to("neuron")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(5):
    model(torch.randn(2, 4, device="neuron")).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
"""


@pytest.mark.slow
def test_the_script_runs_with_the_users_environment(tmp_path, try_cache):
    """A virtual environment with a package the tool's lacks, and nothing of neuron-migrate installed: its
    site-packages sees the tool's by a .pth (torch, without running the tool's editable-install hooks)."""
    users = tmp_path / "users-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(users)], check=True)
    (site_packages,) = users.glob("lib/python*/site-packages")
    tools = next(
        path for path in map(Path, sys.path) if path.name == "site-packages" and (path / "torch").is_dir()
    )
    (site_packages / "tools.pth").write_text(f"{tools}\n")
    (site_packages / "only_in_the_users_environment.py").write_text("")
    tree = tmp_path / "tree"
    tree.mkdir()
    write(tree, "train.py", USES_THE_USERS_PACKAGE)

    code, document, stderr = run_try(
        tree, "train.py", "--python", str(users / "bin" / "python"), cache=try_cache
    )
    (run,) = document["runs"]
    assert code == 0 and run["steps"] == 3 and run["device"] == STANDIN_DEVICE, (stderr, run)

    code, document, _ = run_try(tree, "train.py", cache=try_cache)  # the tool's own environment lacks it
    (run,) = document["runs"]
    assert code == 1 and run["status"] == "not-run"
    assert run["reason"].startswith(
        "not run: install only_in_the_users_environment in the environment that runs it"
    )


LOADS_A_MODEL = """
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B").to("neuron")
print("loaded", type(model).__name__)
"""


@pytest.mark.slow
def test_a_launcher_run_from_the_repository_root_with_python_m(tmp_path, try_cache):
    (tmp_path / ".git").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    write(tmp_path / "pkg", "train.py", LOADS_A_MODEL)
    write(tmp_path / "scripts", "run.sh", "#!/bin/bash\npython -m pkg.train --epochs 1\n")
    code, document, stderr = run_try(tmp_path / "scripts", "run.sh", cache=try_cache)
    (run,) = document["runs"]
    assert code == 0 and "loaded Qwen3ForCausalLM" in run["output_tail"], (stderr, run)
    assert [model["id"] for model in run["models"]] == ["Qwen/Qwen3-0.6B"]


@pytest.mark.parametrize("user_namespace", [False, True], ids=["as-root", "user-namespace"])
def test_the_sandbox_discards_writes_and_ends_its_processes(tmp_path, user_namespace):
    """Both ways the sandbox is made: as root, and in a user namespace (where overlayfs refuses / itself as a
    lower layer, so each top-level folder is overlaid on its own)."""
    if os.geteuid() != 0 and not user_namespace:
        pytest.skip("needs root")
    from try_run.sandbox import Sandbox, stop

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "model.pt").write_text("the user's")
    outside = Path("/tmp") / f"neuron-migrate-sandbox-test-{os.getpid()}"
    script = (
        f"echo overwritten > model.pt && cat model.pt && mkdir -p {outside} && touch {outside}/x && "
        "(sleep 987653 &) && id -u"
    )
    (tmp_path / "work").mkdir()
    with Sandbox(tmp_path / "work", user_namespace=user_namespace) as sandbox:
        process = subprocess.Popen(
            sandbox.command(["bash", "-c", script], tree),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        output = process.stdout.read()  # (not communicate(): closing stdin, the lifeline, ends the command)
        process.wait(timeout=60)
        stop(process)
    assert process.returncode == 0 and output.split() == ["overwritten", "0"]
    assert (tree / "model.pt").read_text() == "the user's" and not outside.exists()
    assert not surviving("sleep 987653")
