"""What the code beside an install still imports once migrated (`migrator.beside`), and the installs that ask."""

from __future__ import annotations

import json

from click.testing import CliRunner

from migrator import beside, engine
from migrator.cli import main
from migrator.engine import _migrated, migrate_requirements

LEFTOVER = "from optimum.neuron.distributed import lazy_load_for_parallelism\n\nlazy_load_for_parallelism(tensor_parallel_size=8)\n"
MIGRATES = "import torch_xla.core.xla_model as xm\n\ndevice = xm.xla_device()\n"


def counting(calls):
    def migrate(kind, text):
        calls.append(kind)
        return _migrated(kind, text)

    return migrate


def test_only_what_migration_leaves_counts_with_the_first_file_that_imports_it(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "train.py").write_text(LEFTOVER)
    (tmp_path / "xla_loop.py").write_text(MIGRATES)  # its torch_xla import goes with its last use
    (tmp_path / "plain.py").write_text("import torch\n")
    calls = []
    assert beside.still_imported(tmp_path, counting(calls)) == {"optimum.neuron": "scripts/train.py"}
    assert calls == ["python", "python"]  # plain.py names no legacy module: never migrated
    assert beside.still_imported(tmp_path, counting(calls)) is beside.still_imported(
        tmp_path, counting(calls)
    )
    assert calls == ["python", "python"]  # once per folder and process


def test_a_file_that_adds_no_module_is_not_migrated(tmp_path):
    (tmp_path / "a.py").write_text(LEFTOVER)
    (tmp_path / "b.py").write_text(f"# the same import, in another script\n{LEFTOVER}")
    calls = []
    assert beside.still_imported(tmp_path, counting(calls)) == {"optimum.neuron": "a.py"}
    assert calls == ["python"]


def test_environments_hidden_and_build_folders_are_not_read(tmp_path):
    for folder in ("env", ".tox/py311", "node_modules/pkg", "build/lib"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "mod.py").write_text(LEFTOVER)
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # a virtual environment by any name
    assert beside.still_imported(tmp_path, _migrated) == {}


def test_from_optimum_import_neuron_and_notebook_cells_count(tmp_path):
    (tmp_path / "serve.py").write_text("from optimum import neuron\n\nprint(neuron.__version__)\n")
    cells = [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": source}
        for source in (
            ["%pip install neuronx-distributed\n"],
            ["import neuronx_distributed as nxd\n", "nxd.x()\n"],
        )
    ]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "explore.ipynb").write_text(json.dumps(notebook))
    found = beside.still_imported(tmp_path, _migrated)
    assert found == {"optimum.neuron": "serve.py", "neuronx_distributed": "explore.ipynb"}


def test_a_requirements_file_reads_its_folder_only_to_remove_a_package(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(engine, "still_imported", lambda *args: calls.append(args) or {})
    migrated, _ = migrate_requirements("datasets\nsentencepiece\n", tmp_path)
    assert (
        migrated == "datasets\nsentencepiece\n" and calls == []
    )  # nothing to remove: the folder is not read
    migrate_requirements("optimum-neuron==0.3.0\n", tmp_path)
    assert len(calls) == 1


def test_a_launched_script_is_found_from_the_top_of_the_tree(tmp_path):
    scripts = tmp_path / "repo" / "notebooks" / "ec2" / "sft" / "scripts"
    scripts.mkdir(parents=True)
    (scripts / "train.py").write_text(
        "from transformers import HfArgumentParser, TrainingArguments\n\n"
        "(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()\n"
    )
    launch = "export NEURON_RT_LOG_LEVEL=INFO\ntorchrun notebooks/ec2/sft/scripts/train.py --zero_1 true\n"
    (scripts / "run.sh").write_text(launch)
    result = CliRunner().invoke(main, ["--diff", str(tmp_path / "repo")], catch_exceptions=False)
    assert "-torchrun notebooks/ec2/sft/scripts/train.py --zero_1 true" in result.stdout
    assert "NM466" not in result.stdout
    # Named alone, the launcher's tree is its folder: the path is not found from there, and it says so.
    result = CliRunner().invoke(main, ["--diff", str(scripts / "run.sh")], catch_exceptions=False)
    assert "NM466 `notebooks/ec2/sft/scripts/train.py` is neither in this tree" in result.stdout
