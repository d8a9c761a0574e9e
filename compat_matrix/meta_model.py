"""Real-size models on the meta device: the config of a checkpoint or an architecture at its full size, and the
model Transformers builds from it without allocating a byte (the planner and the TP readiness table start here).

Full-size values come from ``data/checkpoint_sizes.json`` (recorded checkpoints, each with its source), else
the config class's defaults with the architecture's recorded code-path values (``checkpoint_configs.json``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

SIZES_PATH = Path(__file__).with_name("data") / "checkpoint_sizes.json"


class MetaBuildError(RuntimeError):
    """Transformers cannot build this config's model on the meta device; the message says why, in one line."""


@dataclass(frozen=True)
class FullSizeConfig:
    model_type: str
    values: dict[str, Any]  # applied over the class defaults
    described_as: str  # where the sizes come from, shown to the reader


@cache
def checkpoint_sizes() -> dict[str, dict[str, Any]]:
    return json.loads(SIZES_PATH.read_text())["checkpoints"]


def checkpoint_full_size(checkpoint: str) -> FullSizeConfig | None:
    """The recorded sizes of a Hub id (case-insensitive), or None."""
    entry = {name.lower(): value for name, value in checkpoint_sizes().items()}.get(checkpoint.lower())
    if entry is None:
        return None
    return FullSizeConfig(entry["model_type"], dict(entry["fields"]), f"{checkpoint} ({entry['source']})")


def architecture_full_size(model_type: str) -> FullSizeConfig:
    """The architecture's recorded checkpoint at its recorded sizes where there are some, else its class defaults
    with the checkpoint's code-path values (which set no size)."""
    from compat_matrix.checkpoints import load_checkpoint_configs

    recorded = load_checkpoint_configs().get(model_type)
    if recorded is not None:
        sized = checkpoint_full_size(recorded.checkpoint)
        if sized is not None:
            return FullSizeConfig(model_type, recorded.values | sized.values, sized.described_as)
        return FullSizeConfig(
            model_type, dict(recorded.values), f"class defaults with {recorded.checkpoint}'s code-path values"
        )
    return FullSizeConfig(model_type, {}, "class defaults")


def config_from_file(path: Path) -> FullSizeConfig:
    """A user's config.json: every field it sets is applied."""
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MetaBuildError(f"cannot read {path}: {error}") from None
    if not isinstance(values, dict) or not isinstance(values.get("model_type"), str):
        raise MetaBuildError(f"{path} has no model_type: not a Transformers config.json")
    model_type = values.pop("model_type")
    return FullSizeConfig(model_type, values, str(path))


def build_config(full_size: FullSizeConfig):
    from transformers import CONFIG_MAPPING

    if full_size.model_type not in CONFIG_MAPPING:
        raise MetaBuildError(f"{full_size.model_type}: not an architecture of the installed Transformers")
    try:
        return CONFIG_MAPPING[full_size.model_type](**full_size.values)
    except Exception as error:  # a config class's own validation: reported in one line
        raise MetaBuildError(
            f"{full_size.model_type}: its config cannot be built: {one_line(error)}"
        ) from None


def build_meta_model(config, dtype: torch.dtype | None = None) -> torch.nn.Module:
    """The causal LM of ``config`` with every parameter on the meta device (no memory, no download), built in
    ``from_pretrained``'s own init context: weights not yet tied, as a distributed load shards them (tie them with
    ``model.tie_weights()`` to count parameters as the loaded model holds them)."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils.generic import ContextManagers

    try:
        cls = AutoModelForCausalLM._model_mapping[type(config)]
        # As the Auto classes load it: a composite config (llama4, qwen3_5) whose causal LM takes its text part.
        if getattr(cls, "config_class", None) is config.sub_configs.get("text_config"):
            config = config.get_text_config()
        with ContextManagers(cls.get_init_context(dtype or torch.bfloat16, False, False, None)):
            return cls(config)
    except Exception as error:  # any failure of a model's constructor: one line naming it
        raise MetaBuildError(
            f"{config.model_type}: Transformers cannot build it on the meta device: {one_line(error)}"
        ) from None


def one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")
