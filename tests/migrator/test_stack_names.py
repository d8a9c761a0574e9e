"""The target-stack name tables (NM219) agree with the pinned packages installed from constraints.txt:
every name they call removed is gone, every replacement resolves."""

from __future__ import annotations

import importlib

import pytest

from migrator.families.training.stack_names import REMOVED, RENAMED, removed_reason


def resolves(qualified: str) -> bool:
    module, _, name = qualified.rpartition(".")
    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


@pytest.mark.parametrize("old", sorted({*RENAMED, *REMOVED}))
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
