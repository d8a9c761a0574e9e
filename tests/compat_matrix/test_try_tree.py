"""`neuron-migrate try DIR`: the entry points of a tree (launchers, notebooks, scripts no launcher runs and no
file imports), each tried on the stand-in, N at a time, into one table the checklist reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from reports.tries import load_try_reports
from tests.compat_matrix.test_trial_runs import write
from try_run.entry_points import EntryPointsError, find, read_table

CLI = [sys.executable, "-c", "from commands.neuron_migrate import main; main()"]

TRAIN = """
import argparse

import torch

from helpers import make_model

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, required=True)
args = parser.parse_args()
model = make_model().to("neuron")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(args.steps):
    loss = model(torch.ones(2, 4, device="neuron")).sum()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
print("trained", loss.item(), "threads", torch.get_num_threads())
"""


def tree(folder: Path) -> Path:
    write(folder, "helpers.py", "import torch\n\n\ndef make_model():\n    return torch.nn.Linear(4, 2)\n")
    write(folder, "train.py", TRAIN)
    write(folder, "run.sh", "#!/bin/bash\npip install torch\npython train.py --steps 2\n")
    write(folder, "setup.sh", "#!/bin/bash\npip install -r requirements.txt\n")
    write(folder, "tools/fails.py", "if __name__ == '__main__':\n    raise SystemExit('no data here')\n")
    write(folder, "tools/constants.py", "SIZE = 4\n")
    return folder


def test_entry_points_are_launchers_notebooks_and_scripts_nothing_runs_or_imports(tmp_path):
    (tmp_path / "tools").mkdir()
    found = find(tree(tmp_path))
    assert [(entry.path.as_posix(), entry.kind) for entry in found.entries] == [
        ("run.sh", "launcher"),
        ("tools/fails.py", "script"),
    ]
    assert found.entries[0].launches == ["train.py"]
    assert found.not_entries == {
        "helpers.py": "imported by another file of the tree",
        "train.py": "launched by run.sh (line 3)",
        "tools/constants.py": "defines names only (no __main__ block, no top-level calls)",
    }


def test_a_script_a_notebook_launches_from_a_sibling_folder_is_tried_through_the_notebook(tmp_path):
    """`torchrun ../scripts/run_sft.py --config sft.yaml` in `notebooks/nb.ipynb`, continued over lines: the
    script is the notebook's (which writes the file it reads), not an entry point of its own."""
    import nbformat

    (tmp_path / "scripts").mkdir()
    write(tmp_path, "scripts/run_sft.py", "if __name__ == '__main__':\n    print('training')\n")
    (tmp_path / "notebooks").mkdir()
    cell = "%%bash\ntorchrun \\\n    --nproc_per_node=2 \\\n    ../scripts/run_sft.py \\\n    --config sft.yaml\n"
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell)]), tmp_path / "notebooks/nb.ipynb"
    )
    found = find(tmp_path)
    assert [(entry.path.as_posix(), entry.launches) for entry in found.entries] == [
        ("notebooks/nb.ipynb", ["scripts/run_sft.py"])
    ]
    assert found.not_entries == {"scripts/run_sft.py": "launched by notebooks/nb.ipynb (cell 1)"}


def test_a_script_a_launcher_names_through_its_own_variable_is_tried_through_the_launcher(tmp_path):
    """`CODE=scripts` then `torchrun ${CODE}/train.py` (and `$SCRIPT`): the launcher's script, not an entry point of
    its own; a variable the launcher does not set (`$HOME/x.py`) names nothing of the tree."""
    (tmp_path / "scripts").mkdir()
    write(tmp_path, "scripts/train.py", "if __name__ == '__main__':\n    print('training')\n")
    write(tmp_path, "scripts/eval.py", "if __name__ == '__main__':\n    print('evaluating')\n")
    write(
        tmp_path,
        "run.sh",
        "#!/bin/bash\nCODE=scripts\nexport SCRIPT=scripts/eval.py\ntorchrun --nproc_per_node 2 ${CODE}/train.py --bf16\n"
        "python $SCRIPT\npython $HOME/other.py\n",
    )
    found = find(tmp_path)
    assert [(entry.path.as_posix(), entry.launches) for entry in found.entries] == [
        ("run.sh", ["scripts/train.py", "scripts/eval.py"])
    ]
    assert found.not_entries == {
        "scripts/eval.py": "launched by run.sh (line 5)",
        "scripts/train.py": "launched by run.sh (line 4)",
    }


def test_a_table_of_entry_points_is_read_and_checked(tmp_path):
    (tmp_path / "tools").mkdir()
    tree(tmp_path)
    table = tmp_path / "entries.csv"
    table.write_text('path,arguments\ntrain.py,"--steps 3"\n')
    [entry] = read_table(table, tmp_path)
    assert (entry.path, entry.kind, entry.arguments) == (Path("train.py"), "script", ["--steps", "3"])
    for rows, message in (
        ([{"path": "../x.py"}], "not a path inside"),
        ([{"path": "missing.py"}], "no such file"),
        ([{"arguments": "--a"}], "has no `path`"),
        ({"path": "train.py"}, "expected a list"),
    ):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(rows))
        try:
            read_table(bad, tmp_path)
        except EntryPointsError as error:
            assert message in str(error)
        else:
            raise AssertionError(f"{rows} was accepted")


def test_try_dir_tries_every_entry_point_into_one_table_the_checklist_reads(tmp_path, try_cache):
    folder = tmp_path / "repo"
    (folder / "tools").mkdir(parents=True)
    tree(folder)
    before = {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}
    report = tmp_path / "tries.json"
    result = subprocess.run(
        [*CLI, "try", str(folder), "-j", "2", "--format", "json", "--report", str(report)],
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **{name: value for name, value in os.environ.items() if name != "OMP_NUM_THREADS"},
            "NEURON_MIGRATE_CACHE": str(try_cache),
        },
    )
    assert result.returncode == 1, result.stderr  # one entry point fails
    assert "2 entry points in" in result.stderr and "[2/2]" in result.stderr  # progress
    assert "2 entry points: 1 ran, 1 failed, 0 not run" in result.stderr
    document = json.loads(report.read_text())
    entries = {entry["path"]: entry for entry in document["entry_points"]}
    assert entries["run.sh"]["status"] == "ran", entries["run.sh"]
    [run] = entries["run.sh"]["runs"]
    assert (
        run["command"] == "python train.py --steps 2" and run["skipped"][0]["command"] == "pip install torch"
    )
    # Two tries at once share the cores: each run's processes get half of them as intra-op threads.
    share = max(1, len(os.sched_getaffinity(0)) // 2)
    assert any(line.endswith(f"threads {share}") for line in run["output_tail"].splitlines()), run[
        "output_tail"
    ]
    assert entries["tools/fails.py"]["status"] == "failed"
    assert "no data here" in entries["tools/fails.py"]["reason"]
    assert document["not_entry_points"]["train.py"] == "launched by run.sh (line 3)"
    assert {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()} == before
    tried = {entry.path: entry.ok for entry in load_try_reports([report])}
    assert tried == {folder / "run.sh": True, folder / "tools/fails.py": False}


def test_try_dir_refuses_script_arguments_and_a_table_for_a_file(tmp_path):
    (tmp_path / "tools").mkdir()
    tree(tmp_path)
    for arguments, message in (
        ([str(tmp_path), "--", "--steps", "2"], "give each entry point's arguments in --entry-points"),
        ([str(tmp_path / "train.py"), "--entry-points", str(tmp_path / "helpers.py")], "PATH is a file"),
    ):
        result = subprocess.run([*CLI, "try", *arguments], capture_output=True, text=True, timeout=120)
        assert result.returncode == 2 and message in result.stderr, result.stderr


def test_sigterm_stops_every_running_try_and_the_processes_it_started(tmp_path):
    folder = tmp_path / "repo"
    folder.mkdir()
    pids = tmp_path / "pids"
    pids.mkdir()
    for name in ("a.py", "b.py"):
        write(
            folder,
            name,
            f"import os, time\nif __name__ == '__main__':\n"
            f"    open(os.path.join({str(pids)!r}, str(os.getpid())), 'w').close()\n    time.sleep(600)\n",
        )
    process = subprocess.Popen(
        # Not isolated: the runs' PID files must reach this test (a sandboxed run's writes are discarded; the
        # sandbox's own ending of its process trees is tested in test_try_sandbox.py).
        [*CLI, "try", str(folder), "-j", "2", "-q", "--no-isolation"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        started = [int(path.name) for path in pids.iterdir()]
        assert len(started) == 2, (
            process.stderr.read() if process.poll() is not None else "runs did not start"
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 130
    finally:
        if process.poll() is None:  # a failed check must not leave the tries sleeping behind the suite
            process.terminate()
            process.wait(timeout=60)
    time.sleep(1)
    assert [pid for pid in started if _alive(pid)] == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"  # a zombie has ended
    except (ProcessLookupError, FileNotFoundError):
        return False
