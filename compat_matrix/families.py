"""The model families the matrix probes besides causal LMs, and how a probe is named.

A row is one architecture probed for one task. Text generation is today's probe (``probes``); the encoder
tasks run a forward at padded fixed shapes (``forward_probes``). A probe's name is the ``model_type`` for text
generation and ``task/model_type`` otherwise (``feature-extraction/bert``), since one architecture can be
probed for several tasks (BERT is also a causal-LM model type of Transformers).
"""

from __future__ import annotations

TEXT_GENERATION = "text-generation"

# optimum-neuron 0.4.5's encoder exporters (optimum/exporters/neuron/model_configs.py: every
# `register_in_tasks_manager(model_type, *COMMON_TEXT_TASKS)` or a list with feature-extraction and
# text-classification), without phi, which the matrix measures as a causal LM.
ENCODER_MODEL_TYPES = (
    "albert", "bert", "camembert", "convbert", "deberta", "deberta-v2", "distilbert", "electra", "esm",
    "flaubert", "mobilebert", "modernbert", "mpnet", "roberta", "roformer", "xlm", "xlm-roberta",
)  # fmt: skip
# The encoder heads probed: the last hidden state (with sentence-transformers' mean pooling) and a sequence
# classification head, the two tasks every one of them is exported for.
ENCODER_TASKS = ("feature-extraction", "text-classification")

# optimum-neuron 0.4.5's vision exporters for feature-extraction and image-classification (vit, beit,
# convnext, convnextv2, cvt, deit, levit, mobilenet_v2, swin; clip's for its vision tower), and SigLIP, whose
# vision tower the announcement's users ask for. A dual encoder's feature extraction is its vision tower's.
VISION_MODEL_TYPES = (
    "beit", "clip", "convnext", "convnextv2", "cvt", "deit", "levit", "mobilenet_v2", "siglip", "swin", "vit",
)  # fmt: skip
# Transformers' pipeline names: image inputs at the checkpoint's image size.
VISION_TASKS = ("image-feature-extraction", "image-classification")

# family -> the tasks its rows measure; a family's probes are every (task, model type) pair.
FAMILIES = {"encoders": ENCODER_TASKS, "vision": VISION_TASKS}
FAMILY_MODEL_TYPES = {"encoders": ENCODER_MODEL_TYPES, "vision": VISION_MODEL_TYPES}


def family_of(task: str) -> str:
    """The family a task's rows are grouped under in a report; text generation is ``causal-lm``."""
    return next((family for family, tasks in FAMILIES.items() if task in tasks), "causal-lm")


def probe_name(task: str | None, model_type: str) -> str:
    return model_type if task in (None, TEXT_GENERATION) else f"{task}/{model_type}"


def row_probe_name(row: dict) -> str:
    """The probe a results row measured (a row written before the ``task`` field is text generation)."""
    return probe_name(row.get("task"), row["model_type"])


def split_probe_name(name: str) -> tuple[str, str]:
    """``feature-extraction/bert`` -> (task, model_type); a bare model type is text generation."""
    task, _, model_type = name.rpartition("/")
    return task or TEXT_GENERATION, model_type


def family_probes(family: str, task: str | None = None) -> list[str]:
    """Every probe name of a family, or of one of its tasks."""
    return [probe_name(each, model_type) for each in FAMILIES[family] if task in (None, each)
            for model_type in FAMILY_MODEL_TYPES[family]]  # fmt: skip
