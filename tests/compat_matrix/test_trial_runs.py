"""`neuron-migrate try` end to end: scripts, launchers and notebooks written here the way users write them,
run on the stand-in neuron device through the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from try_run.device import STANDIN_DEVICE

CLI = [sys.executable, "-c", "from commands.neuron_migrate import main; main()"]


def run_try(
    folder: Path, name: str, *arguments: str, cache: Path, timeout: int = 400
) -> tuple[int, dict, str]:
    report = folder / f"{name}.try.json"
    result = subprocess.run(
        [*CLI, "try", name, "-q", "--format", "json", "--report", str(report), *arguments],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "NEURON_MIGRATE_CACHE": str(cache)},
    )
    document = json.loads(report.read_text()) if report.is_file() else {}
    return result.returncode, document, result.stderr


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def snapshot(folder: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}


LOOP = """
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B").to("neuron")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
step = torch.compile(model, backend="neuron", dynamic=False)
texts = ["short", "a much longer line of text to pad to", "a medium line"] * 20
for start in range(0, len(texts), 2):
    batch = tokenizer(texts[start : start + 2], return_tensors="pt", padding=True).to("neuron")
    loss = step(**batch, labels=batch["input_ids"]).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
torch.save(model.state_dict(), "finetuned.pt")
"""


@pytest.mark.slow
def test_a_hand_written_loop_runs_three_steps_and_names_the_recompiling_line(tmp_path, try_cache):
    write(tmp_path, "train.py", LOOP)
    before = snapshot(tmp_path)
    code, document, stderr = run_try(tmp_path, "train.py", cache=try_cache)
    (run,) = document["runs"]
    assert code == 0, (stderr, run)
    assert (run["status"], run["steps"], run["processes"], run["loss_finite"]) == ("ran", 3, 1, True)
    assert run["device"] == STANDIN_DEVICE and run["device_graphs"] >= 2
    # Batches padded to their longest text: a new length at step 2 is a new graph on the device.
    assert run["recompile_count"] >= 1
    (reason,) = run["recompile_reasons"]
    assert (reason["file"], reason["line"]) == ("train.py", 11) and "pad to a fixed length" in reason[
        "explanation"
    ]
    assert run["models"] == [
        {"id": "Qwen/Qwen3-0.6B", "architecture": "qwen3", "parameters": run["models"][0]["parameters"],
         "vocab_size": 256, "source": "model-id table", "loaded": True}
    ]  # fmt: skip
    # The user's folder is untouched: the run wrote into its temporary copy.
    assert snapshot(tmp_path) == {
        **before,
        tmp_path / "train.py.try.json": (tmp_path / "train.py.try.json").read_bytes(),
    }


def test_an_op_that_falls_back_to_the_cpu_is_named_once(tmp_path, try_cache):
    """The neuron rules name an op packet (aten.op), the stand-in's torch_neuronx a schema (aten::op): the report
    lists each op run on the CPU once, as the rules name it."""
    write(
        tmp_path,
        "fallbacks.py",
        """
        import torch

        model = torch.nn.Linear(4, 1).to("neuron")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            inputs = torch.arange(8.0, device="neuron").view(2, 4) - step
            loss = model(inputs).pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            print(step, loss.item(), inputs.nonzero().shape)
        """,
    )
    _, document, stderr = run_try(tmp_path, "fallbacks.py", cache=try_cache)
    (run,) = document["runs"]
    assert run["cpu_fallback_ops"] == ["aten._local_scalar_dense", "aten.nonzero"], (stderr, run)


TRAINER = """
import argparse

from datasets import load_dataset
from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--model_name", default="Qwen/Qwen3-0.6B")
parser.add_argument("--output_dir", default="/opt/ml/model")
args = parser.parse_args()
tokenizer = AutoTokenizer.from_pretrained(args.model_name)
model = AutoModelForSequenceClassification.from_pretrained(args.model_name, num_labels=2)
model.config.pad_token_id = tokenizer.pad_token_id
data = load_dataset("glue", "mrpc")
data = data.map(
    lambda b: tokenizer(b["sentence1"], b["sentence2"], truncation=True, padding="max_length", max_length=64),
    batched=True,
)
arguments = TrainingArguments(
    output_dir=args.output_dir, per_device_train_batch_size=4, num_train_epochs=3, save_strategy="no"
)
trainer = Trainer(model=model, args=arguments, train_dataset=data["train"], eval_dataset=data["validation"])
trainer.train()
print("eval", trainer.evaluate())
"""


@pytest.mark.slow
def test_a_trainer_script_with_a_glue_task_gets_its_label_column_and_stops_at_the_cap(tmp_path, try_cache):
    write(tmp_path, "classify.py", TRAINER)
    code, document, stderr = run_try(
        tmp_path, "classify.py", "--steps", "2", "--", "--model_name", "Qwen/Qwen3-0.6B", cache=try_cache
    )
    (run,) = document["runs"]
    assert code == 0, (stderr, run)
    assert (run["status"], run["steps"], run["loss_finite"]) == ("ran", 2, True)
    assert run["command"] == "python classify.py --model_name Qwen/Qwen3-0.6B"
    (dataset,) = run["datasets"]
    assert dataset["id"] == "glue" and "label" in dataset["columns"] and "nyu-mll/glue" in dataset["source"]


def test_bad_input_gets_one_line_and_the_right_exit_code(tmp_path, try_cache):
    write(tmp_path, "broken.py", "def f(:\n    pass\n")
    write(tmp_path, "strict.py", "import argparse\nargparse.ArgumentParser().parse_args()\n")
    write(tmp_path, "raises.py", "def load(n):\n    return [0] * n\n\nrows = load(3)\nprint(rows[5])\n")
    write(tmp_path, "setup.sh", "#!/bin/bash\npip install trl\necho ready\n")
    write(tmp_path, "slow.py", "import time\ntime.sleep(60)\n")

    code, document, _ = run_try(tmp_path, "broken.py", cache=try_cache)
    assert code == 1 and document["runs"][0]["status"] == "not-run"
    assert document["runs"][0]["reason"].startswith("broken.py:1: SyntaxError")

    code, document, _ = run_try(tmp_path, "strict.py", "--", "--epochs", "3", cache=try_cache)
    assert code == 1 and "unrecognized arguments: --epochs 3" in document["runs"][0]["reason"]

    code, document, _ = run_try(tmp_path, "raises.py", cache=try_cache)
    error = document["runs"][0]["error"]
    assert code == 1 and (error["type"], error["file"], error["line"]) == ("IndexError", "raises.py", 5)

    code, document, _ = run_try(tmp_path, "slow.py", "--timeout", "3", cache=try_cache)
    assert code == 1 and "--timeout of 3 s" in document["runs"][0]["reason"]

    for arguments, message in [
        (["missing.py"], "missing.py: no such file"),
        (["setup.sh"], "no launch found"),
        (["raises.py", "--model", "no-equals-sign"], "expected ID=MODEL_TYPE"),
    ]:
        result = subprocess.run([*CLI, "try", *arguments], cwd=tmp_path, capture_output=True, text=True)
        assert (
            result.returncode == 2
            and message in result.stderr
            and len(result.stderr.strip().splitlines()) == 1
        )


@pytest.mark.slow
def test_an_unknown_model_id_ends_the_run_with_what_to_pass(tmp_path, try_cache):
    write(
        tmp_path,
        "load.py",
        """
        from transformers import AutoModelForCausalLM
        model_id = "someone/private-model"
        model = AutoModelForCausalLM.from_pretrained(model_id)
        """,
    )
    code, document, _ = run_try(
        tmp_path, "load.py", "--model", "someone/private-model=qwen3", cache=try_cache
    )
    assert code == 0 and document["runs"][0]["models"][0]["architecture"] == "qwen3"
    # Its stand-in stays in the shared cache, but a run that does not serve it does not find it there.
    code, document, _ = run_try(tmp_path, "load.py", cache=try_cache)
    assert code == 1 and "--model someone/private-model=MODEL_TYPE" in document["runs"][0]["reason"]


DDP = """
import torch
import torch.distributed as dist

# The launcher's workers get the stand-in too (they inherit the try's environment).
assert torch.accelerator.current_accelerator().type == "neuron"
dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""


@pytest.mark.slow
def test_a_launcher_runs_its_launch_capped_to_two_processes_and_lists_its_setup(tmp_path, try_cache):
    write(tmp_path, "ddp.py", DDP)
    write(
        tmp_path,
        "launch.sh",
        """
        #!/usr/bin/env bash
        set -euo pipefail
        pip install -r requirements.txt
        aws s3 sync s3://my-bucket/data ./data
        NPROC=32
        srun --nodes 1 torchrun --nproc_per_node $NPROC ddp.py
        """,
    )
    code, document, stderr = run_try(tmp_path, "launch.sh", cache=try_cache)
    (run,) = document["runs"]
    assert code == 0, (stderr, run)
    assert (run["command"], run["processes"], run["steps"]) == ("torchrun --nproc_per_node 32 ddp.py", 2, 3)
    assert run["launcher_capped"] == ["--nproc_per_node 32 -> 2"] and run["loss_finite"] is True
    assert [(s["command"], s["line"]) for s in run["skipped"]] == [
        ("pip install -r requirements.txt", 3),
        ("aws s3 sync s3://my-bucket/data ./data", 4),
    ]


@pytest.mark.slow
def test_a_notebook_runs_in_a_kernel_and_a_failing_cell_is_named(tmp_path, try_cache):
    import nbformat

    cells = [
        "!pip install -q trl\nimport torch\nfrom transformers import AutoModelForCausalLM, AutoTokenizer",
        'tokenizer = AutoTokenizer.from_pretrained("HuggingFaceTB/SmolLM3-3B")\n'
        'model = AutoModelForCausalLM.from_pretrained("HuggingFaceTB/SmolLM3-3B").to("neuron")',
        'messages = [{"role": "user", "content": "hi"}]\n'
        'ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt").to("neuron")\n'
        "out = model.generate(**ids, max_new_tokens=200)\nprint('new tokens:', out.shape[-1] - ids['input_ids'].shape[-1])",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell) for cell in cells])
    nbformat.write(notebook, tmp_path / "chat.ipynb")
    code, document, stderr = run_try(tmp_path, "chat.ipynb", cache=try_cache)
    (run,) = document["runs"]
    assert code == 0, (stderr, run)
    assert run["generate_calls"] == 1 and run["skipped"][0]["cell"] == 1
    assert "new tokens: 4" in run["output_tail"]  # generation capped to a few new tokens

    notebook.cells.append(nbformat.v4.new_code_cell("x = 1\nraise ValueError('bad cell')"))
    nbformat.write(notebook, tmp_path / "chat.ipynb")
    code, document, _ = run_try(tmp_path, "chat.ipynb", cache=try_cache)
    error = document["runs"][0]["error"]
    assert code == 1 and (error["type"], error["cell"], error["line"]) == ("ValueError", 4, 2)

    notebook.cells[-1] = nbformat.v4.new_code_cell("import os\nos._exit(1)")
    nbformat.write(notebook, tmp_path / "chat.ipynb")
    code, document, _ = run_try(tmp_path, "chat.ipynb", cache=try_cache)
    assert code == 1 and "kernel died in cell 4" in document["runs"][0]["reason"]
