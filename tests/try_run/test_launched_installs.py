"""The scripts a tried file launches count for the try's installs (try_run/launched.py): a notebook's
`!python x.py` after a `%cd` to the author's folder, a launcher's script that runs another with `subprocess`; the
install says which launched script imports the module. No test reaches a registry (the registry fixture: a
folder of wheels)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.compat_matrix.test_trial_runs import run_try, write
from tests.compat_matrix.test_try_installs import registry  # noqa: F401  (the fixture)

USES_IT = "import nmtrydemo\nprint('value:', nmtrydemo.VALUE)\n"


def notebook(path: Path, cells: list[str]) -> None:
    path.write_text(
        json.dumps(
            {
                "cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": []} for c in cells],
                "metadata": {},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )


def test_the_launches_of_cells_shell_scripts_and_subprocess_calls_are_followed(tmp_path):
    from try_run.launched import launched_scripts

    (tmp_path / ".git").mkdir()
    assets, tools = tmp_path / "assets", tmp_path / "tools"
    assets.mkdir()
    tools.mkdir()
    write(
        assets,
        "train.py",
        "import subprocess, sys\nsubprocess.run([sys.executable, 'evaluate_it.py', '--n', '2'])\n",
    )
    write(assets, "evaluate_it.py", "import os\nos.system('cd ../tools && python report.py')\n")
    write(tools, "report.py", "print('report')\n")
    write(tools, "prepare.py", "print('prepare')\n")
    write(tools, "run.sh", "#!/bin/bash\nset -e\ntorchrun --nproc_per_node=2 prepare.py --rows 8\n")
    write(tmp_path, "profile.py", "print('profile')\n")
    cells = [
        "%cd assets",
        "!torchrun --nproc_per_node 2 train.py --epochs 1",
        "!wget https://example.com/other.py",  # a download, not a launch
        "%cd ..",
        "%run -i profile.py",
        "!cd tools && bash run.sh",
    ]
    found = launched_scripts(cells, [], tmp_path, tmp_path)
    assert [(script.where(tmp_path), list(script.arguments)) for script in found] == [
        ("assets/train.py, launched by cell 2", ["--epochs", "1"]),
        ("assets/evaluate_it.py, launched by assets/train.py:2", ["--n", "2"]),
        ("tools/report.py, launched by assets/evaluate_it.py:2", []),
        ("profile.py, launched by cell 5", []),
        ("tools/prepare.py, launched by tools/run.sh:3", ["--rows", "8"]),
    ]


def test_a_script_a_notebook_copies_before_launching_it_is_followed(tmp_path):
    """optimum-neuron's fine_tune_bert.ipynb as migrated (NM474): `!cp scripts/train.py train.py`, then
    `!torchrun train.py`: the launch reads what the copy put there."""
    from try_run.launched import launched_scripts

    (tmp_path / "scripts").mkdir()
    write(tmp_path / "scripts", "train.py", "print('train')\n")
    cells = ["!cp scripts/train.py train.py", "!cp scripts/train.py out/", "!torchrun train.py --epochs 1"]
    (tmp_path / "out").mkdir()
    found = launched_scripts(cells, [], tmp_path, tmp_path)
    assert [(script.where(tmp_path), script.text, script.written) for script in found] == [
        ("train.py, launched by cell 3", "print('train')\n", True)
    ]


def test_a_script_a_notebook_launches_after_moving_to_its_author_s_folder_gets_its_import(tmp_path, registry):  # noqa: F811
    """build-on-trainium-workshop's notebooks: `%cd /home/ubuntu/.../assets`, then `!torchrun finetune_model.py`,
    whose `import boto3` the notebook's cells do not have."""
    (tmp_path / ".git").mkdir()
    labs = tmp_path / "labs"
    (labs / "assets").mkdir(parents=True)
    write(labs / "assets", "finetune.py", USES_IT)
    notebook(labs / "lab.ipynb", ["%cd /home/ubuntu/workshop/labs/assets", "!python finetune.py --steps 1"])
    code, document, errors = run_try(labs, "lab.ipynb", cache=tmp_path / "cache", timeout=300)
    assert document, errors
    run = document["runs"][0]
    assert run["status"] == "ran", run["reason"] + run["output_tail"]
    assert "value: 1.2" in run["output_tail"]
    assert [(i["needed_by"], i["outcome"]) for i in run["installs"]] == [
        ("import nmtrydemo in assets/finetune.py, launched by cell 2", "installed")
    ]


def test_a_script_a_launcher_s_script_runs_with_subprocess_gets_its_import(tmp_path, registry):  # noqa: F811
    write(tmp_path, "run.sh", "#!/bin/bash\npython train.py --epochs 1\n")
    write(
        tmp_path,
        "train.py",
        "import subprocess, sys\nsubprocess.run([sys.executable, 'helper.py'], check=True)\n",
    )
    write(tmp_path, "helper.py", USES_IT)
    code, document, errors = run_try(tmp_path, "run.sh", cache=tmp_path / "cache", timeout=300)
    assert document, errors
    run = document["runs"][0]
    assert run["status"] == "ran", run["reason"] + run["output_tail"]
    assert "value: 1.2" in run["output_tail"]
    assert [i["needed_by"] for i in run["installs"]] == [
        "import nmtrydemo in helper.py, launched by train.py:2"
    ]


def test_a_command_a_python_cell_or_script_keeps_in_a_constant_is_followed(tmp_path):
    """aws-neuron-samples' sentiment notebooks: `RUN_CMD = f"python3 ./code/train.py"`, then
    `subprocess.check_call(RUN_CMD, shell=True)` in a Python cell; the script was never read, so its model had
    no stand-in. The constant may stand in an earlier cell; a name bound twice is not a constant."""
    from try_run.launched import launched_scripts

    (tmp_path / "code").mkdir()
    write(tmp_path / "code", "train.py", "print('train')\n")
    write(tmp_path / "code", "other.py", "print('other')\n")
    write(tmp_path, "runner.py", "import os\nCMD = 'python code/other.py --rows 4'\nos.system(CMD)\n")
    cells = [
        'RUN_CMD = f"""python3 ./code/train.py --epochs 1"""',
        "import subprocess\nif subprocess.check_call(RUN_CMD, shell=True):\n    print('failed')",
        "AGAIN = 'python code/other.py'\nAGAIN = 'python code/train.py'\nsubprocess.run(AGAIN, shell=True)",
    ]
    found = launched_scripts(cells, [tmp_path / "runner.py"], tmp_path, tmp_path)
    assert [(script.where(tmp_path), list(script.arguments)) for script in found] == [
        ("code/train.py, launched by cell 2", ["--epochs", "1"]),
        ("code/other.py, launched by runner.py:3", ["--rows", "4"]),
    ]
