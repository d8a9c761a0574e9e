"""The model families the matrix probes besides causal LMs, and how a probe is named.

A row is one architecture probed for one task. Text generation and the encoder-decoders' generation run
``generate`` with a static cache (``probes``); the encoder and vision tasks run a forward at padded fixed shapes
(``forward_probes``). A probe's name is the ``model_type`` for text generation and ``task/model_type`` otherwise
(``feature-extraction/bert``), since one architecture can be probed for several tasks (BERT is also a causal-LM
model type of Transformers).
"""

from __future__ import annotations

TEXT_GENERATION = "text-generation"
TEXT2TEXT_GENERATION = "text2text-generation"
SPEECH_RECOGNITION = "automatic-speech-recognition"
TEXT_TO_IMAGE = "text-to-image"

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

# Encoder-decoders: optimum-neuron 0.4.5 exports t5 and whisper (its exporter looks up `<model_type>-encoder`
# and `<model_type>-decoder`, registered for those two only), and the seq2seq architectures the users
# run beside them: BART and mT5 (whose `mt5-encoder` optimum-neuron does not register).
SEQ2SEQ_TASK_MODEL_TYPES = {TEXT2TEXT_GENERATION: ("bart", "mt5", "t5"), SPEECH_RECOGNITION: ("whisper",)}
NOT_EXPORTED_BY_OPTIMUM_NEURON = frozenset({"bart", "mt5"})

# optimum-neuron 0.4.5's diffusion pipelines (NeuronStableDiffusionPipeline, NeuronStableDiffusionXLPipeline,
# NeuronPixArtAlphaPipeline, NeuronFluxPipeline), each probed as its family's first checkpoint in
# data/pipelines.json (the families listed there, in its order: a test holds them equal).
TEXT_TO_IMAGE_MODEL_TYPES = ("stable-diffusion", "stable-diffusion-xl", "pixart", "flux")

# family -> task -> the model types its rows measure for that task; a family's probes are every such pair.
FAMILY_TASKS = {
    "encoders": dict.fromkeys(ENCODER_TASKS, ENCODER_MODEL_TYPES),
    "vision": dict.fromkeys(VISION_TASKS, VISION_MODEL_TYPES),
    "seq2seq": SEQ2SEQ_TASK_MODEL_TYPES,
    "diffusion": {TEXT_TO_IMAGE: TEXT_TO_IMAGE_MODEL_TYPES},
}
FAMILIES = {family: tuple(tasks) for family, tasks in FAMILY_TASKS.items()}
# The tasks probed by generate (a static cache, compiled decode steps); every other family task is a forward.
GENERATION_TASKS = (TEXT_GENERATION, *SEQ2SEQ_TASK_MODEL_TYPES)


def judged_stages(task: str) -> tuple[str, ...]:
    """The stages a task's rows are judged on: text generation's generate and train, an encoder-decoder's
    generate (optimum-neuron exports them for inference only), a forward-only task's forward."""
    if task == TEXT_GENERATION:
        return ("generate", "train")
    return ("generate",) if task in GENERATION_TASKS else ("forward",)


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
    return [probe_name(each, model_type) for each, model_types in FAMILY_TASKS[family].items()
            if task in (None, each) for model_type in model_types]  # fmt: skip
