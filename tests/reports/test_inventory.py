from __future__ import annotations

import json
import textwrap

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from reports.inventory import find_configs, scan_file


def scan_source(tmp_path, source: str, name: str = "script.py", kind: str = "python"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return scan_file(path, name, kind)


def codes(scan) -> list[str]:
    return sorted(risk.rule.code for risk in scan.risks)


def test_models_from_literals_argparse_dataclasses_and_environment(tmp_path):
    scan = scan_source(
        tmp_path,
        """
        import argparse, os
        from dataclasses import dataclass, field
        from datasets import load_dataset
        from transformers import AutoModelForCausalLM, pipeline

        parser = argparse.ArgumentParser()
        parser.add_argument("--model_name_or_path", default="Qwen/Qwen3-0.6B")
        parser.add_argument("--dataset", default="tatsu-lab/alpaca")

        @dataclass
        class Args:
            model_id: str = field(default="google/gemma-3-1b-it")

        MODEL = os.environ.get("MODEL_ID", "mistralai/Mistral-7B-v0.1")
        model = AutoModelForCausalLM.from_pretrained("gpt2")
        generator = pipeline("text-generation", model="facebook/opt-125m")
        data = load_dataset("wikitext", "wikitext-2-raw-v1")
        config_file = "configs/model.json"
        """,
    )
    found = {(reference.value, reference.location.line, reference.how) for reference in scan.models}
    assert ("Qwen/Qwen3-0.6B", 8, "argparse default") in found
    assert ("google/gemma-3-1b-it", 13, "dataclass default") in found
    assert ("mistralai/Mistral-7B-v0.1", 15, "environment variable default") in found
    assert ("gpt2", 16, "from_pretrained() argument") in found
    assert ("facebook/opt-125m", 17, "model= argument") in found
    values = {reference.value for reference in scan.models}
    assert (
        "tatsu-lab/alpaca" not in values and "wikitext" not in values and "configs/model.json" not in values
    )


def test_unsupported_instance_targets(tmp_path):
    scan = scan_source(
        tmp_path,
        """
        # compiled for ml.inf2.xlarge
        config = get_neuron_config("gpt2", instance_type="trn1")
        other = "trn2.48xlarge"
        """,
    )
    assert [(target, location.line) for target, location in scan.targets] == [("inf2.xlarge", 2), ("trn1", 3)]


def test_unpadded_prompts_are_a_risk_only_when_generating(tmp_path):
    risky = scan_source(
        tmp_path,
        """
        inputs = tokenizer(prompts, return_tensors="pt", padding=True)
        model.generate(**inputs)
        """,
    )
    assert "NM801" in codes(risky)
    padded = scan_source(
        tmp_path,
        """
        inputs = tokenizer(prompts, return_tensors="pt", padding="max_length", max_length=128)
        model.generate(**inputs)
        """,
    )
    assert "NM801" not in codes(padded)
    no_generate = scan_source(tmp_path, "inputs = tokenizer(prompts)\n")
    assert codes(no_generate) == []


def test_training_without_fixed_padding(tmp_path):
    loop = scan_source(
        tmp_path,
        """
        collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
        for batch in loader:
            model(**batch).loss.backward()
        """,
    )
    assert codes(loop) == ["NM802"]
    assert loop.risks[0].line == 2  # points at the collator to change
    fixed = scan_source(
        tmp_path,
        """
        collator = DataCollatorForLanguageModeling(tokenizer, mlm=False, pad_to_multiple_of=128)
        trainer = Trainer(model=model, data_collator=collator)
        """,
    )
    assert codes(fixed) == []
    trl = scan_source(tmp_path, "trainer = SFTTrainer(model=model, args=SFTConfig(max_length=512))\n")
    assert codes(trl) == []  # TRL pads to multiples of 128 on neuron by itself
    trl_off = scan_source(tmp_path, "args = SFTConfig(pad_to_multiple_of=None)\n")
    assert codes(trl_off) == ["NM804"]


def test_dynamic_shapes(tmp_path):
    scan = scan_source(
        tmp_path,
        """
        import torch
        compiled = torch.compile(model, dynamic=True)
        torch._dynamo.mark_dynamic(inputs, 1)
        torch._dynamo.config.automatic_dynamic_shapes = True
        static = torch.compile(model, dynamic=False)
        """,
    )
    assert [(risk.rule.code, risk.line) for risk in scan.risks] == [("NM805", 3), ("NM806", 4), ("NM808", 5)]


def test_async_loading_unless_the_variable_is_set(tmp_path):
    unset = scan_source(
        tmp_path,
        """
        tokenizer = AutoTokenizer.from_pretrained("gpt2")
        model = AutoModelForCausalLM.from_pretrained("gpt2")
        """,
    )
    assert [(risk.rule.code, risk.line) for risk in unset.risks] == [("NM809", 3)]
    for setter in (
        'os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")',
        'os.environ["HF_DEACTIVATE_ASYNC_LOAD"] = "1"',
    ):
        done = scan_source(tmp_path, f"import os\n{setter}\nmodel = AutoModel.from_pretrained('gpt2')\n")
        assert codes(done) == []


def test_shell_launcher(tmp_path):
    scan = scan_source(
        tmp_path,
        """
        #!/bin/bash
        # runs on a trn1.32xlarge
        MODEL_ID="meta-llama/Llama-3.2-1B"
        torchrun --nproc_per_node 32 train.py --model_name_or_path Qwen/Qwen2.5-0.5B --model_id $MODEL_ID
        optimum-cli export neuron --model gpt2 --dynamic-batch-size out/
        """,
        name="run.sh",
        kind="shell",
    )
    assert {(reference.value, reference.location.line) for reference in scan.models} == {
        ("meta-llama/Llama-3.2-1B", 4),
        ("Qwen/Qwen2.5-0.5B", 5),
        ("gpt2", 6),
    }
    assert [target for target, _ in scan.targets] == ["trn1.32xlarge"]
    assert codes(scan) == ["NM807"]


def test_notebook_cells_and_shell_magics(tmp_path):
    notebook = new_notebook()
    notebook.cells = [
        new_markdown_cell("Exported for trn2"),
        new_code_cell(
            "!optimum-cli export neuron --model Qwen/Qwen3-0.6B --instance_type inf2 out/\n%time x = 1"
        ),
        new_code_cell(
            "model_id = 'HuggingFaceTB/SmolLM3-3B'\nmodel = AutoModelForCausalLM.from_pretrained(model_id)"
        ),
    ]
    path = tmp_path / "nb.ipynb"
    nbformat.write(notebook, path)
    scan = scan_file(path, "nb.ipynb", "notebook")
    assert {(reference.value, str(reference.location)) for reference in scan.models} == {
        ("Qwen/Qwen3-0.6B", "nb.ipynb (cell 1, line 1)"),
        ("HuggingFaceTB/SmolLM3-3B", "nb.ipynb (cell 2, line 1)"),
    }
    assert [str(location) for _, location in scan.targets] == ["nb.ipynb (cell 1, line 1)"]  # code cells only
    assert [(risk.rule.code, risk.cell, risk.line) for risk in scan.risks] == [("NM809", 2, 2)]


def test_broken_files_do_not_stop_the_scan(tmp_path):
    assert scan_source(tmp_path, "def broken(:\n").models == []
    (tmp_path / "bad.ipynb").write_text("{not json")
    assert scan_file(tmp_path / "bad.ipynb", "bad.ipynb", "notebook").models == []


def test_find_configs_honours_exclude(tmp_path):
    for name in ("keep", "skip"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert find_configs([tmp_path], ("skip/*",)) == [tmp_path / "keep" / "config.json"]


def test_model_ids_in_dict_values_and_shell_commands(tmp_path):
    scan = scan_source(
        tmp_path,
        """
        CONFIGS = {"model_name_or_path": "mistralai/Mistral-7B-v0.1", "dataset": "tatsu-lab/alpaca"}
        SIZES = {"small": "Qwen/Qwen3-0.6B", "large": "someone/unknown-thing", "api": "gpt-4o"}
        EMBEDDER = "Qwen/Qwen3-Embedding-8B"
        TOKENIZER_ID = "mistralai/Mistral-7B-v0.1"
        """,
    )
    found = {(reference.value, reference.how) for reference in scan.models}
    assert found == {
        ("mistralai/Mistral-7B-v0.1", "dict value 'model_name_or_path'"),
        ("Qwen/Qwen3-0.6B", "dict value 'small'"),  # in the bundled table, under any key
        ("Qwen/Qwen3-Embedding-8B", "assigned to EMBEDDER"),  # a table id in any variable but a tokenizer's
    }
    shell = scan_source(
        tmp_path,
        """
        MODEL=${MODEL:-codellama/CodeLlama-7b-hf}
        huggingface-cli download Qwen/Qwen3-8B --local-dir ./weights
        optimum-cli export neuron -m meta-llama/Llama-3.2-1B --batch_size 1 out/
        python -m torch.distributed.run train.py
        vllm serve "google/gemma-3-1b-it"
        """,
        name="run.sh",
        kind="shell",
    )
    found = {(reference.value, reference.location.line) for reference in shell.models}
    assert found == {
        ("codellama/CodeLlama-7b-hf", 2),
        ("Qwen/Qwen3-8B", 3),
        ("meta-llama/Llama-3.2-1B", 4),
        ("google/gemma-3-1b-it", 6),
    }


def test_bang_lines_of_notebooks_are_shell(tmp_path):
    notebook = new_notebook(
        cells=[
            new_code_cell("!optimum-cli export neuron -m Qwen/Qwen3-8B out/\nprint('done')"),
            new_code_cell('!huggingface-cli download codellama/CodeLlama-7b-hf\nx = {"model": "gpt2"}'),
        ]
    )
    path = tmp_path / "nb.ipynb"
    path.write_text(nbformat.writes(notebook))
    scan = scan_file(path, "nb.ipynb", "notebook")
    found = {(reference.value, reference.location.cell, reference.location.line) for reference in scan.models}
    assert found == {("Qwen/Qwen3-8B", 1, 1), ("codellama/CodeLlama-7b-hf", 2, 1), ("gpt2", 2, 2)}


def test_launchers_use_what_they_run_and_install_not_what_comments_say(tmp_path):
    launcher = scan_source(
        tmp_path,
        """
        #!/bin/bash
        # Fine-tune with optimum-neuron, then TRL (history, not code)
        pip install "optimum[neuronx]" peft==0.21.0 --upgrade
        python -m trl.scripts.sft --model_name_or_path Qwen/Qwen3-0.6B
        """,
        name="run.sh",
        kind="shell",
    )
    assert launcher.uses == {"optimum-neuron", "peft", "trl"}
    comment_only = scan_source(
        tmp_path, "#!/bin/bash\n# was: optimum-cli, trl\ntorchrun train.py\n", "b.sh", "shell"
    )
    assert comment_only.uses == set()


def test_a_notebook_cell_with_an_ipython_line_in_a_block_is_still_read(tmp_path):
    notebook = new_notebook(
        cells=[
            new_code_cell("%pip install trl"),
            new_code_cell(
                'model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B")\nfor f in files:\n    !ls {f}'
            ),
        ]
    )
    path = tmp_path / "nb.ipynb"
    path.write_text(nbformat.writes(notebook))
    scan = scan_file(path, "nb.ipynb", "notebook")
    assert scan.uses == {"trl"}
    assert [(risk.rule.code, risk.cell, risk.line) for risk in scan.risks] == [("NM809", 2, 1)]
    assert [(model.value, model.location.cell) for model in scan.models] == [("Qwen/Qwen3-0.6B", 2)]
