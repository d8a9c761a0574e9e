"""Checkpoint-realistic configs: the code-path fields of each top-100 architecture's most-used checkpoint.

A config class's defaults are not what users run (``MistralConfig`` defaults to ``sliding_window=4096``;
Mistral-7B-Instruct-v0.2 and later set it to null). ``checkpoint_configs.json`` records, per architecture, the
checkpoint and the values of the fields that change which code runs (sliding window, rope scaling, MoE routing
and experts, attention pattern), each with the page or file it was read from; a field whose value was not found
is listed as such and not applied. The tiny model is then built from those full-size values (``tiny``
shrinks them as it shrinks a default: a 4096-token window becomes the 8-token tiny window, null stays null).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from compat_matrix.schema import ConfigSource

DATA_PATH = Path(__file__).with_name("checkpoint_configs.json")
NOT_FOUND = "not found"


@dataclass(frozen=True)
class CheckpointConfig:
    model_type: str
    checkpoint: str  # Hub id
    chosen_because: str  # why this checkpoint is the architecture's most used one
    values: dict[str, Any]  # field -> value, for every field with a source
    sources: dict[str, str]  # field -> the page or file the value was read from
    not_found: tuple[str, ...] = field(default=())  # fields looked for without a source: not applied


@cache
def load_checkpoint_configs() -> dict[str, CheckpointConfig]:
    data = json.loads(DATA_PATH.read_text())
    configs = {}
    for model_type, entry in data["architectures"].items():
        found = {name: item for name, item in entry["fields"].items() if item["source"] != NOT_FOUND}
        configs[model_type] = CheckpointConfig(
            model_type=model_type,
            checkpoint=entry["checkpoint"],
            chosen_because=entry["chosen_because"],
            values={name: item["value"] for name, item in found.items()},
            sources={name: item["source"] for name, item in found.items()},
            not_found=tuple(name for name, item in entry["fields"].items() if item["source"] == NOT_FOUND),
        )
    return configs


def code_path_fields() -> dict[str, str]:
    """Field name -> the kind of code path it selects (window, rope, moe, attention)."""
    return json.loads(DATA_PATH.read_text())["code_path_fields"]


@dataclass(frozen=True)
class ConfigChoice:
    """What one row measures: the class defaults, or a checkpoint's values applied over them."""

    source: ConfigSource
    checkpoint: CheckpointConfig | None = None

    @property
    def overrides(self) -> dict[str, Any]:
        # A copy: building a config standardises nested dicts (rope) in place.
        return copy.deepcopy(self.checkpoint.values) if self.checkpoint else {}

    def row_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"config_source": self.source.value}
        if self.checkpoint is not None:
            fields |= {"checkpoint": self.checkpoint.checkpoint, "checkpoint_values": self.overrides,
                       "checkpoint_not_found": list(self.checkpoint.not_found)}  # fmt: skip
        return fields


def config_choice(model_type: str, wanted: str) -> ConfigChoice:
    """``wanted`` is the run's ``--config``: ``checkpoint`` applies the recorded values where the data file has
    the architecture (class defaults otherwise, and the row says so); ``class-defaults`` never does."""
    checkpoint = load_checkpoint_configs().get(model_type)
    if wanted == ConfigSource.CHECKPOINT.value and checkpoint is not None:
        return ConfigChoice(ConfigSource.CHECKPOINT, checkpoint)
    return ConfigChoice(ConfigSource.CLASS_DEFAULTS)


def differs_from_class_defaults(model_type: str) -> bool | None:
    """Whether the checkpoint's values build another tiny model than the class defaults (None: no entry)."""
    from compat_matrix.tiny import build_tiny_config

    checkpoint = load_checkpoint_configs().get(model_type)
    if checkpoint is None:
        return None
    return (
        build_tiny_config(model_type).to_dict()
        != build_tiny_config(model_type, overrides=checkpoint.values).to_dict()
    )
