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
