"""The leftover scan (NM501/NM502): what it reads (code and strings, not comments or docstrings), one
finding per distinct reference, one TODO per statement that survives reruns, and the exit code it forces."""

from __future__ import annotations

from click.testing import CliRunner

from commands.neuron_migrate import main
from migrator.engine import migrate_notebook, migrate_python, migrate_shell


def manual(findings, code):
    return [finding for finding in findings if finding.code == code and not finding.fixed]


def test_comments_and_docstrings_are_not_leftovers():
    source = '''"""Trained with torch_xla on trn1.32xlarge before."""
import torch_xla_free_module  # torch_xla was here; XLA_USE_BF16=1

def train():
    """Formerly `model.neuron_config`."""
    return "neuron"  # "xla"
'''
    migrated, findings = migrate_python(source + 'DEVICE = "neuron"  # optimum.neuron\n')
    assert findings == []


def test_a_reference_repeated_in_one_block_is_one_finding_naming_its_other_lines_and_a_todo_on_each():
    source = """import os
from optimum.exporters import TasksManager

a = TasksManager.infer_task_from_model("gpt2")
b = TasksManager.infer_task_from_model("bert")
os.environ.setdefault("XLA_FLAGS", "--xla_dump_to=/tmp"); batch = a.neuron_batch_size + b.neuron_batch_size


def tasks(names):
    return [TasksManager.infer_task_from_model(name) for name in names]
"""
    migrated, findings = migrate_python(source)
    subjects = [(finding.line, finding.subject) for finding in manual(findings, "NM501")]
    assert subjects == [(4, "TasksManager"), (6, ".neuron_batch_size"), (10, "TasksManager")]
    assert "(also on lines 2, 5)" in manual(findings, "NM501")[0].message
    # A TODO above each use and on the import (a person fixes the file from its TODOs, the import first).
    assert migrated.count("NM501 `TasksManager`") == 4
    assert migrated.count("NM501 `.neuron_batch_size`") == 1  # one TODO for the statement
    again, again_findings = migrate_python(migrated)
    assert again == migrated
    assert sorted(f.code for f in again_findings) == sorted(f.code for f in findings if not f.fixed)


def test_text_a_program_only_shows_is_no_decision():
    source = """import logging
import os

import pytest

logger = logging.getLogger(__name__)
flags = os.environ.get("NEURON_CC_FLAGS", "")
print(f"NEURON_CC_FLAGS={os.environ['NEURON_CC_FLAGS']} on trn1.32xlarge")
logger.warning("torch_xla is still installed: uninstall torch-xla")
parser_help = dict(help="XLA_USE_BF16 is ignored now")


def check(device):
    assert device != "xla", "run on trn1.2xlarge with torch_xla"
    if device == "cpu":
        raise RuntimeError(f"no XLA device: {device}, see optimum-neuron docs")


@pytest.mark.skipif(True, reason="needs torch_xla on trn1.32xlarge")
def test_compiled():
    print(f"batch {model.neuron_config.batch_size}")
"""
    migrated, findings = migrate_python(source)
    # The variable read (line 7) and the attribute a print still evaluates (line 21) are decisions.
    assert [(f.line, f.subject) for f in findings] == [(7, "NEURON_CC_FLAGS"), (21, ".neuron_config")]
    assert migrated.count("# TODO(neuron-migrate)") == 2
    assert migrate_python(migrated)[0] == migrated


def test_echo_and_printed_heredocs_are_no_decision():
    script = (
        "#!/bin/bash\n"
        'echo "launching on trn1.32xlarge with XLA_USE_BF16=$XLA_USE_BF16"\n'
        "cat <<BANNER\nUses neuron_parallel_compile on ml.trn1.32xlarge\nBANNER\n"
        "aws ec2 run-instances --instance-type trn1.32xlarge\n"
    )
    migrated, findings = migrate_shell(script)
    assert [(f.line, f.code, f.subject) for f in findings] == [(6, "NM502", "trn1.32xlarge")]


def test_import_kept_for_an_unflagged_use_gets_a_todo():
    # `xm` is used in a statement no rule marked: the import is the only sign that torch_xla remains.
    source = "import torch_xla.core.xla_model as xm\n\nprint(xm)\n"
    migrated, findings = migrate_python(source)
    assert migrated.startswith("# TODO(neuron-migrate): NM501 `torch_xla`")
    assert [f.line for f in manual(findings, "NM501")] == [1]


def test_shell_strings_count_comments_do_not():
    script = "#!/bin/bash\n# we used trn1.32xlarge\nsagemaker-deploy --instance 'ml.inf2.xlarge'\n"
    migrated, findings = migrate_shell(script)
    assert [(f.line, f.subject) for f in manual(findings, "NM502")] == [(3, "ml.inf2.xlarge")]
    assert migrated.splitlines()[2].startswith("# TODO(neuron-migrate): NM502 `ml.inf2.xlarge`")
    assert migrate_shell(migrated)[0] == migrated


def test_uninstalling_a_legacy_package_is_not_a_leftover():
    script = "#!/bin/bash\npip uninstall -y torch-xla neuronx-distributed\ngit clone https://github.com/aws-neuron/neuronx-distributed\n"
    migrated, findings = migrate_shell(script)
    assert [(f.line, f.subject) for f in manual(findings, "NM501")] == [(3, "neuronx_distributed")]


def test_notebook_cells_are_scanned_once_per_reference():
    import json

    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "id": str(i),
            "source": src,
        }
        for i, src in enumerate(
            ['TYPE = "ml.inf2.xlarge"\n', "!aws ec2 describe-instances --filter inf2.xlarge\n"]
        )
    ]
    notebook = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)
    migrated, findings = migrate_notebook(notebook)
    assert [(f.cell, f.line) for f in manual(findings, "NM502")] == [(1, 1), (2, 1)]
    assert "# TODO(neuron-migrate): NM502 `inf2.xlarge`" in migrated
    assert migrate_notebook(migrated)[0] == migrated


def test_cli_exits_1_and_says_manual_work_remains(tmp_path):
    (tmp_path / "deploy.py").write_text('INSTANCE = "ml.trn1.32xlarge"\n')
    (tmp_path / "plain.py").write_text('print("nothing to migrate")\n')
    result = CliRunner().invoke(main, [str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 1
    assert "1 manual item; manual work remains" in result.stderr
    assert "NM502" in result.output + result.stderr


def test_every_match_holds_one_of_its_patterns_needles():
    """A pattern's needles decide whether its regex runs at all: a match without one would go unseen."""
    from pathlib import Path

    from migrator.families.leftovers.marking import PATTERNS
    from migrator.registry import PYTHON_RULE_MODULES, SHELL_RULE_MODULES

    texts = [path.read_text(errors="replace") for path in Path("fixtures").rglob("*") if path.is_file()]
    texts += [
        "batch = model.neuron_batch_size",
        "neuronx-cc compile model.hlo --target inf2",
        "import libneuronxla",
    ]  # not in fixtures
    texts += [
        text
        for module in (*PYTHON_RULE_MODULES, *SHELL_RULE_MODULES)
        for rule in module.RULES
        for example in rule.examples
        for text in (example.before, example.after)
    ]
    matched = set()
    for index, pattern in enumerate(PATTERNS):
        for text in texts:
            for match in pattern.regex.finditer(text):
                assert any(needle in match.group(0) for needle in pattern.needles), (pattern.regex, match)
                if pattern.foreign is None or not pattern.foreign(match.group(0), text):
                    matched.add(index)
    assert len(matched) == len(PATTERNS)  # every pattern met at least once


def test_the_tgi_neuron_image_is_a_platform_leftover():
    script = (
        "#!/bin/bash\n"
        "docker run -p 8080:80 --device=/dev/neuron0 -e HF_BATCH_SIZE=4 "
        "ghcr.io/huggingface/neuronx-tgi:latest --model-id Qwen/Qwen3-0.6B\n"
    )
    migrated, findings = migrate_shell(script)
    assert [f.subject for f in manual(findings, "NM502")] == ["huggingface/neuronx-tgi:latest"]
    assert migrate_shell(migrated)[0] == migrated  # one TODO, kept on a rerun


def test_a_legacy_module_imported_beside_another_leaves_the_other_s_uses_alone():
    """`import torch, torch_neuron`: the import carries torch-neuron's TODO; `torch`'s uses are not legacy."""
    code, findings = migrate_python(
        "import torch, torch_neuron\nx = torch.randn(2, 2)\ntraced = torch_neuron.trace_helper(x)\n"
    )
    assert "`torch` comes from an import" not in code
    assert [f.line for f in findings] == [1, 3]


def _tokenize_reading(code):
    """What `tokenize` reads of a module: the comments and the docstrings blanked, the other strings' ranges,
    the neuron-migrate TODO comments (the leftover scan's own reading must agree with it). An f-string is one
    string (one token before Python 3.12, FSTRING_START ... FSTRING_END since)."""
    import io
    import tokenize

    starts = [0]
    for line in code.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    significant, comments, depth = [], [], 0
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        kind = tokenize.tok_name[token.type]
        if kind == "COMMENT":
            comments.append(token)
        elif kind == "FSTRING_START":
            depth += 1
            if depth == 1:
                significant.append(["STRING", token.start, None])
        elif kind == "FSTRING_END":
            depth -= 1
            if depth == 0:
                significant[-1][2] = token.end
        elif depth == 0 and kind != "NL":
            significant.append([kind, token.start, token.end])
    chars, strings, todos = list(code), [], []
    for index, (kind, first, last) in enumerate(significant):
        if kind == "STRING":
            start, end = starts[first[0] - 1] + first[1], starts[last[0] - 1] + last[1]
            alone = not index or significant[index - 1][0] in ("NEWLINE", "INDENT", "DEDENT")
            if alone and significant[index + 1][0] in ("NEWLINE", "ENDMARKER"):
                chars[start:end] = [char if char == "\n" else " " for char in chars[start:end]]
            else:
                strings.append((start, end))
    for token in comments:
        start = starts[token.start[0] - 1] + token.start[1]
        chars[start : start + len(token.string)] = " " * len(token.string)
        if token.string.startswith("# TODO(neuron-migrate)"):
            todos.append((token.start[0] - 1, token.string))
    return "".join(chars), strings, todos


def test_the_scan_reads_comments_and_strings_as_tokenize_does():
    import ast
    from pathlib import Path

    from migrator.families.leftovers.marking import _python_code

    tricky = '''"""Docstring with a # that is no comment."""
import os  # torch_xla was here

# TODO(neuron-migrate): NM501 a TODO left by an earlier run
URL = "https://x/#anchor"  # "xla" in a comment
NAME = f"{os.sep}#{'#'}"  # ünïcödé → then a comment with torch_xla
TEXT = """
# not a comment: torch_xla inside a string
"""  # a comment after a multi-line string
path = "é" + '#' + r'\\#'  # XLA_USE_BF16
CONCAT = ("a#b"  # comment between parts
          "c#d")
'''
    fixtures = Path(__file__).parents[2] / "fixtures" / "migrator"
    codes = [tricky, tricky.replace("\n", "\r\n")]
    codes += [path.read_text() for path in sorted(fixtures.rglob("*.py"))]
    for code in codes:
        masked, strings, todos = _python_code(code, ast.parse(code))
        expected_masked, expected_strings, expected_todos = _tokenize_reading(code)
        assert (masked, todos) == (expected_masked, expected_todos)
        # Implicitly concatenated literals are one range here (Python's parse gives their positions together).
        assert all(any(s <= start and end <= e for s, e in strings) for start, end in expected_strings)
        assert len(strings) <= len(expected_strings)
