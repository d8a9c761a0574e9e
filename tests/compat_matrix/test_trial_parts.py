"""neuron-migrate try's parts, without running a script: planning, code facts, stand-ins, reports."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from try_run import data, hub, integrations, plan, report, runner, scan

BOOTSTRAP = Path(__file__).resolve().parents[2] / "try_run" / "bootstrap" / "sitecustomize.py"


def _bootstrap():
    """The bootstrap module, loaded without a try's configuration (it then installs nothing)."""
    spec = importlib.util.spec_from_file_location("try_bootstrap", BOOTSTRAP)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("argv", "expected", "changes"),
    [
        (
            ["torchrun", "--nproc_per_node", "8", "t.py", "--nproc_per_node", "9"],
            ["torchrun", "--nproc_per_node", "2", "t.py", "--nproc_per_node", "9"],
            1,
        ),
        (
            ["torchrun", "--nnodes=4", "--nproc-per-node=auto", "-m", "pkg"],
            ["torchrun", "--nnodes=1", "--nproc-per-node=2", "-m", "pkg"],
            2,
        ),
        (
            ["accelerate", "launch", "--num_processes", "1", "t.py"],
            ["accelerate", "launch", "--num_processes", "1", "t.py"],
            0,
        ),
    ],
)
def test_launchers_are_capped_to_two_processes_on_one_node(argv, expected, changes):
    bootstrap = _bootstrap()
    assert len(bootstrap._cap_launcher_arguments(argv, plan.MAX_PROCESSES)[0]) == changes
    assert argv == expected


@pytest.mark.parametrize(
    ("sizes", "asked", "fitted", "changes", "world"),
    [
        # tp_size=8 written for 8 processes, run on 2; fsdp computed from WORLD_SIZE=2 as 2 // 8 = 0
        ({"tp_size": 8, "fsdp_size": 0}, 0, {"tp_size": 2, "fsdp_size": 1}, 2, 2),
        ({"tp_size": 4, "dp_replicate_size": 1}, 0, {"tp_size": 2, "dp_replicate_size": 1}, 1, 2),
        ({"tp_size": 2}, 0, {"tp_size": 2}, 0, 2),  # fits: nothing to say
        # the launcher asked for 2 processes only: tp_size=4 fails there too, and must fail here
        ({"tp_size": 4}, 2, {"tp_size": 4}, 0, 2),
        ({"tp_size": 4}, 8, {"tp_size": 2}, 1, 2),
        # a TP x FSDP grid on the 4 processes a grid gets: both dimensions stay real
        ({"tp_size": 8, "fsdp_size": 4}, 0, {"tp_size": 2, "fsdp_size": 2}, 2, 4),
        ({"tp_size": 8}, 0, {"tp_size": 4}, 1, 4),
    ],
)
def test_parallel_degrees_are_fitted_to_the_processes_a_try_runs(sizes, asked, fitted, changes, world):
    from transformers import DistributedConfig

    bootstrap = _bootstrap()
    bootstrap.STATE = bootstrap._State({})
    config = DistributedConfig.__new__(DistributedConfig)
    for name in bootstrap.PARALLEL_SIZES + ("ep_size",):
        setattr(config, name, sizes.get(name))
    bootstrap._fit_degrees(config, world, asked)
    assert {name: getattr(config, name) for name in sizes} == fitted
    assert len(bootstrap.STATE.launcher_capped) == changes


def test_launcher_kind_from_the_full_command_line():
    bootstrap = _bootstrap()
    assert (
        bootstrap._launcher_kind(["/v/bin/python", "/v/bin/torchrun", "--nproc_per_node=2", "t.py"])
        == "torchrun"
    )
    assert bootstrap._launcher_kind(["python", "-m", "torch.distributed.run", "t.py"]) == "torchrun"
    assert bootstrap._launcher_kind(["/v/bin/python", "/v/bin/accelerate", "launch", "t.py"]) == "accelerate"
    assert bootstrap._launcher_kind(["python", "train.py"]) is None


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("torchrun --nproc_per_node 8 train.py", ("launch", "")),
        ("srun -N 1 nohup python train.py --lr 1", ("launch", "")),
        ("timeout 600 numactl --cpunodebind=0 python train.py", ("launch", "")),
        # usercode's wrappers but xargs, which runs its program once per input line: run as it is
        ("xargs -n 1 python train.py", None),
        ("accelerate launch train.py", ("launch", "")),
        ("accelerate config default", None),
        ("trl sft --model_name_or_path x", ("launch", "")),
        ("python -m pip install trl", ("skip", plan.NETWORK_PROGRAMS["pip"])),
        ("pip install -r requirements.txt", ("skip", plan.NETWORK_PROGRAMS["pip"])),
        ("aws s3 sync s3://b/data data", ("skip", plan.NETWORK_PROGRAMS["aws"])),
        (
            "huggingface-cli download meta-llama/Llama-3.2-1B",
            ("skip", plan.NETWORK_PROGRAMS["huggingface-cli"]),
        ),
        ("git clone https://example.invalid/repo", ("skip", plan.NETWORK_PROGRAMS["git"])),
        ("git rev-parse HEAD", None),
        ("source /opt/aws_neuron_venv_pytorch/bin/activate", ("skip", plan.ENVIRONMENT_ACTIVATION)),
        ("neuron_parallel_compile torchrun train.py", ("skip", plan.PRECOMPILE)),
        ("mkdir -p out", None),
        ("python -c 'print(1)'", None),
        ("{sys.executable} -m pip install trl", ("skip", plan.NETWORK_PROGRAMS["pip"])),
        ("pip3.11 install -U transformers", ("skip", plan.NETWORK_PROGRAMS["pip"])),
        ("uv pip install trl", ("skip", plan.NETWORK_PROGRAMS["uv"])),
        ("s5cmd cp s3://b/x .", ("skip", plan.NETWORK_PROGRAMS["s5cmd"])),
    ],
)
def test_commands_are_launches_setups_or_plain(command, expected):
    assert plan.classify(command.split()) == expected


def run_here(argv, cwd, env, place):
    """plan.RunSetUp without the sandbox (the launcher's set-up is then listed, not run)."""
    assert not place
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    return result.returncode, result.stderr


def plan_here(launcher: Path) -> plan.Plan:
    return plan.plan_launcher(
        launcher, [], dict(os.environ), launcher.parent / "record", run_here, False, sys.executable
    )


def test_a_launcher_records_expanded_launches_and_lists_setups(tmp_path):
    launcher = tmp_path / "run.sh"
    launcher.write_text(
        "#!/bin/bash\nset -euo pipefail\npip install trl\nN=8\nexport FLAG=on\n"
        'for lr in 1 2; do\n  torchrun --nproc_per_node $N train.py --lr "$lr"\ndone\ncd sub\nFOO=1 python x.py\npython y.py 2>&1 | tee y.log\n'
    )
    (tmp_path / "sub").mkdir()
    the_plan = plan_here(launcher)
    labels = [launch.label for launch in the_plan.launches]
    assert labels == [
        "torchrun --nproc_per_node 8 train.py --lr 1",
        "torchrun --nproc_per_node 8 train.py --lr 2",
        "python x.py",
        "python y.py",
    ]
    first, _, last, piped = the_plan.launches
    assert first.env.get("FLAG") == "on" and first.line == 7 and first.processes == 2
    assert first.scripts == [tmp_path / "train.py"] and first.arguments == ["--lr", "1"]
    assert last.cwd == tmp_path / "sub" and last.env.get("FOO") == "1" and "FOO" not in piped.env
    assert [(s.command, s.line, s.outcome) for s in the_plan.skipped] == [
        ("pip install trl", 3, plan.NOT_RUN_UNISOLATED)
    ]


def test_a_launcher_without_a_launch_is_a_usage_error(tmp_path):
    launcher = tmp_path / "setup.sh"
    launcher.write_text("#!/bin/bash\npip install trl\necho ready\n")
    with pytest.raises(plan.PlanError, match="no launch found"):
        plan_here(launcher)


def test_a_launcher_that_stops_before_its_launch_is_reported_at_its_own_line(tmp_path):
    """bash runs a copy with the recorder's functions above the launcher's lines: its message names the
    launcher's line, not the copy's."""
    launcher = tmp_path / "export.sh"
    launcher.write_text("#!/bin/bash\nset -e\nnm-no-such-exporter --model gpt2\npython t.py\n")
    with pytest.raises(plan.PlanError) as stopped:
        plan_here(launcher)
    assert str(stopped.value).endswith(f"{launcher}: line 3: nm-no-such-exporter: command not found")


def test_notebook_setup_lines_are_listed_and_replaced(tmp_path):
    notebook = tmp_path / "nb.ipynb"
    cells = [
        "!pip install -q trl\nimport torch",
        "%%bash\naws s3 cp s3://b/x .\nls",
        "!torchrun --nproc_per_node=2 t.py",
        "%%bash\npip install \\\n  trl\necho done",  # a command continued onto the next line: one command
    ]
    notebook.write_text(
        json.dumps({"cells": [{"cell_type": "code", "source": c} for c in cells], "nbformat": 4})
    )
    the_plan, executed = plan.plan_notebook(notebook, False, sys.executable)
    assert [(s.command, s.cell) for s in the_plan.skipped] == [
        ("pip install -q trl", 1),
        ("aws s3 cp s3://b/x .", 2),
        ("pip install   trl", 4),
    ]
    assert executed[0].startswith("print('neuron-migrate try: not run: pip install -q trl')")
    assert executed[1].splitlines()[1].startswith("echo ")
    stop = plan.STOP_AFTER_FAILED_LAUNCH.format(command="torchrun --nproc_per_node=2 t.py")
    assert executed[2] == f"{cells[2]}\n{stop}"  # a launch that fails stops the notebook
    assert executed[3].splitlines()[2:] == ["", "echo done"]  # the continued line goes with its command

    the_plan, executed = plan.plan_notebook(notebook, True, sys.executable)  # in the sandbox: run as they are
    assert [s.outcome for s in the_plan.skipped] == ["ran in the sandbox"] * 3
    assert executed[0].splitlines() == [
        "!pip install -q trl",
        plan.RECORD_SET_UP_EXIT.format(index=0),
        "import torch",
    ]
    assert (
        executed[1] == cells[1] and executed[3] == cells[3]
    )  # a %%bash cell's lines have no exit code to record


def test_a_notebooks_cd_to_its_authors_copy_of_the_tree_runs_in_this_tree(tmp_path):
    """`%cd /home/ubuntu/workshop/labs/ft/assets` (the workshop's clone on its author's machine): the folder of
    this tree it names, listed; a `%cd` to a folder the tree does not hold is left as it is."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "labs" / "ft" / "assets").mkdir(parents=True)
    notebook = tmp_path / "labs" / "ft" / "nb.ipynb"
    cells = ["%cd /home/ubuntu/workshop/labs/ft/assets\n!ls", "%cd /home/ubuntu/elsewhere"]
    notebook.write_text(
        json.dumps({"cells": [{"cell_type": "code", "source": c} for c in cells], "nbformat": 4})
    )
    the_plan, executed = plan.plan_notebook(notebook, True, sys.executable)
    assert executed[0] == f"%cd {tmp_path / 'labs' / 'ft' / 'assets'}\n!ls" and executed[1] == cells[1]
    assert [(s.command, s.cell, s.outcome) for s in the_plan.skipped] == [
        ("%cd /home/ubuntu/workshop/labs/ft/assets", 1, "run as %cd assets, that folder of this tree")
    ]


def test_a_launcher_runs_from_the_folder_its_relative_scripts_resolve_from(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "train.py").write_text("")
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "src" / "pkg" / "eval.py").write_text("")
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    from_root = scripts / "train.sh"
    from_root.write_text("#!/bin/bash\ntorchrun --nproc_per_node 2 src/train.py --lr 1\n")
    own = scripts / "own.sh"
    own.write_text("#!/bin/bash\npython train.py\n")
    (scripts / "train.py").write_text("")
    assert plan.launcher_folder(from_root) == tmp_path and plan.launcher_folder(own) == scripts
    assert (
        plan.module_file(["python", "-m", "pkg.eval", "--x"], tmp_path / "src")
        == tmp_path / "src" / "pkg" / "eval.py"
    )
    assert plan.module_file(["python", "-m", "pkg.missing"], tmp_path / "src") is None


def test_code_facts_models_datasets_columns_and_processes():
    source = """
import argparse
from dataclasses import dataclass, field
from datasets import load_dataset
@dataclass
class Args:
    model_id: str = field(default="meta-llama/Llama-3.2-1B")
    dataset_name: str = "databricks/databricks-dolly-15k"
parser = argparse.ArgumentParser()
parser.add_argument("--tokenizer", default="someone/private-tokenizer")
def fmt(example):
    return example["instruction"] + example["response"]
train = load_dataset("glue", "mrpc", split="train[:10%]")
own = load_dataset("json", data_files="local.jsonl")
model = torch.nn.parallel.DistributedDataParallel(model)
"""
    facts = scan.read_python(source, ["--model_id", "Qwen/Qwen3-0.6B", "gpt2", "tickets.jsonl"])
    assert facts.model_ids == {
        "meta-llama/Llama-3.2-1B",
        "someone/private-tokenizer",
        "Qwen/Qwen3-0.6B",
        "gpt2",
    }
    assert set(facts.datasets) == {"databricks/databricks-dolly-15k", "glue"}
    assert facts.datasets["glue"].config == "mrpc" and "train[:10%]" in facts.datasets["glue"].splits
    assert {"instruction", "response"} <= facts.columns
    assert "DistributedDataParallel" in facts.multi_process


def test_a_compiled_decoders_id_handed_to_nm106s_helper_is_a_model_to_serve():
    """`_from_neuron_export(AutoModelForCausalLM, ID)` loads ID (or the checkpoint its record names): its second
    argument is a model id, served like a `from_pretrained` argument."""
    source = 'model = _from_neuron_export(AutoModelForCausalLM, "aws-neuron/Llama-2-7b-hf-neuron-latency")\n'
    assert scan.read_python(source).model_ids == {"aws-neuron/Llama-2-7b-hf-neuron-latency"}


@pytest.mark.parametrize(
    ("config", "grid", "torchrun"),
    [
        ("DistributedConfig(tp_size=2, fsdp_size=2)", 4, "--nproc_per_node=4"),
        ("DistributedConfig(tp_size=2)", 2, "--nproc_per_node=2"),
        (
            "DistributedConfig(tp_size=8, fsdp_size=4)",
            32,
            "--nproc_per_node=4",
        ),  # fitted to 4 by the bootstrap
        ("DistributedConfig(tp_size=args.tp)", 1, "--nproc_per_node=2"),  # not a literal: the default
    ],
)
def test_a_distributed_config_grid_sets_the_processes_a_script_runs_on(tmp_path, config, grid, torchrun):
    facts = scan.read_python(f"from transformers import DistributedConfig\nconfig = {config}\n")
    assert facts.grid_processes == grid
    (launch,) = plan.plan_script(
        tmp_path / "t.py", [], facts.multi_process, "python", facts.grid_processes
    ).launches
    assert torchrun in launch.argv and launch.processes == int(torchrun.split("=")[1])


def test_code_facts_splits_of_a_dataset_dict_are_not_columns():
    source = """
raw = load_dataset("glue", "sst2")
train, test = raw["train"], load_dataset("imdb")["test"]
local = load_dataset("json", data_files="mine.json")
print(train[0]["sentence"], local["train"])
"""
    facts = scan.read_python(source)
    assert {"train", "test"} <= facts.datasets["glue"].splits and "test" in facts.datasets["imdb"].splits
    assert "json" not in facts.datasets and facts.columns == {"sentence"}


def test_a_bare_name_loaded_as_a_dataset_is_a_canonical_hub_dataset(tmp_path):
    """`load_dataset("yelp_review_full")` (JGalego/HF-on-Trainium): a Hub dataset with no owner in its id, stood
    in and loaded through the offline cache; a bare string elsewhere (a split default) is not a dataset."""
    from datasets import load_dataset

    source = """
SIZE = 1000
parser.add_argument("--dataset_split", default="train")
reviews = load_dataset("yelp_review_full")
tokenized = reviews.map(lambda batch: tokenizer(batch["text"]), batched=True)
tokenized = tokenized.rename_column("label", "labels")
small = tokenized["test"].shuffle(seed=42).select(range(SIZE))
"""
    facts = scan.read_python(source)
    assert set(facts.datasets) == {"yelp_review_full"} and "test" in facts.datasets["yelp_review_full"].splits
    assert facts.columns == {"text", "label"} and facts.rows_selected == 1000
    cache = tmp_path / "datasets"
    cache.mkdir()
    request = facts.datasets["yelp_review_full"]
    request.columns |= facts.columns
    data.write_cache(data.stand_in(request), cache, facts.rows_selected)
    test = load_dataset("yelp_review_full", cache_dir=str(cache))["test"]
    assert set(test.column_names) == {"text", "label"} and len(test) == 1000


def test_notebook_facts_read_the_scripts_cells_write_and_run(tmp_path):
    """A `%%writefile` cell's model is found although the script exists only once the cell has run, and a
    `!torchrun` line's arguments name the dataset; a script already beside the notebook is read too."""
    (tmp_path / "eval.py").write_text("import sys\nname = sys.argv[1]\n")
    cells = [
        "%%writefile train.py\nfrom transformers import AutoModel\nAutoModel.from_pretrained('bert-base-uncased')",
        "!torchrun --nproc_per_node=2 train.py --dataset_name glue",
        "!python eval.py gpt2",
    ]
    facts = runner.notebook_facts(cells, tmp_path)
    assert facts.model_ids == {"bert-base-uncased", "gpt2"} and set(facts.datasets) == {"glue"}


def test_the_configuration_file_a_launch_names_is_read_as_the_flags_it_stands_for(tmp_path):
    """`torchrun run_sft.py --config sft.yaml`, the YAML written by a `%%writefile` cell (TrlParser reads its
    keys as flags): its model is served; a JSON file already beside the notebook is read the same way."""
    scripts, notebooks = tmp_path / "scripts", tmp_path / "notebooks"
    scripts.mkdir()
    notebooks.mkdir()
    (scripts / "run_sft.py").write_text(
        "from dataclasses import dataclass\n\n\n@dataclass\nclass ScriptArguments:\n    model_id: str = None\n"
    )
    (notebooks / "eval.json").write_text('{"model_name_or_path": "gpt2", "bf16": true}')
    cells = [
        '%%writefile sft.yaml\nmodel_id: "Qwen/Qwen3-0.6B"  # the model\nmax_length: 1024\n',
        "%%bash\nexport A=1\ntorchrun --nproc_per_node=2 \\\n    ../scripts/run_sft.py \\\n    --config sft.yaml\n",
        "!python ../scripts/run_sft.py --config eval.json",
    ]
    facts = runner.notebook_facts(cells, notebooks)
    assert facts.model_ids == {"Qwen/Qwen3-0.6B", "gpt2"}
    assert scan.config_arguments(["--config", "missing.yaml", "--x", "1"], lambda path: None) == []


@pytest.mark.parametrize(
    ("code", "argv", "expected"),
    [
        ('TrainingArguments(output_dir="o", report_to="tensorboard")', [], {"tensorboard"}),
        ('TrainingArguments(report_to=["wandb", "mlflow"])', [], {"wandb", "mlflow"}),
        ('parser.add_argument("--report_to", default="wandb")', [], {"wandb"}),
        (
            'parser.add_argument("--report_to", default="wandb")',
            ["--report_to", "tensorboard"],
            {"tensorboard"},
        ),
        (
            "HfArgumentParser(TrainingArguments)",
            ["--report_to", "tensorboard", "wandb", "--bf16"],
            {"tensorboard", "wandb"},
        ),
        ("HfArgumentParser(TrainingArguments)", ["--report_to=none"], {"none"}),
        ("TrainingArguments(report_to=args.report_to)", [], set()),
    ],
)
def test_the_integrations_training_arguments_report_to_are_read(code, argv, expected):
    assert scan.read_python(code, argv).report_to == expected


def test_report_to_in_the_configuration_file_a_notebook_launch_names(tmp_path):
    """philschmid/llama3-aws-trainium-sample: the notebook writes the YAML that `--config` names."""
    (tmp_path / "run_sft.py").write_text("from trl import TrlParser\n")
    cells = [
        '%%writefile llama.yaml\nreport_to: "tensorboard"  # metrics\n',
        "!torchrun run_sft.py --config llama.yaml",
    ]
    assert runner.notebook_facts(cells, tmp_path).report_to == {"tensorboard"}
    listed = "report_to: [tensorboard, wandb]\nbf16: true\n"  # (a list is the values of one flag)
    assert scan.config_arguments(["--config", "c.yaml"], lambda path: listed) == [
        "--report_to",
        "tensorboard",
        "wandb",
    ]


def test_the_modules_each_integration_needs_are_transformers_own():
    """Read from the environment's Transformers: tensorboardX serves when tensorboard is not there; neptune's check
    is a module-level flag."""
    reported = {
        i.name: i
        for i in integrations.reported({"tensorboard", "wandb", "neptune", "all", "bogus"}, sys.executable)
    }
    assert {name: i.modules for name, i in reported.items()} == {
        "neptune": ("neptune",),
        "tensorboard": ("tensorboard", "tensorboardX"),
        "wandb": ("wandb",),
    }
    assert reported["tensorboard"].offline and not reported["neptune"].offline


@pytest.mark.parametrize(
    ("code", "bound"),
    [
        ("ids = torch.randint(0, 30000, (8, 128))", 30000),
        ("ids = torch.randint(32000, (8, 128))", 32000),
        ("VOCAB, SEQ = 50257, 64\nids = torch.randint(VOCAB, (2, SEQ))", 50257),
        ("ids = torch.randint(low=2, high=1000, size=(2, 4))", 1000),
        ("ids = torch.randint(0, config.vocab_size, (2, 4))", 0),  # the model's own size: any vocabulary
        ("n = random.randint(0, 30000)", 0),  # Python's random, not token ids
    ],
)
def test_code_facts_the_token_ids_a_script_draws(code, bound):
    assert scan.read_python(code).token_ids_below == bound


def test_tiny_models_hold_the_token_ids_a_script_draws(tmp_path):
    from transformers import AutoConfig

    assert (
        hub.hub_cache_dir(tmp_path, 30000) != hub.hub_cache_dir(tmp_path) == hub.hub_cache_dir(tmp_path, 100)
    )
    cache = hub.hub_cache_dir(tmp_path, 30000)
    stand_in = hub.ensure_model(cache, "google-bert/bert-base-uncased", "bert", "model-id table", 30000)
    assert stand_in.as_report()["vocab_size"] == 30000
    config = AutoConfig.from_pretrained(
        "google-bert/bert-base-uncased", cache_dir=cache, local_files_only=True
    )
    assert config.vocab_size == 30000


def test_dataset_stand_ins_from_the_table_the_code_or_a_file(tmp_path):
    glue = data.stand_in(data.DatasetRequest("glue", "mrpc", {"train[:1%]"}))
    assert glue.configs == {
        "mrpc": {"sentence1": "text", "sentence2": "text", "label": "label:2", "idx": "int"}
    }
    assert "nyu-mll/glue" in glue.source and {"train", "validation", "test"} <= set(glue.splits)
    with pytest.raises(data.CannotStandIn, match="no config 'nope'"):
        data.stand_in(data.DatasetRequest("glue", "nope"))
    unknown = data.stand_in(data.DatasetRequest("me/mine", columns={"prompt", "input_ids", "messages"}))
    assert unknown.configs == {"default": {"messages": "messages", "prompt": "text"}}
    with pytest.raises(data.CannotStandIn, match="--dataset me/mine=FILE.jsonl"):
        data.stand_in(data.DatasetRequest("me/mine", columns={"input_ids"}))
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"q": "a", "a": "b"}\n')
    assert data.stand_in(data.DatasetRequest("me/mine"), rows).configs == {
        "default": {"q": "file", "a": "file"}
    }


def test_stand_in_datasets_load_through_the_offline_cache(tmp_path):
    from datasets import ClassLabel, load_dataset

    cache = tmp_path / "datasets"
    cache.mkdir()
    data.write_cache(data.stand_in(data.DatasetRequest("glue", "mrpc", {"train"})), cache)
    data.write_cache(
        data.stand_in(data.DatasetRequest("HuggingFaceH4/ultrachat_200k", None, {"train_sft"})), cache
    )
    mrpc = load_dataset("glue", "mrpc", split="train[:50%]", cache_dir=str(cache))
    assert len(mrpc) == data.TRAIN_ROWS // 2 and isinstance(mrpc.features["label"], ClassLabel)
    chat = load_dataset("HuggingFaceH4/ultrachat_200k", split="train_sft", cache_dir=str(cache))
    assert chat[0]["messages"][0]["role"] == "user" and set(chat.column_names) == {
        "prompt",
        "prompt_id",
        "messages",
    }
    rows = tmp_path / "mine.jsonl"
    rows.write_text('{"question": "why?", "answer": "because", "score": 3}\n' * 5)
    data.write_cache(data.stand_in(data.DatasetRequest("me/qa", None, {"train", "test"}), rows), cache)
    mine = load_dataset("me/qa", cache_dir=str(cache))
    assert set(mine) == {"train", "test"} and mine["test"][0] == {
        "question": "why?",
        "answer": "because",
        "score": 3,
    }


def test_a_chat_text_column_holds_turns_in_qwen_s_chatml_format(tmp_path):
    # aicrowd/ChessExplained: code that splits its `text` on <|im_start|> finds the turns a real row has
    from datasets import load_dataset

    cache = tmp_path / "datasets"
    cache.mkdir()
    data.write_cache(data.stand_in(data.DatasetRequest("aicrowd/ChessExplained", None, {"train"})), cache)
    chess = load_dataset("aicrowd/ChessExplained", split="train", cache_dir=str(cache))
    turns = chess[0]["text"].split("<|im_start|>")[1:]
    assert [turn.split("\n", 1)[0] for turn in turns] == ["user", "assistant"]
    assert all(turn.rstrip().endswith("<|im_end|>") for turn in turns)
    assert set(chess.column_names) == {"text", "fen", "move", "explanation"}


def test_tiny_models_load_from_the_local_hub_cache(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_type, source = hub.architecture("meta-llama/Llama-3.2-1B", {})
    stand_in = hub.ensure_model(tmp_path, "meta-llama/Llama-3.2-1B", model_type, source)
    assert (stand_in.model_type, stand_in.source) == (
        "llama",
        "model-id table",
    ) and stand_in.parameters < 200_000
    assert (tmp_path / "models--meta-llama--Llama-3.2-1B" / "refs" / "main").read_text() == hub.REVISION
    tokenizer = AutoTokenizer.from_pretrained(
        "meta-llama/Llama-3.2-1B", cache_dir=tmp_path, local_files_only=True
    )
    model = AutoModelForCausalLM.from_pretrained(
        "meta-llama/Llama-3.2-1B", cache_dir=tmp_path, local_files_only=True
    )
    assert tokenizer.pad_token == "<pad>" and model.config.pad_token_id == tokenizer.pad_token_id
    text = tokenizer.apply_chat_template([{"role": "user", "content": "Hi there"}], tokenize=False)
    # (Llama 3's tokenizer starts every sequence with its bos, as the real one does: not part of the text)
    assert tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) == text
    assert max(tokenizer(text)["input_ids"]) < model.config.vocab_size
    # A BERT-style tokenizer returns the segment ids the model takes; a seq2seq model starts decoding at pad.
    hub.ensure_model(tmp_path, "google-bert/bert-base-cased", "bert", "model-id table")
    bert = AutoTokenizer.from_pretrained(
        "google-bert/bert-base-cased", cache_dir=tmp_path, local_files_only=True
    )
    assert "token_type_ids" in bert("a", "b")
    hub.ensure_model(tmp_path, "google/flan-t5-small", "t5", "model-id table")
    snapshot = tmp_path / "models--google--flan-t5-small" / "snapshots" / hub.REVISION
    assert (
        json.loads((snapshot / "config.json").read_text())["decoder_start_token_id"] == tokenizer.pad_token_id
    )
    # A second request reuses what is there; another architecture for the same id rewrites it.
    assert hub.ensure_model(tmp_path, "meta-llama/Llama-3.2-1B", "llama", source) == stand_in
    assert hub.ensure_model(tmp_path, "meta-llama/Llama-3.2-1B", "mistral", "--model").model_type == "mistral"


@pytest.mark.parametrize(
    ("model_id", "overrides", "message"),
    [
        ("someone/private-model", {}, "--model someone/private-model=MODEL_TYPE"),
        ("Qwen/Qwen-Image", {}, "no tiny stand-in"),
    ],
)
def test_models_the_try_cannot_stand_in_for(model_id, overrides, message):
    with pytest.raises(hub.CannotStandIn, match=message):
        hub.architecture(model_id, overrides)
    assert hub.architecture("someone/private-model", {"someone/private-model": "qwen3"}) == (
        "qwen3",
        "--model",
    )


def test_process_reports_merge_into_one_run():
    worker = {
        "role": "worker",
        "rank": "0",
        "steps": 3,
        "losses": [2.0, 1.5],
        "loss_count": 2,
        "nonfinite_losses": 0,
        "unique_graphs": 3,
        "recompiles": [
            {
                "function": "forward",
                "reasons": ["0/0: tensor 'x' size mismatch at index 1. expected 9, actual 12"],
                "user": {"file": "t.py", "line": 7, "code": "model(x)"},
            },
            {
                "function": "forward",
                "reasons": ["0/1: tensor 'x' size mismatch at index 1. expected 12, actual 5", "0/0: x"],
                "user": {"file": "t.py", "line": 7, "code": "model(x)"},
            },
        ],
        "graph_breaks": {"Tensor.item": 2},
        "models": [],
    }
    run = report.RunReport("python t.py")
    report.merge_processes(
        run,
        [
            {"role": "launcher", "launcher_capped": ["--nproc_per_node 8 -> 2"]},
            worker,
            {**worker, "rank": "1"},
        ],
    )
    assert (run.processes, run.steps, run.loss_finite, run.last_loss) == (2, 3, True, 1.5)
    assert (run.compile_count, run.recompile_count, run.launcher_capped) == (
        3,
        2,
        ["--nproc_per_node 8 -> 2"],
    )
    (reason,) = run.recompile_reasons
    assert (reason["file"], reason["line"], reason["count"], reason["sizes"]) == ("t.py", 7, 2, [9, 12, 5])
    assert "pad to a fixed length" in reason["explanation"]
    assert run.graph_breaks == [{"reason": "Tensor.item", "count": 2}]


def test_a_known_upstream_failure_is_named_with_its_cpu_reproduction_and_the_message_keeps_its_end():
    types = ", ".join(["<class 'torch.nn.parameter.Parameter'>", "<class 'torch.Tensor'>"] * 40)
    message = f"expected all tensors_saved_with_vc_check to be Tensors, got types: [{types}, <class 'torch.distributed.device_mesh.DeviceMesh'>]"
    worker = {
        "role": "worker",
        "rank": "0",
        "error": {"type": "AssertionError", "message": message, "chain": []},
    }
    run = report.RunReport("torchrun t.py")
    report.merge_processes(run, [worker])
    assert run.error["message"].startswith("expected all") and run.error["message"].endswith("DeviceMesh'>]")
    assert run.error["upstream"]["owner"] == "PyTorch" and "--tp 2" in run.error["upstream"]["reproduced_by"]
    assert (
        report.upstream_failure("AssertionError: expected all tensors_saved_with_vc_check to be Tensors")
        is None
    )
    lora = (  # the start of the message benchmarks/tp_compile_cpu.py --tp 2 --lora measured
        "RuntimeError when making fake tensor call\n  Explanation: Dynamo failed to run FX node with fake tensors: "
        "call_function <built-in function linear>(*(DTensor(local_tensor=FakeTensor(..., size=(2, 48, 32)"
    )
    assert report.upstream_failure(lora)["id"] == "tp-lora-dtensor"


def test_a_recompile_on_packed_sequence_boundaries_is_explained_by_packing_not_padding():
    reasons = report._recompile_reasons(
        [
            {
                "function": "forward",
                "reasons": [
                    f"0/0: tensor 'kwargs['cu_seq_lens_q']' size mismatch at index 0. expected {a}, actual {b}"
                ],
            }
            for a, b in ((9, 11), (11, 8))
        ],
        None,
    )
    (reason,) = reasons
    assert reason["count"] == 2 and reason["sizes"] == [9, 11, 8]
    assert (
        "kwargs['cu_seq_lens_q']" in reason["explanation"] and "padding-free packing" in reason["explanation"]
    )
    assert "longest" not in reason["explanation"]


def test_a_run_finds_the_environments_own_commands_first(tmp_path):
    import sys

    from try_run import runner

    env = runner._environment({"PATH": "/usr/bin"}, tmp_path, runner.TryOptions(cache_root=tmp_path))
    assert env["PATH"].split(os.pathsep) == [os.path.dirname(sys.executable), "/usr/bin"]


def test_a_finished_program_aborted_at_exit_by_its_undestroyed_process_group_is_named_pytorch_s():
    """No Python error: the abort is in the output (gloo's threads at the interpreter's exit), reproduced on
    plain CPU by benchmarks/gloo_exit_cpu.py."""
    from types import SimpleNamespace

    from try_run import runner

    run = report.RunReport("torchrun --nproc_per_node=2 train.py")
    run.exit_code = 1
    tail = [
        "rank 0: mean rank 0.5",
        "terminate called without an active exception",
        "torchrun: train.py FAILED: rank 1 failed first, exit code -6 (SIGABRT)",
    ]
    runner._conclude(run, False, {}, tail, SimpleNamespace(timeout_s=60, steps=3, python="python"))
    assert run.status == report.FAILED
    assert "rank 1 failed first, exit code -6 (SIGABRT)" in run.reason
    assert "a PyTorch bug, not the device's" in run.reason and "benchmarks/gloo_exit_cpu.py" in run.reason
    assert "destroy_process_group()" in run.reason
