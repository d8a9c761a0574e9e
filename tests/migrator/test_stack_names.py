"""The target-stack name tables (NM219) agree with the pinned packages installed from constraints.txt:
every name they call removed is gone, every replacement resolves."""

from __future__ import annotations

import importlib

import pytest

from migrator.engine import migrate_python
from migrator.families.training.stack_names import DROPPED, REMOVED, RENAMED, removed_reason


def resolves(qualified: str) -> bool:
    module, _, name = qualified.rpartition(".")
    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


@pytest.mark.parametrize("old", sorted({*RENAMED, *REMOVED, *DROPPED}))
def test_the_old_name_is_gone_from_the_pinned_stack(old: str) -> None:
    assert not resolves(old), f"{old} still exists: remove it from the tables"


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_the_replacement_resolves(old: str) -> None:
    target = RENAMED[old]
    assert resolves(f"{target.module}.{target.name}")


def test_tensorflow_and_flax_classes_are_gone() -> None:
    import transformers

    prefixed = [name for name in dir(transformers) if removed_reason(f"transformers.{name}") is not None]
    assert prefixed == []
    assert removed_reason("transformers.TFAutoModelForSequenceClassification") is not None
    assert removed_reason("transformers.TextClassificationPipeline") is None


def test_the_hub_helpers_example_scripts_import_from_transformers_utils_move_to_huggingface_hub() -> None:
    code = (
        "from transformers.utils import check_min_version, get_full_repo_name, is_offline_mode\n"
        "offline = is_offline_mode()\n"
    )
    migrated, findings = migrate_python(code)
    assert "from transformers.utils import check_min_version\n" in migrated and "TODO" not in migrated
    assert "from huggingface_hub import get_full_repo_name, is_offline_mode" in migrated
    scope: dict = {}
    exec(compile(migrated, "<migrated>", "exec"), scope)
    assert scope["offline"] in (True, False)


@pytest.mark.parametrize(
    "imported",
    [
        "from huggingface_hub import HfFolder",
        "from huggingface_hub.hf_api import HfFolder as Folder",
        "from trl import PPOTrainer",
        "from transformers import TFAutoModel",
        "from transformers import AdamW",  # renamed: becomes torch's, which imports
    ],
)
def test_an_import_of_a_removed_name_the_file_never_uses_goes(imported: str) -> None:
    code = f"{imported}\nfrom transformers import Trainer\n\n# token = HfFolder.get_token(); PPOTrainer\nprint(Trainer)\n"
    migrated, _ = migrate_python(code)
    assert "TODO" not in migrated
    exec(compile(migrated, "<migrated>", "exec"), {})  # imports on the pinned stack


def test_a_removed_class_used_where_no_rule_rewrites_it_keeps_a_todo_on_its_import() -> None:
    code = "from huggingface_hub import HfFolder\n\nstore = HfFolder\ntoken = HfFolder.get_token()\n"
    migrated, _ = migrate_python(code)
    todo, imported = migrated.splitlines()[:2]
    assert (
        todo.startswith("# TODO(neuron-migrate): NM219 `huggingface_hub.HfFolder`") and "HfFolder" in imported
    )
    assert "token = get_token()" in migrated


def test_a_removed_class_whose_every_use_is_rewritten_leaves_no_todo() -> None:
    code = "from huggingface_hub import HfFolder\n\ntoken = HfFolder.get_token()\n"
    migrated, _ = migrate_python(code)
    assert migrated == "from huggingface_hub import get_token\n\ntoken = get_token()\n"


def test_a_removed_class_whose_use_is_only_flagged_gets_a_todo_on_its_import_too() -> None:
    """The import raises first, possibly far from the use: `HfFolder.save_token` has no exact replacement."""
    code = "from huggingface_hub.hf_api import HfFolder\n\nHfFolder.save_token(token)\n"
    migrated, _ = migrate_python(code)
    lines = migrated.splitlines()
    assert lines[0].startswith("# TODO(neuron-migrate): NM219 `huggingface_hub.hf_api.HfFolder`")
    assert "huggingface_hub.login(token=...)" in migrated


@pytest.mark.parametrize(
    ("code", "removed"),
    [
        ("from datasets.filesystems import S3FileSystem\n\ns3 = S3FileSystem()\n", "S3FileSystem"),
        (
            "from transformers.models.llama.modeling_llama import LlamaMLP, LLAMA_START_DOCSTRING\n\n"
            "DOC = LLAMA_START_DOCSTRING\n",
            "LLAMA_START_DOCSTRING",
        ),
    ],
)
def test_a_removed_name_a_file_uses_keeps_a_todo_on_its_import(code: str, removed: str) -> None:
    migrated, _ = migrate_python(code)
    todo, imported = migrated.splitlines()[:2]
    assert todo.startswith("# TODO(neuron-migrate): NM219") and removed in todo and removed in imported


def test_a_replacement_whose_name_the_file_binds_otherwise_is_imported_under_the_old_name() -> None:
    """datasets 3 removed `load_metric` for evaluate's `load`: in a file where `load` is already pickle's, the
    replacement keeps the old name, so neither binding shadows the other."""
    code = (
        "from pickle import load\nfrom datasets import load_metric\n\nmetric = load_metric\nloaded = load\n"
    )
    migrated, findings = migrate_python(code)
    assert "from evaluate import load as load_metric\n" in migrated and "TODO" not in migrated
    scope: dict = {}
    exec(compile(migrated, "<migrated>", "exec"), scope)
    import pickle

    assert scope["loaded"] is pickle.load and scope["load_metric"].__module__.startswith("evaluate")
    plain, _ = migrate_python('import datasets\n\nmetric = datasets.load_metric("accuracy")\n')
    assert 'metric = load("accuracy")' in plain and "from evaluate import load\n" in plain
