"""Notebooks: the diff is as small as the rewrite, whatever the JSON style; cells IPython cannot parse are
left as they are; findings and SARIF say which cell and which line in it."""

from __future__ import annotations

import difflib
import json

import pytest

from migrator.engine import REWRITERS, Job, Mode, process, rewriter
from migrator.report import sarif_report
from usercode.sources import discover

CELLS = [
    {
        "cell_type": "markdown",
        "id": "intro",
        "metadata": {"tags": ["doc"]},
        "source": ["# Entraînement — café ☕"],
    },
    {
        "cell_type": "code",
        "execution_count": 3,
        "id": "setup",
        "metadata": {"scrolled": True},
        "outputs": [{"name": "stdout", "output_type": "stream", "text": ["déjà\n"]}],
        "source": ["import os\n", "\n", 'os.environ["NEURON_FUSE_SOFTMAX"] = "1"\n', 'print("prêt")'],
    },
    {
        "cell_type": "code",
        "execution_count": None,
        "id": "train",
        "metadata": {},
        "outputs": [],
        "source": [
            "!torchrun --nproc_per_node 2 run_clm.py \\\n",
            "    --zero_1 true \\\n",
            "    --output_dir out",
        ],
    },
]


def notebook(**style) -> str:
    document = {
        "cells": CELLS,
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    trailing = style.pop("trailing", "\n")
    return json.dumps(document, **style) + trailing


@pytest.mark.parametrize(
    "style",
    [
        {"indent": 1, "sort_keys": True, "ensure_ascii": False},  # what Jupyter writes
        {"indent": 2, "ensure_ascii": True},  # another writer: key order kept, non-ASCII escaped
        {"indent": 4, "ensure_ascii": False, "trailing": ""},
    ],
)
def test_rewrite_changes_only_the_rewritten_lines(style):
    original = notebook(**dict(style))
    migrated, findings = REWRITERS["notebook"](original)
    changed = [
        line
        for line in difflib.unified_diff(original.splitlines(), migrated.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    # Removed: the os.environ line (with the blank line above it) and `--zero_1 true \`; the command
    # line gets its HF_DEACTIVATE_ASYNC_LOAD=1 prefix. Nothing else in the file moves.
    assert [line[0] for line in changed] == ["-", "-", "-", "-", "+"], changed
    before, after = json.loads(original), json.loads(migrated)
    for old, new in zip(before["cells"], after["cells"], strict=True):
        assert {k: v for k, v in old.items() if k != "source"} == {
            k: v for k, v in new.items() if k != "source"
        }
    assert migrated.endswith(style.get("trailing", "\n")) and not migrated.endswith("\n\n")
    assert REWRITERS["notebook"](migrated)[0] == migrated


def test_unparseable_cell_is_left_as_it_is_under_its_todo_and_the_others_migrate():
    cells = [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": "a",
            "metadata": {},
            "outputs": [],
            "source": ["x = (\n", "!echo still open"],
        },
        {
            "cell_type": "code",
            "execution_count": None,
            "id": "b",
            "metadata": {},
            "outputs": [],
            "source": ["import torch_xla.core.xla_model as xm\n", "device = xm.xla_device()"],
        },
    ]
    original = (
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"
    )
    migrated, findings = REWRITERS["notebook"](original)
    after = json.loads(migrated)["cells"]
    assert after[0]["source"][1:] == cells[0]["source"]
    assert after[0]["source"][0].startswith("# TODO(neuron-migrate): NM470 IPython cannot parse this cell")
    assert "xla_device" not in "".join(after[1]["source"])
    assert [(f.code, f.cell) for f in findings if not f.fixed] == [("NM470", 1)]
    assert REWRITERS["notebook"](migrated)[0] == migrated  # one TODO, kept on a rerun


def test_a_cell_indented_as_a_whole_keeps_running_under_its_todo():
    """IPython strips a common indentation when the first line has it (a cell pasted with one leading space
    runs); the migrator leaves such a cell as it is, and its TODO, indented the same, keeps it runnable."""
    import ast

    from IPython.core.inputtransformer2 import TransformerManager

    source = [
        " # Upgrade the compiler\n",
        " !pip install --upgrade neuronx-cc==2.21.*\n",
        " import torch_xla",
    ]
    cell = {
        "cell_type": "code",
        "execution_count": None,
        "id": "a",
        "metadata": {},
        "outputs": [],
        "source": source,
    }
    original = (
        json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"
    )
    migrated, findings = REWRITERS["notebook"](original)
    after = json.loads(migrated)["cells"][0]["source"]
    assert after[1:] == source and "NM470" in after[0]
    assert [(f.code, f.cell) for f in findings if not f.fixed] == [("NM470", 1)]
    ast.parse(TransformerManager().transform_cell("".join(after)))  # runs as the original did
    assert REWRITERS["notebook"](migrated)[0] == migrated


def test_sarif_results_carry_the_cell_and_the_line_in_it(tmp_path):
    path = tmp_path / "train.ipynb"
    path.write_text(notebook(indent=1))
    (source,) = discover([path])
    result = process(Job(source, Mode.CHECK, display="train.ipynb"))
    sarif = sarif_report([result])["runs"][0]["results"]
    zero_1 = next(r for r in sarif if "--zero_1" in r["message"]["text"])
    assert zero_1["properties"]["cell"] == 2 and zero_1["properties"]["cellLine"] == 2
    # Code scanning shows the .ipynb file: the location is the JSON line that holds the cell's line.
    line = zero_1["locations"][0]["physicalLocation"]["region"]["startLine"]
    assert "--zero_1 true" in path.read_text().splitlines()[line - 1]


@pytest.mark.parametrize("indent", [None, 1, 2])
def test_every_notebook_finding_points_at_the_json_line_of_its_cell_line(indent):
    text = notebook(indent=indent) if indent is not None else notebook(indent=None, separators=(",", ":"))
    _, findings = REWRITERS["notebook"](text)
    document = json.loads(text)
    code = [c for c in document["cells"] if c["cell_type"] == "code"]
    lines = text.splitlines()
    for finding in findings:
        source_line = "".join(code[finding.cell - 1]["source"]).splitlines()[finding.line - 1]
        assert json.dumps(source_line)[1:-1].rstrip() in lines[finding.file_line - 1]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_writer_json_cannot_reproduce_still_gets_a_diff_as_small_as_the_rewrite(newline):
    # 1e-05 is what Python writes for a number this file spells 0.00001: no json.dumps setting gives the
    # file back, so the changed source is replaced where it sits.
    original = notebook(indent=1, sort_keys=True, ensure_ascii=False).replace(
        '"metadata": {\n  "language_info"', '"metadata": {\n  "lr": 0.00001,\n  "language_info"'
    )
    original = original.replace("\n", newline)
    migrated, _ = REWRITERS["notebook"](original)
    removed = [
        line for line in difflib.ndiff(original.splitlines(), migrated.splitlines()) if line[:1] == "-"
    ]
    assert len(removed) == 4 and '"lr": 0.00001' in migrated
    assert migrated.count("\r\n") == (migrated.count("\n") if newline == "\r\n" else 0)
    assert REWRITERS["notebook"](migrated)[0] == migrated


def test_an_install_keeps_a_package_that_a_written_script_still_imports():
    writefile = "%%writefile train.py\nfrom optimum.neuron.utils import is_neuronx_available\nprint(is_neuronx_available())\n"
    migrated, findings = REWRITERS["notebook"](
        _notebook_of("%pip install optimum-neuron datasets", writefile)
    )
    install = "".join(json.loads(migrated)["cells"][0]["source"])
    assert install.endswith("\n%pip install optimum-neuron datasets")  # under its TODO, not uninstalled
    assert ("NM473", 1) in [(f.code, f.cell) for f in findings]
    writefile = "%%writefile train.py\nimport torch\n"
    migrated, _ = REWRITERS["notebook"](_notebook_of("%pip install optimum-neuron datasets", writefile))
    assert "optimum-neuron" not in "".join(json.loads(migrated)["cells"][0]["source"])


def test_a_launch_of_a_script_the_notebook_writes_reads_that_scripts_parser():
    script = (
        "%%writefile scripts/train.py\nfrom transformers import HfArgumentParser, TrainingArguments\n"
        "parser = HfArgumentParser(TrainingArguments)\n"
    )
    launch = "!XLA_USE_BF16=1 torchrun --nproc_per_node 2 scripts/train.py --warmup_ratio 0.1 --zero_1 true"
    migrated, findings = REWRITERS["notebook"](_notebook_of(script, launch))
    assert "".join(json.loads(migrated)["cells"][1]["source"]) == (
        "!HF_DEACTIVATE_ASYNC_LOAD=1 torchrun --nproc_per_node 2 scripts/train.py --warmup_steps 0.1 --bf16 true"
    )
    assert sorted(f.code for f in findings) == ["NM461", "NM462", "NM465", "NM468"]


def test_a_finding_moved_into_a_cell_keeps_its_why_action_and_subject():
    script = (
        "from optimum.neuron import NeuronTrainingArguments\n"
        'args = NeuronTrainingArguments(output_dir="out", pipeline_parallel_size=2)\n'
    )
    cell = {"cell_type": "code", "execution_count": None, "id": "a", "metadata": {}, "outputs": []}
    document = {"cells": [dict(cell, source=script)], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    _, in_script = REWRITERS["python"](script)
    _, in_notebook = REWRITERS["notebook"](json.dumps(document, indent=1))

    def structured(findings):
        fields = ("code", "fixed", "why", "action", "subject")
        return [{name: f.to_dict().get(name) for name in fields} for f in findings]

    assert any(f.why for f in in_script)  # the case has a manual finding with structured texts
    # The import's own TODO names the statement it waits for: by its line in a script, by its code in a
    # notebook (whose joined module's lines a person never sees).
    kept = "`optimum.neuron` stays imported only for "
    assert in_script[0].why.startswith(kept + "line 4 (NM205)")
    assert in_notebook[0].why.startswith(kept + "`args = NeuronTrainingArguments(")
    assert structured(in_notebook[1:]) == structured(in_script[1:])
    assert all(f.cell == 1 for f in in_notebook)


def _code_cell(number: int, source: str) -> dict:
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": f"c{number}",
        "metadata": {},
        "outputs": [],
    } | {"source": source.splitlines(keepends=True)}


def _notebook_of(*sources: str) -> str:
    cells = [_code_cell(number, source) for number, source in enumerate(sources, start=1)]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


TP_LOAD = (
    "from optimum.neuron import NeuronModelForCausalLM\n"
    'model = NeuronModelForCausalLM.from_pretrained("m", export=True, tensor_parallel_size=2)\n'
)


def test_a_tensor_parallel_load_in_a_cell_says_how_a_notebook_runs_it_and_a_script_keeps_torchrun():
    _, in_script = REWRITERS["python"](TP_LOAD)
    _, in_cell = REWRITERS["notebook"](_notebook_of(TP_LOAD))
    _, in_written = REWRITERS["notebook"](_notebook_of("%%writefile generate.py\n" + TP_LOAD))
    [script] = [f for f in in_script if f.code == "NM103"]
    [cell] = [f for f in in_cell if f.code == "NM103"]
    [written] = [f for f in in_written if f.code == "NM103"]
    # A kernel is one process, and DistributedConfig(tp_size=2) needs two: the cell cannot run as it is.
    assert not cell.fixed and "`!torchrun --nproc_per_node=2 generate.py`" in cell.message
    assert "%%writefile generate.py" in cell.message
    # A script, and a script that a `%%writefile` cell writes, are launched with torchrun: nothing in them says
    # they are, so the file says it (a TODO).
    for finding in (script, written):
        assert not finding.fixed and "`torchrun --nproc_per_node=2`" in finding.message
        assert "notebook" not in finding.message


def test_diff_of_a_notebook_shows_the_changed_cells_sources_and_writes_nothing(tmp_path):
    path = tmp_path / "nb.ipynb"
    original = _notebook_of(
        "import torch\nprint(torch.__version__)",
        "# compile once\n!optimum-cli export neuron --model gpt2 --sequence_length 128 gpt2-neuron\n!ls",
        'import torch_xla.core.xla_model as xm\ndevice = xm.xla_device()\nprint("done")',
    )
    path.write_text(original)
    [source] = discover([path], ())
    result = process(Job(source, Mode.DIFF, display=str(path)))
    assert path.read_text() == original
    shown = str(path).lstrip("/")
    # Cell 1 is unchanged; the JSON quoting and the cell metadata never show.
    assert result.diff.startswith(f"--- a/{shown} (cell 2)\n+++ b/{shown} (cell 2)\n@@ -1,3 +1,2 @@\n")
    assert "-!optimum-cli export neuron --model gpt2 --sequence_length 128 gpt2-neuron\n" in result.diff
    assert f"--- a/{shown} (cell 3)\n" in result.diff and "(cell 1)" not in result.diff
    assert '+device = torch.device("neuron")\n' in result.diff and '"source"' not in result.diff
    assert result.diff.endswith(' print("done")\n')


def test_a_yaml_config_a_launch_passes_its_script_is_migrated_as_the_launchs_flags():
    """`torchrun sft.py --config sft.yaml` with the YAML written by a `%%writefile` cell: TrlParser reads its
    keys as flags, so they are renamed and removed as the flags are; the parallel degrees the script declares
    itself are read there and need no review; a key whose value is a block is not removed."""
    script = (
        "%%writefile scripts/sft.py\nfrom dataclasses import dataclass\nfrom trl import SFTConfig, TrlParser\n\n\n"
        "@dataclass\nclass ScriptArguments:\n    tensor_parallel_size: int = 1\n\n\n"
        "args, config = TrlParser([ScriptArguments, SFTConfig]).parse_args_and_config()\n"
    )
    config = (
        "%%writefile sft.yaml\nmodel_id: gpt2\nmax_seq_length: 512  # tokens\npadding_free: true\n"
        "tensor_parallel_size: 8\nzero_1: false\n"
    )
    launch = "%%bash\ntorchrun --nproc_per_node 2 \\\n  scripts/sft.py \\\n  --config sft.yaml\n"
    migrated, findings = REWRITERS["notebook"](_notebook_of(script, config, launch))
    assert "".join(json.loads(migrated)["cells"][1]["source"]) == (
        "%%writefile sft.yaml\n# TODO(neuron-migrate): NM471 `zero_1` in this file are optimum-neuron / XLA "
        "settings: review them\nmodel_id: gpt2\nmax_length: 512  # tokens\ntensor_parallel_size: 8\nzero_1: false\n"
    )
    assert sorted((f.code, f.line, f.fixed) for f in findings if f.cell == 2) == [
        ("NM461", 4, True),
        ("NM462", 3, True),
        ("NM471", 6, False),
    ]
    # The same file passed to no launch: only flagged, as before.
    migrated, _ = REWRITERS["notebook"](_notebook_of(config))
    assert "max_seq_length: 512" in "".join(json.loads(migrated)["cells"][0]["source"])


def test_a_removed_optim_value_in_a_yaml_config_a_launch_passes_becomes_its_replacement():
    """`optim: adamw_hf` read by TrlParser as `--optim adamw_hf`: Transformers 5 raises on it."""
    script = (
        "%%writefile sft.py\nfrom trl import SFTConfig, TrlParser\n\n"
        "(config,) = TrlParser([SFTConfig]).parse_args_and_config()\n"
    )
    config = '%%writefile sft.yaml\nmodel_id: gpt2\noptim: "adamw_hf"  # HF\'s AdamW\n'
    launch = "!torchrun --nproc_per_node 2 sft.py --config sft.yaml"
    migrated, findings = REWRITERS["notebook"](_notebook_of(script, config, launch))
    assert "".join(json.loads(migrated)["cells"][1]["source"]) == (
        "%%writefile sft.yaml\nmodel_id: gpt2\noptim: adamw_torch  # HF's AdamW\n"
    )
    assert [(f.code, f.line, f.fixed) for f in findings if f.cell == 2] == [("NM227", 3, True)]


def test_a_yaml_config_that_gives_a_compiled_script_tensor_parallelism_turns_checkpointing_off():
    """The YAML's `gradient_checkpointing: true` with `tensor_parallel_size: 8`, for a script that compiles and
    loads with DistributedConfig: the PyTorch failure NM222 avoids on a launch's flag, avoided in the file."""
    script = (
        "%%writefile train.py\nfrom dataclasses import dataclass\nfrom trl import SFTConfig, TrlParser\n"
        "from transformers import AutoModelForCausalLM, DistributedConfig\n\n\n"
        "@dataclass\nclass ScriptArguments:\n    tensor_parallel_size: int = 1\n\n\n"
        "parser = TrlParser([ScriptArguments, SFTConfig])\nparser.set_defaults(torch_compile=True)\n"
        "args, config = parser.parse_args_and_config()\nmodel = AutoModelForCausalLM.from_pretrained(\n"
        "    'gpt2', distributed_config=DistributedConfig(tp_size=args.tensor_parallel_size)\n)\n"
    )
    config = (
        "%%writefile sft.yaml\ngradient_checkpointing: true   # saves memory\ntensor_parallel_size: {tp}\n"
    )
    launch = "!torchrun --nproc_per_node 8 train.py --config sft.yaml"
    migrated, findings = REWRITERS["notebook"](_notebook_of(script, config.format(tp=8), launch))
    assert "".join(json.loads(migrated)["cells"][1]["source"]) == (
        "%%writefile sft.yaml\ngradient_checkpointing: false   # saves memory\ntensor_parallel_size: 8\n"
    )
    assert [(f.code, f.line, f.fixed) for f in findings if f.cell == 2] == [("NM222", 2, True)]
    migrated, findings = REWRITERS["notebook"](_notebook_of(script, config.format(tp=1), launch))
    assert "gradient_checkpointing: true" in "".join(json.loads(migrated)["cells"][1]["source"])


def test_a_launch_after_a_cd_to_the_authors_copy_of_the_tree_reads_the_script_there(tmp_path):
    """`%cd /home/ubuntu/workshop/labs/ft/assets` then `!torchrun train.py ...`: the script is the tree's
    `labs/ft/assets/train.py`, whose parser decides the flags (without the `%cd`: an unknown script, NM466)."""
    assets = tmp_path / "labs" / "ft" / "assets"
    assets.mkdir(parents=True)
    (assets / "train.py").write_text(
        "from trl import SFTConfig, TrlParser\n\nconfig, = TrlParser([SFTConfig]).parse_args_and_config()\n"
    )
    launch = "!torchrun --nproc_per_node 2 train.py --max_seq_length 512"
    migrate = rewriter("notebook", tmp_path / "labs" / "ft", tmp_path)
    migrated, findings = migrate(_notebook_of("%cd /home/ubuntu/workshop/labs/ft/assets", launch))
    assert "train.py --max_length 512" in "".join(json.loads(migrated)["cells"][1]["source"])
    assert "NM462" in [f.code for f in findings]
    _, findings = migrate(_notebook_of(launch))
    assert "NM466" in [f.code for f in findings]


@pytest.mark.parametrize(
    ("command", "copy"),
    [
        (
            "!wget -q https://raw.githubusercontent.com/org/repo/main/nb/scripts/train.py",
            "!cp scripts/train.py train.py",
        ),
        (
            "!curl -sSL -o run.py https://github.com/org/repo/raw/dev/x/nb/scripts/train.py",
            "!cp scripts/train.py run.py",
        ),
        (
            "!wget https://github.com/org/repo/blob/main/shared/train.py?raw=true",
            "!cp ../shared/train.py train.py",
        ),
    ],
)
def test_a_download_of_a_script_the_tree_holds_copies_the_migrated_file(tmp_path, command, copy) -> None:
    for script in ("nb/scripts/train.py", "shared/train.py"):
        (tmp_path / script).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / script).write_text("import torch\n")
    migrate = rewriter("notebook", tmp_path / "nb", tmp_path)
    migrated, findings = migrate(_notebook_of(command))
    assert "".join(json.loads(migrated)["cells"][0]["source"]) == copy
    assert [f.code for f in findings] == ["NM474"]
    assert migrate(migrated) == (migrated, [])


@pytest.mark.parametrize(
    "command",
    [
        "!curl https://raw.githubusercontent.com/org/repo/main/nb/scripts/train.py",  # to its output
        "!wget -P out https://raw.githubusercontent.com/org/repo/main/nb/scripts/train.py",  # an option it can't read
        "!wget https://raw.githubusercontent.com/org/repo/main/nb/scripts/other.py",  # not in the tree
        "!wget https://raw.githubusercontent.com/org/repo/main/train.py",  # a name alone proves nothing
        "!wget https://raw.githubusercontent.com/org/repo/main/outside/data.py",  # above the tree
    ],
)
def test_a_download_the_tree_does_not_hold_exactly_stays(tmp_path, command) -> None:
    (tmp_path / "tree" / "nb" / "scripts").mkdir(parents=True)
    (tmp_path / "tree" / "nb" / "scripts" / "train.py").write_text("import torch\n")
    (tmp_path / "tree" / "nb" / "train.py").write_text("import torch\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "data.py").write_text("x = 1\n")
    migrate = rewriter("notebook", tmp_path / "tree" / "nb", tmp_path / "tree")
    notebook = _notebook_of(command + " # neuron")
    migrated, findings = migrate(notebook)
    assert "NM474" not in [f.code for f in findings]
    assert "".join(json.loads(migrated)["cells"][0]["source"]) == command + " # neuron"


EXPORT = "!optimum-cli export neuron --model Qwen/Qwen3-0.6B --batch_size 1 --sequence_length 512 {extra}qwen_neuron/"
LOAD = "from optimum.neuron import NeuronModelForCausalLM\nmodel = NeuronModelForCausalLM.from_pretrained({args})\n"


@pytest.mark.parametrize(
    ("extra", "args", "done"),
    [
        ("", '"qwen_neuron"', True),
        ("--disable-validation ", '"./qwen_neuron/"', True),
        # The load already sets a setting the export fixes: two values, no exact rewrite.
        ("", '"qwen_neuron", batch_size=4', False),
        # The folder from a variable: what the load reads is not known here.
        ("", "folder", False),
        # An option whose effect a load cannot be said to keep.
        ("--output_hidden_states ", '"qwen_neuron"', False),
        # The model from a notebook variable.
        ("", '"qwen_neuron"', None),
    ],
)
def test_a_cell_s_load_of_a_cli_export_becomes_that_export_at_load_time_only_where_exact(extra, args, done):
    export = EXPORT.format(extra=extra)
    if done is None:
        export, done = export.replace("Qwen/Qwen3-0.6B", "{model_id}"), False
    folder = 'folder = "qwen_neuron"\n' if args == "folder" else ""
    migrated, findings = REWRITERS["notebook"](_notebook_of(export, folder + LOAD.format(args=args)))
    export_findings = [f for f in findings if f.code == "NM452"]
    sources = ["".join(cell["source"]) for cell in json.loads(migrated)["cells"]]
    if done:
        # The export went (its cell with it): the load compiles the original checkpoint with its settings.
        assert not any("optimum-cli" in source for source in sources)
        assert 'AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B"' in sources[-1]
        assert "max_cache_len = 512" in sources[-1]
        assert all(f.fixed for f in export_findings) and len(export_findings) == 2
        # Findings on the load sit within its line as written (at the folder's literal for the export's settings).
        load_line = LOAD.format(args=args).splitlines()[1]
        on_load = [f for f in findings if f.cell == 2 and f.line == 2]
        assert on_load and all(f.column <= len(load_line) for f in on_load)
    else:
        assert "optimum-cli export neuron" in sources[0] and "TODO(neuron-migrate): NM452" in sources[0]
        assert [f.fixed for f in export_findings] == [False]
