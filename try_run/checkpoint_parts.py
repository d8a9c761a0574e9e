"""What a checkpoint's repository holds besides the model, for a tiny stand-in: the processors Transformers
pairs with the architecture (image processor, audio feature extractor, multimodal processor) and, for a
sentence-transformers checkpoint, its modules (pooling, normalisation). Values the script's shapes depend on
come from the checkpoint (`checkpoint_values.json`); everything else is the processor class's own default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from usercode import model_ids

VALUES_PATH = Path(__file__).with_name("checkpoint_values.json")


@dataclass(frozen=True)
class CheckpointValues:
    checkpoint: str  # the checkpoint the values were read from ("" when no row matched)
    values: dict[str, Any] = field(default_factory=dict)  # "part.field" -> value
    sources: dict[str, str] = field(default_factory=dict)  # "part.field" -> the file it was read from

    def part(self, name: str) -> dict[str, Any]:
        """The fields of one part (`config`, `tokenizer`, `image_processor`...), without the prefix."""
        return {
            key.split(".", 1)[1]: value for key, value in self.values.items() if key.startswith(name + ".")
        }


@cache
def _rows() -> tuple[tuple[tuple[str, ...], CheckpointValues], ...]:
    document = json.loads(VALUES_PATH.read_text(encoding="utf-8"))
    return tuple(
        (
            tuple(pattern.lower() for pattern in row["patterns"]),
            CheckpointValues(row["checkpoint"], row["values"], row["sources"]),
        )
        for row in document["checkpoints"]
    )


def checkpoint_values(model_id: str) -> CheckpointValues:
    """The first row whose pattern matches `model_id` (matched as the model-id table matches)."""
    lowered = model_id.lower()
    for patterns, values in _rows():
        if any(model_ids.matches(lowered, pattern) for pattern in patterns):
            return values
    return CheckpointValues("")


def write_processors(folder: Path, model_type: str, tokenizer, kept: CheckpointValues) -> list[str]:
    """Saves, into `folder`, the image processor, feature extractor and processor Transformers' auto classes
    map `model_type` to; returns what was written (class names)."""
    from transformers.models.auto.feature_extraction_auto import FEATURE_EXTRACTOR_MAPPING_NAMES
    from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING_NAMES
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

    parts: dict[str, Any] = {"tokenizer": tokenizer}
    image = _first_buildable(IMAGE_PROCESSOR_MAPPING_NAMES.get(model_type), kept.part("image_processor"))
    if image is not None:
        parts["image_processor"] = image
    audio = _first_buildable(FEATURE_EXTRACTOR_MAPPING_NAMES.get(model_type), kept.part("feature_extractor"))
    if audio is not None:
        parts["feature_extractor"] = audio
    written = []
    for name in ("image_processor", "feature_extractor"):
        if name in parts:
            parts[name].save_pretrained(folder)  # preprocessor_config.json, as checkpoints have it
            written.append(type(parts[name]).__name__)
    processor_name = PROCESSOR_MAPPING_NAMES.get(model_type)
    if processor_name and len(parts) > 1:
        import inspect

        import transformers

        processor_class = getattr(transformers, processor_name)
        wanted = inspect.signature(processor_class.__init__).parameters
        processor = processor_class(**{name: part for name, part in parts.items() if name in wanted})
        processor.save_pretrained(folder)
        written.append(processor_name)
    return written


def _first_buildable(names: Any, arguments: dict[str, Any]):
    """An instance of the first class among `names` (a name, a tuple of names, or a backend -> name dict as
    Transformers' auto mappings give them) that this environment can build (the PIL image processors need
    no torchvision)."""
    import transformers

    if names is None:
        return None
    candidates = names.values() if isinstance(names, dict) else names if isinstance(names, tuple) else [names]
    for name in sorted(filter(None, candidates), key=lambda name: not name.endswith("Pil")):
        try:
            return getattr(transformers, name)(**arguments)
        except (ImportError, AttributeError):
            continue  # a backend this environment lacks
    return None


def write_sentence_transformers(folder: Path, kept: CheckpointValues) -> list[str]:
    """Turns the saved model in `folder` into a sentence-transformers checkpoint (modules.json, the Transformer
    module's max_seq_length, pooling, normalisation) with sentence-transformers' own save; nothing when the
    checkpoint has no sentence-transformers values or the library is not installed (a script that imports it
    then fails on the import, with its own message)."""
    values = kept.part("sentence_transformers")
    if not values:
        return []
    try:
        from sentence_transformers import SentenceTransformer, models
    except ImportError:
        return []
    transformer = models.Transformer(str(folder), max_seq_length=values["max_seq_length"])
    modules = [
        transformer,
        models.Pooling(transformer.get_word_embedding_dimension(), pooling_mode=values["pooling_mode"]),
    ]
    if values.get("normalize"):
        modules.append(models.Normalize())
    SentenceTransformer(modules=modules, device="cpu").save(str(folder))
    return ["sentence-transformers modules (" + ", ".join(type(module).__name__ for module in modules) + ")"]
