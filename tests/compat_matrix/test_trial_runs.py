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
from try_run.report import RunReport, text_lines

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
         "vocab_size": 256, "source": "model-id table", "parts": [], "kept": {}, "kept_from": "", "loaded": True,
         "real_size_plan": run["models"][0]["real_size_plan"]}
    ]  # fmt: skip
    # Beside the tiny run, the real Qwen3-0.6B's plan for what the run did (training).
    assert run["models"][0]["real_size_plan"].startswith(
        "train, bf16, batch 1 x sequence 2048: 0.60B parameters"
    )
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


def test_a_module_run_eagerly_on_the_device_counts_as_its_process(tmp_path, try_cache):
    """No model of a library, no optimizer step, no compile: the process still ran on the device (its peak
    memory there says so), which the report counts and whose CPU fallbacks it lists."""
    write(
        tmp_path,
        "infer.py",
        """
        import torch

        layer = torch.nn.Linear(4, 2).to("neuron").eval()
        with torch.no_grad():
            print(layer(torch.ones(3, 4, device="neuron")).sum().item())
        """,
    )
    _, document, stderr = run_try(tmp_path, "infer.py", cache=try_cache)
    (run,) = document["runs"]
    assert (run["status"], run["processes"], run["steps"]) == ("ran", 1, 0), (stderr, run)
    assert run["cpu_fallback_ops"] == ["aten._local_scalar_dense"]


def test_a_frame_past_the_recompile_limit_is_named_and_its_refused_compile_is_no_recompile(
    tmp_path, try_cache
):
    """Dynamo logs the call that reaches --recompile-limit as a recompile, then runs the frame eagerly: the report
    counts only the graphs compiled and names where the limit was reached."""
    write(
        tmp_path,
        "shapes.py",
        """
        import torch


        def scale(x):
            return x * 2 + 1


        compiled = torch.compile(scale, backend="neuron")
        for length in (3, 4, 5, 6):
            compiled(torch.ones(length, device="neuron"))
        """,
    )
    _, document, stderr = run_try(tmp_path, "shapes.py", "--recompile-limit", "2", cache=try_cache)
    (run,) = document["runs"]
    assert (run["status"], run["compile_count"], run["recompile_count"]) == ("ran", 2, 1), (stderr, run)
    (hit,) = run["recompile_limit_hits"]
    assert (hit["limit_type"], hit["limit"], hit["file"], hit["line"]) == (
        "recompile_limit",
        2,
        "shapes.py",
        10,
    )
    assert hit["function"].startswith("scale in ") and "size mismatch at index 0" in hit["last_reason"]
    (line,) = [line for line in text_lines([RunReport(**run)]) if "recompile_limit (2)" in line]
    assert "reached at shapes.py:10: scale in " in line and "ran eagerly from then on" in line


def test_the_tools_own_process_imports_neither_torch_nor_transformers_for_a_script_without_a_model(tmp_path):
    """The script's process imports what it imports; the try's own reads torch's version from its files (the
    same as torch.__version__) and imports Transformers only to build a stand-in: each import costs seconds."""
    write(tmp_path, "hello.py", "print('hello')\n")
    check = (
        "import sys\nfrom pathlib import Path\nfrom try_run import TryOptions, try_path\n"
        "from standin.native import torch_version\n"
        "(run,) = try_path(Path('hello.py'), [], TryOptions(show_output=False))\n"
        "print(run.status, 'torch' in sys.modules, 'transformers' in sys.modules)\n"
        "version = torch_version()\nimport torch\nprint(version == torch.__version__)\n"
    )
    result = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, capture_output=True, text=True)
    assert result.stdout.split() == ["ran", "False", "False", "True"], result.stderr


def test_a_module_of_the_tree_the_script_cannot_reach_is_its_own_import_not_a_package(tmp_path, try_cache):
    (tmp_path / ".git").mkdir()  # the repository the script belongs to
    (tmp_path / "optimizers").mkdir()
    write(tmp_path / "optimizers", "mars.py", "class Mars: ...\n")
    (tmp_path / "examples").mkdir()
    write(tmp_path / "examples", "train.py", "from mars import Mars\n")
    _, document, stderr = run_try(tmp_path / "examples", "train.py", cache=try_cache)
    (run,) = document["runs"]
    assert run["status"] == "failed", (stderr, run)
    assert "`mars` is a module of this tree (optimizers/mars.py)" in run["reason"]
    assert "install" not in run["reason"] and run["installs"] == []


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
    result = subprocess.run(
        [*CLI, "try", "raises.py", "--recompile-limit", "0"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 2 and "'--recompile-limit': 0 is not in the range x>=1" in result.stderr


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


@pytest.mark.slow
def test_a_script_missing_a_required_argument_under_torchrun_is_not_run_with_the_parsers_message(
    tmp_path, try_cache
):
    write(
        tmp_path,
        "train.py",
        """
        import argparse
        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument("--data", required=True)
        parser.parse_args()
        """,
    )
    write(tmp_path, "run.sh", "torchrun --nproc_per_node 2 train.py\n")
    code, document, _ = run_try(tmp_path, "run.sh", cache=try_cache)
    (run,) = document["runs"]
    # torchrun's failure banner ends the output; the reason is the workers' usage error, not the banner
    assert code == 1 and run["status"] == "not-run", run
    assert "the following arguments are required: --data: the command the try ran lacks them" in run["reason"]


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

    # A failing fourth cell, after three that load no model (each try of the whole notebook costs seconds).
    notebook.cells = [nbformat.v4.new_code_cell(f"step = {n}") for n in range(3)]
    notebook.cells.append(nbformat.v4.new_code_cell("x = 1\nraise ValueError('bad cell')"))
    nbformat.write(notebook, tmp_path / "chat.ipynb")
    code, document, _ = run_try(tmp_path, "chat.ipynb", cache=try_cache)
    error = document["runs"][0]["error"]
    assert code == 1 and (error["type"], error["cell"], error["line"]) == ("ValueError", 4, 2)

    notebook.cells[-1] = nbformat.v4.new_code_cell("import os\nos._exit(1)")
    nbformat.write(notebook, tmp_path / "chat.ipynb")
    code, document, _ = run_try(tmp_path, "chat.ipynb", cache=try_cache)
    assert code == 1 and "kernel died in cell 4" in document["runs"][0]["reason"]


def test_a_load_of_an_id_with_no_stand_in_is_not_run_with_what_to_pass(tmp_path, try_cache):
    # Named only in the load call; and an id read from a file the code reading cannot see.
    write(
        tmp_path,
        "load.py",
        """
        from transformers import AutoModel
        AutoModel.from_pretrained("someone/private-model")
        """,
    )
    write(
        tmp_path,
        "from_file.py",
        """
        from pathlib import Path
        from transformers import AutoModel
        AutoModel.from_pretrained(Path("model.txt").read_text().strip())
        """,
    )
    (tmp_path / "model.txt").write_text("someone/other-model\n")
    for name in ("load.py", "from_file.py"):
        code, document, _ = run_try(tmp_path, name, cache=try_cache)
        run = document["runs"][0]
        assert code == 1 and run["status"] == "not-run", run
        assert "--model" in run["reason"] and "MODEL_TYPE" in run["reason"], run["reason"]


PROCESSORS = """
import numpy as np
import torch
from transformers import (
    AutoImageProcessor, AutoModelForSequenceClassification, AutoProcessor, AutoTokenizer,
    SiglipModel, ViTForImageClassification, WhisperForConditionalGeneration,
)

# optimum-neuron's BERT notebook pads to the checkpoint's model_max_length.
tokenizer = AutoTokenizer.from_pretrained("google-bert/bert-base-uncased")
bert = AutoModelForSequenceClassification.from_pretrained("google-bert/bert-base-uncased").to("neuron")
batch = tokenizer(["Hello, Trainium!"], padding="max_length", truncation=True, return_tensors="pt")
assert batch["input_ids"].shape == (1, 512)
with torch.no_grad():
    print(torch.compile(bert, backend="neuron")(**batch.to("neuron")).logits.shape)

# Whisper: the id built from a constant, log-mel features at the checkpoint's 80 bins, then generate.
SIZE = "tiny"
processor = AutoProcessor.from_pretrained(f"openai/whisper-{SIZE}")
whisper = WhisperForConditionalGeneration.from_pretrained("openai/whisper-" + SIZE).to("neuron")
audio = np.sin(np.linspace(0, 2000, 16000 * 5)).astype(np.float32)
features = processor(audio, sampling_rate=16000, return_tensors="pt").input_features
assert features.shape == (1, 80, 3000)
print(processor.batch_decode(whisper.generate(features.to("neuron")), skip_special_tokens=True))

image = np.random.randint(0, 255, (300, 400, 3), dtype=np.uint8)
vit_processor = AutoImageProcessor.from_pretrained("google/vit-base-patch16-224")
vit = ViTForImageClassification.from_pretrained("google/vit-base-patch16-224").to("neuron")
pixels = vit_processor(images=image, return_tensors="pt")["pixel_values"]
assert pixels.shape == (1, 3, 224, 224)
print(vit(pixel_values=pixels.to("neuron")).logits.shape)

siglip_processor = AutoProcessor.from_pretrained("google/siglip-base-patch16-224")
siglip = SiglipModel.from_pretrained("google/siglip-base-patch16-224").to("neuron")
inputs = siglip_processor(text=["a cat", "a dog"], images=image, padding="max_length", return_tensors="pt")
assert inputs["input_ids"].shape == (2, 64)
print(siglip(**inputs.to("neuron")).logits_per_image.shape)
"""

SENTENCE_TRANSFORMERS = """
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2", device="neuron")
embeddings = model.encode(["Trainium is a chip", "so is Inferentia"], convert_to_tensor=True)
assert model.max_seq_length == 256 and embeddings.shape[0] == 2
assert abs(float(embeddings.norm(dim=-1).min()) - 1) < 1e-4  # its Normalize module
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "served"),
    [
        (
            PROCESSORS,
            {
                "google-bert/bert-base-uncased": [],
                "openai/whisper-tiny": ["WhisperFeatureExtractor", "WhisperProcessor"],
                "google/vit-base-patch16-224": ["ViTImageProcessorPil"],
                "google/siglip-base-patch16-224": ["SiglipImageProcessorPil", "SiglipProcessor"],
            },
        ),
        (
            SENTENCE_TRANSFORMERS,
            {
                "sentence-transformers/all-MiniLM-L6-v2": [
                    "sentence-transformers modules (Transformer, Pooling, Normalize)"
                ]
            },
        ),
    ],
    ids=["processors", "sentence-transformers"],
)
def test_what_scripts_load_besides_the_model_is_served(tmp_path, try_cache, script, served):
    write(tmp_path, "load.py", script)
    code, document, _ = run_try(tmp_path, "load.py", cache=try_cache)
    run = document["runs"][0]
    assert code == 0, run["reason"] + run["output_tail"]
    assert {model["id"]: model["parts"] for model in run["models"]} == served


DIFFUSION = """
import torch
from diffusers import DiffusionPipeline, FluxPipeline

pipe = DiffusionPipeline.from_pretrained("stable-diffusion-v1-5/stable-diffusion-v1-5", torch_dtype=torch.float32)
pipe = pipe.to("neuron")
steps = []
image = pipe(  # its default 50 steps
    "an astronaut riding a horse", callback_on_step_end=lambda p, i, t, kw: steps.append(i) or kw
).images[0]
assert type(pipe).__name__ == "StableDiffusionPipeline" and image.size == (512, 512)
assert len(steps) <= 3, steps  # capped to 2 (PNDM runs one more step than asked)
image.save("astronaut.png")

flux = FluxPipeline.from_pretrained("black-forest-labs/FLUX.1-schnell", torch_dtype=torch.bfloat16).to("neuron")
# 256 pixels: 256 latent tokens, not the default 1024's 4096 (the default size is SD's assertion above).
image = flux(
    "a cat holding a sign", guidance_scale=0.0, num_inference_steps=4, max_sequence_length=256, height=256, width=256
).images[0]
assert image.size == (256, 256)
"""


@pytest.mark.slow
def test_a_diffusers_script_runs_its_pipelines_for_two_denoising_steps(tmp_path, try_cache):
    write(tmp_path, "generate.py", DIFFUSION)
    code, document, _ = run_try(tmp_path, "generate.py", cache=try_cache)
    run = document["runs"][0]
    assert code == 0, run["reason"] + run["output_tail"]
    assert {model["id"]: model["architecture"] for model in run["models"]} == {
        "stable-diffusion-v1-5/stable-diffusion-v1-5": "StableDiffusionPipeline",
        "black-forest-labs/FLUX.1-schnell": "FluxPipeline",
    }
    assert not (tmp_path / "astronaut.png").exists()  # written in the try's copy


@pytest.mark.slow
def test_an_image_url_gets_a_stand_in_picture_and_other_urls_stay_offline(tmp_path, try_cache):
    write(
        tmp_path,
        "photo.py",
        """
        import requests
        from PIL import Image
        from transformers.image_utils import load_image

        first = Image.open(requests.get("http://images.cocodataset.org/val2017/000000039769.jpg", stream=True).raw)
        second = load_image("https://example.org/cat.png?size=large")
        assert first.size == second.size == (640, 480) and first.mode == "RGB"
        try:
            requests.get("https://example.org/data.json", timeout=5)
        except requests.ConnectionError:
            print("no network")
        else:
            raise SystemExit("a URL that names no image reached the network")
        """,
    )
    code, document, _ = run_try(tmp_path, "photo.py", cache=try_cache)
    (run,) = document["runs"]
    assert code == 0, run
    assert [(image["url"], image["line"]) for image in run["images"]] == [
        ("http://images.cocodataset.org/val2017/000000039769.jpg", 5),
        ("https://example.org/cat.png?size=large", 6),
    ]
