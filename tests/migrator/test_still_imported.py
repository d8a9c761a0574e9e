"""What the code beside an install still imports once migrated (`migrator.still_imported`), and the installs that ask."""

from __future__ import annotations

import json

from click.testing import CliRunner

from commands.neuron_migrate import main
from migrator import engine, still_imported
from migrator.engine import _migrated, migrate_requirements

LEFTOVER = (
    "from optimum.neuron.distributed import lazy_load_for_parallelism\n\n"
    "lazy_load_for_parallelism(tensor_parallel_size=8)\n"
)
NXD_LEFTOVER = (
    "from neuronx_distributed.parallel_layers import parallel_state\n\n"
    "parallel_state.initialize_model_parallel(tensor_model_parallel_size=8)\n"
)
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
    assert still_imported.first_importer(tmp_path, counting(calls), "torch_xla") is None
    assert calls == ["python", "python"]  # plain.py names no legacy module: never migrated
    assert still_imported.first_importer(tmp_path, counting(calls), "optimum.neuron") == "scripts/train.py"
    assert calls == ["python", "python"]  # once per folder and process


def test_files_are_read_only_until_one_answers(tmp_path):
    (tmp_path / "a.py").write_text(LEFTOVER)
    (tmp_path / "b.py").write_text(f"{NXD_LEFTOVER}{LEFTOVER}")
    (tmp_path / "c.py").write_text(f"# the same import, in another script\n{LEFTOVER}")
    calls = []
    assert still_imported.first_importer(tmp_path, counting(calls), "optimum.neuron") == "a.py"
    assert calls == ["python"]  # b.py and c.py are not read yet
    assert still_imported.first_importer(tmp_path, counting(calls), "neuronx_distributed") == "b.py"
    assert still_imported.first_importer(tmp_path, counting(calls), "torch_xla") is None
    assert calls == ["python", "python"]  # c.py imports only what is known to stay: not migrated


def test_environments_hidden_and_build_folders_are_not_read(tmp_path):
    for folder in ("env", ".tox/py311", "node_modules/pkg", "build/lib"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "mod.py").write_text(LEFTOVER)
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # a virtual environment by any name
    assert still_imported.first_importer(tmp_path, _migrated, "optimum.neuron") is None


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
    assert still_imported.first_importer(tmp_path, _migrated, "optimum.neuron") == "serve.py"
    assert still_imported.first_importer(tmp_path, _migrated, "neuronx_distributed") == "explore.ipynb"


def test_a_requirements_file_reads_its_folder_only_to_remove_a_package(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(engine, "first_importer", lambda *args: calls.append(args[-1]))
    migrated, _ = migrate_requirements("datasets\nsentencepiece\n", tmp_path)
    assert (
        migrated == "datasets\nsentencepiece\n" and calls == []
    )  # nothing to remove: the folder is not read
    migrate_requirements("optimum-neuron==0.3.0\ntorch-xla\n", tmp_path)
    assert calls == ["optimum.neuron", "torch_xla"]


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
