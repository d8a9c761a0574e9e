"""Notebooks: the diff is as small as the rewrite, whatever the JSON style; cells IPython cannot parse are
left as they are; findings and SARIF say which cell and which line in it."""

from __future__ import annotations

import difflib
import json

import pytest

from migrator.engine import REWRITERS, Job, Mode, process
from migrator.report import sarif_report
from migrator.sources import discover

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
            "!torchrun --nproc_per_node 2 train.py \\\n",
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


def test_unparseable_cell_is_left_byte_identical_and_the_others_migrate():
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
    assert after[0]["source"] == cells[0]["source"]
    assert "xla_device" not in "".join(after[1]["source"])
    assert [(f.code, f.cell) for f in findings if not f.fixed] == [("NM470", 1)]


def test_sarif_results_carry_the_cell_and_the_line_in_it(tmp_path):
    path = tmp_path / "train.ipynb"
    path.write_text(notebook(indent=1))
    (source,) = discover([path])
    result = process(Job(source, Mode.CHECK, display="train.ipynb"))
    sarif = sarif_report([result])["runs"][0]["results"]
    zero_1 = next(r for r in sarif if "--zero_1" in r["message"]["text"])
    assert zero_1["properties"]["cell"] == 2
    assert zero_1["locations"][0]["physicalLocation"]["region"]["startLine"] == 2


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
