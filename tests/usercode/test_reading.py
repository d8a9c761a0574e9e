"""`usercode.reading`: a file's code as it runs, read with the project's parsers (what the compile risks and
the checklist read). Comments and data are not code; what bash or IPython runs is, wherever it sits."""

from __future__ import annotations

import textwrap

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from usercode.reading import read_code


def test_shell_commands_assignments_and_defaults(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(
        textwrap.dedent(
            """\
            #!/bin/bash
            # usage: run.sh --model_name_or_path not/this-one
            MODEL=${MODEL:-codellama/CodeLlama-7b-hf}
            export MODEL_ID="meta-llama/Llama-3.2-1B"
            env HF_DEACTIVATE_ASYNC_LOAD=1 srun torchrun train.py \\
                --model_name_or_path Qwen/Qwen2.5-0.5B
            bash -c "python eval.py --model=gpt2"
            cat > job.sh <<EOF
            python finetune.py --model_id google/gemma-3-1b-it
            EOF
            cat <<'EOF' > config.json
            {"note": "python data.py --model not/a-command"}
            EOF
            """
        )
    )
    code = read_code(path, "shell")
    commands = {command.words: command.lines for command in code.commands}
    assert commands[("torchrun", "train.py", "--model_name_or_path", "Qwen/Qwen2.5-0.5B")] == (5, 5, 6, 6)
    assert ("python", "eval.py", "--model=gpt2") in commands  # the string bash -c runs
    assert commands[("python", "finetune.py", "--model_id", "google/gemma-3-1b-it")] == (9, 9, 9, 9)
    assert not any("not/this-one" in words or "not/a-command" in " ".join(words) for words in commands)
    assignments = {(a.name, a.value, a.line) for a in code.assignments}
    assert {("MODEL_ID", "meta-llama/Llama-3.2-1B", 4), ("HF_DEACTIVATE_ASYNC_LOAD", "1", 5)} <= assignments
    assert [(d.name, d.value, d.line) for d in code.defaults] == [("MODEL", "codellama/CodeLlama-7b-hf", 3)]


def test_notebook_cells_as_ipython_runs_them(tmp_path):
    notebook = new_notebook(
        cells=[
            new_code_cell("!optimum-cli export neuron \\\n  --model Qwen/Qwen3-0.6B \\\n  out/"),
            new_code_cell("%pip install trl\nfor flag in ['a', 'b']:\n    !echo {flag}\nx = 1"),
            new_code_cell("%%bash\nhf download google/gemma-3-1b-it"),
            new_code_cell("%%writefile train.py\nimport torch\nmodel = load()"),
            new_code_cell(">>> import torch"),  # pasted prompts: IPython strips them, not read as code here
        ]
    )
    path = tmp_path / "nb.ipynb"
    path.write_text(nbformat.writes(notebook))
    code = read_code(path, "notebook")
    commands = [(command.cell, command.words[:2], command.line) for command in code.commands]
    assert commands == [
        (1, ("optimum-cli", "export"), 1),
        (2, ("pip", "install"), 1),
        (2, ("echo", "{flag}"), 3),
        (3, ("hf", "download"), 2),
    ]
    # Cell 2 is Python around its IPython lines (the loop body is a placeholder, so the cell parses); the
    # %%bash cell and the pasted prompts are not.
    modules = {module.cell: module for module in code.python}
    assert sorted(modules) == [1, 2, 4]
    last = modules[2].tree.body[-1]
    assert modules[2].line(last) == 4
    assert modules[4].line(modules[4].tree.body[-1]) == 3  # the %%writefile body, on the cell's lines
    assert [cell for cell, _ in code.texts] == [1, 2, 3, 4, 5]


def test_what_does_not_parse_adds_nothing(tmp_path):
    (tmp_path / "broken.py").write_text("def broken(:\n")
    (tmp_path / "bad.ipynb").write_text("{not json")
    assert read_code(tmp_path / "broken.py", "python").python == []
    assert read_code(tmp_path / "bad.ipynb", "notebook").texts == []
    assert read_code(tmp_path / "missing.sh", "shell").commands == []


def test_wrappers_are_looked_through_to_the_program_they_run(tmp_path):
    """`usercode.launchers` names each wrapper once: with options of their own (`srun -N 1`, `timeout 60`,
    `xargs -n 1`) up to the program, `time` / `env NAME=value` / `nohup` word by word."""
    path = tmp_path / "run.sh"
    path.write_text(
        "srun -N 1 timeout 60 python a.py\n"
        "find . -name '*.json' | xargs -n 1 python b.py\n"
        "time env HF_HUB_OFFLINE=1 nohup torchrun c.py\n"
    )
    code = read_code(path, "shell")
    assert [command.words for command in code.commands] == [
        ("python", "a.py"),
        ("find", ".", "-name", "*.json"),
        ("python", "b.py"),
        ("torchrun", "c.py"),
    ]
    assert [(assignment.name, assignment.value) for assignment in code.assignments] == [
        ("HF_HUB_OFFLINE", "1")
    ]
