"""Tiny random models in place of Hub models, laid out as a real local Hub cache.

A Hub id the model-id table knows (or `--model ID=MODEL_TYPE`, or, for an id the table does not know, the family
its name says, reported as a guess) becomes a tiny random model of that architecture (`compat_matrix.tiny`),
saved with `save_pretrained` together with a small tokenizer (a pad token, a chat template) into
HF_HUB_CACHE/models--org--name/snapshots/<revision>/ with refs/main, so
`from_pretrained`'s own loading code runs, offline. The cache is kept between tries (it only depends on the
tiny-model revision, the id and the architecture). A script that feeds random token ids up to N gets tiny
models whose vocabulary holds them, from a cache of their own.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compat_matrix import pipelines
from try_run import checkpoint_parts
from usercode import model_ids

REVISION = "0" * 40  # one snapshot per stand-in; refs/main points at it
CACHE_LAYOUT = 8  # bump when what is written here changes
CHAT_TOKENS = ("<|im_start|>", "<|im_end|>")  # the stand-in chat template's
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
MARKER = "neuron-migrate-try.json"
# The tokenizer values of checkpoint_values.json that build the vocabulary (the others are set on the tokenizer).
FAMILY_TOKENS = ("bos_token", "eos_token", "special_tokens", "add_bos_token")


# The source of an architecture read from the id's name (`model_ids.family_from_name`), not from a table.
GUESSED = "architecture guessed from the id's name"


class CannotStandIn(Exception):
    """A model the try cannot serve; the message is the run's reason."""


@dataclass(frozen=True)
class ModelStandIn:
    id: str
    model_type: str
    parameters: int
    source: str  # where the architecture came from (table, --model, GUESSED)
    vocab_size: int
    parts: tuple[str, ...] = ()  # what the repository holds besides the model and tokenizer
    kept: tuple[tuple[str, Any], ...] = ()  # the real checkpoint's values the stand-in keeps
    kept_from: str = ""  # that checkpoint

    def as_report(self) -> dict:
        return {
            "id": self.id,
            "architecture": self.model_type,
            "parameters": self.parameters,
            "vocab_size": self.vocab_size,
            "source": self.source,
            "parts": list(self.parts),
            "kept": dict(self.kept),
            "kept_from": self.kept_from,
        }


def default_cache_root() -> Path:
    from compat_matrix.environment import cache_home

    return cache_home() / "try-hub"


def hub_cache_dir(root: Path, token_ids_below: int = 0) -> Path:
    """The Hub cache of the stand-ins; tiny models with a vocabulary wider than the tiny one (for a script
    that draws token ids up to `token_ids_below`) have their own."""
    from compat_matrix.settings import TINY_VOCAB, ProbeSettings

    name = f"tiny-r{ProbeSettings().tiny_models_revision}-layout{CACHE_LAYOUT}"
    if token_ids_below > TINY_VOCAB:
        name += f"-vocab{token_ids_below}"
    return root / name / "hub"


def architecture(model_id: str, overrides: dict[str, str], remote_code: bool = False) -> tuple[str, str]:
    """(model_type, source) for a Hub id; raises CannotStandIn with the reason. `remote_code`: the script
    loads with trust_remote_code=True, so the id may name an architecture Transformers does not have."""
    if model_id in overrides:
        return overrides[model_id], "--model"
    entry = model_ids.table_entry(model_id)
    remote = (
        " It loads remote code (trust_remote_code=True): an architecture outside Transformers has no tiny "
        "stand-in; pass --model ID=MODEL_TYPE with the Transformers architecture its code builds on to try "
        "the script with that one"
        if remote_code
        else ""
    )
    guessed = model_ids.family_from_name(model_id) if entry is None else None
    if guessed is not None:
        return guessed, GUESSED
    if entry is None:
        raise CannotStandIn(
            f"model {model_id}: not in the model-id table; pass --model {model_id}=MODEL_TYPE "
            f"(its config.json's model_type).{remote}"
        )
    if entry.task == "diffusion":
        spec = pipelines.spec_for(model_id)
        if spec is None:
            raise CannotStandIn(
                f"model {model_id}: a Diffusers pipeline with no tiny stand-in (built: "
                f"{', '.join(pipelines.checkpoints())}; see docs/using/try.md)"
            )
        return spec.pipeline, "pipeline table"
    if not entry.model_type:
        raise CannotStandIn(
            f"model {model_id}: a {entry.task or 'non-Transformers'} model without a Transformers architecture "
            f"(no tiny stand-in for it).{remote}"
        )
    return entry.model_type, "model-id table"


def ensure_model(
    cache: Path, model_id: str, model_type: str, source: str, token_ids_below: int = 0
) -> ModelStandIn:
    """The stand-in for `model_id` in the Hub cache at `cache`, written if missing; its vocabulary holds ids
    below `token_ids_below` (give the same bound as to hub_cache_dir)."""
    from filelock import FileLock

    repo = cache / f"models--{model_id.replace('/', '--')}"
    cache.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache / f".{repo.name}.lock")):
        marker = repo / MARKER
        written = json.loads(marker.read_text()) if marker.is_file() else {}
        if written.get("model_type") != model_type:
            spec = pipelines.spec_for(model_id)
            if spec is not None and spec.pipeline == model_type:
                written = {"model_type": model_type, **_write_pipeline(repo, spec)}
            else:
                written = {"model_type": model_type, **_write(repo, model_id, model_type, token_ids_below)}
            marker.write_text(json.dumps(written))
    spec = pipelines.spec_for(model_id)
    kept = checkpoint_parts.checkpoint_values(model_id)
    if spec is not None and spec.pipeline == model_type:
        kept = checkpoint_parts.CheckpointValues(spec.checkpoint, spec.values, spec.sources)
    return ModelStandIn(
        model_id,
        model_type,
        written["parameters"],
        source,
        written["vocab_size"],
        tuple(written["parts"]),
        tuple(kept.values.items()),
        kept.checkpoint,
    )


def _write(repo: Path, model_id: str, model_type: str, token_ids_below: int) -> dict[str, Any]:
    import torch
    from transformers import (
        CONFIG_MAPPING,
        AutoModel,
        AutoModelForCausalLM,
        AutoModelForSeq2SeqLM,
        AutoModelForSpeechSeq2Seq,
    )
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES,
    )

    from compat_matrix.tiny import build_tiny_config

    if model_type not in CONFIG_MAPPING:
        raise CannotStandIn(f"architecture {model_type!r} is not one the installed Transformers knows")
    kept = checkpoint_parts.checkpoint_values(model_id)
    # The checkpoint's own values where a script's shapes depend on them (positions, image and patch size).
    config = build_tiny_config(model_type, exact=kept.part("config"))
    if token_ids_below > (getattr(config, "vocab_size", None) or token_ids_below):
        config.vocab_size = token_ids_below
    # BERT-style tokenizers also return the segment ids the model's token_type embeddings take.
    family = kept.part("tokenizer")
    tokenizer = build_tokenizer(
        token_type_ids=(getattr(config, "type_vocab_size", 0) or 0) > 1,
        **{name: family.pop(name) for name in FAMILY_TOKENS if name in family},
    )
    for name, value in family.items():
        setattr(tokenizer, name, value)  # padding="max_length" pads to the checkpoint's model_max_length
    if isinstance(getattr(config, "vocab_size", None), int):  # a family's special tokens make it wider
        config.vocab_size = max(config.vocab_size, len(tokenizer))
    text_parts = [config, *(getattr(config, name) for name in getattr(config, "sub_configs", {}))]
    for name in ("pad_token", "bos_token", "eos_token"):  # on each part: CLIP's text tower pools at its eos
        for part in text_parts:
            if part is not None:
                setattr(part, f"{name}_id", tokenizer.convert_tokens_to_ids(getattr(tokenizer, name)))
    if getattr(config, "is_encoder_decoder", False):  # released seq2seq checkpoints start decoding at pad
        config.decoder_start_token_id = config.pad_token_id
    torch.manual_seed(0)
    # The head a checkpoint of that kind carries; a script loading another head initialises it, as with real ones.
    # Seq2seq first: Whisper and BART also have a decoder-only class, which drops the encoder.
    if model_type in MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES:
        auto = AutoModelForSpeechSeq2Seq
    elif model_type in MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES:
        auto = AutoModelForSeq2SeqLM
    elif model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        auto = AutoModelForCausalLM
    else:
        auto = AutoModel
    model = auto.from_config(config)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.pad_token_id = config.pad_token_id
        model.generation_config.decoder_start_token_id = getattr(config, "decoder_start_token_id", None)
    parameters = sum(parameter.numel() for parameter in model.parameters())
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    scratch = Path(tempfile.mkdtemp(dir=repo))
    model.save_pretrained(scratch)
    tokenizer.save_pretrained(scratch)
    parts = checkpoint_parts.write_processors(scratch, model_type, tokenizer, kept)
    parts += checkpoint_parts.write_sentence_transformers(scratch, kept)
    _publish(repo, scratch)
    return {"parameters": parameters, "vocab_size": getattr(config, "vocab_size", 0) or 0, "parts": parts}


def _write_pipeline(repo: Path, spec: pipelines.PipelineSpec) -> dict[str, Any]:
    """A tiny Diffusers pipeline in the checkpoint's layout (model_index.json, a folder per component)."""
    import torch

    pipeline = pipelines.build(spec)
    components = {name: part for name, part in pipeline.components.items() if part is not None}
    parameters = sum(
        parameter.numel()
        for part in components.values()
        if isinstance(part, torch.nn.Module)
        for parameter in part.parameters()
    )
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    scratch = Path(tempfile.mkdtemp(dir=repo))
    pipeline.save_pretrained(scratch)
    for variant in spec.values.get("variants", []):  # `from_pretrained(..., variant="fp16")` finds its files
        pipeline.to(dtype=getattr(torch, {"fp16": "float16", "bf16": "bfloat16"}[variant]))
        pipeline.save_pretrained(scratch, variant=variant)
    _publish(repo, scratch)
    parts = [f"{name} ({type(part).__name__})" for name, part in components.items()]
    return {"parameters": parameters, "vocab_size": pipelines.TEXT_VOCAB, "parts": parts}


def _publish(repo: Path, scratch: Path) -> None:
    """The written folder becomes the repository's one snapshot, which refs/main names."""
    (repo / "snapshots").mkdir()
    os.replace(scratch, repo / "snapshots" / REVISION)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)


def build_tokenizer(
    token_type_ids: bool = False,
    bos_token: str = "<s>",
    eos_token: str = "</s>",
    special_tokens: tuple[str, ...] = (),
    add_bos_token: bool = False,
):
    """A character-level tokenizer (printable ASCII, specials first) with a pad token and a chat template:
    its ids stay below the tiny models' vocabulary (widened by a family's `special_tokens`), and decoding gives
    the text back. A model family's tokenizer (checkpoint_values.json) has its real special tokens, bos and eos,
    and, with `add_bos_token`, starts every sequence with its bos as the real one's post-processor does."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    characters = ["\n", "\t", *(chr(code) for code in range(33, 127))]
    specials = list(dict.fromkeys(["<pad>", bos_token, eos_token, "<unk>", *CHAT_TOKENS, *special_tokens]))
    vocabulary = {token: index for index, token in enumerate([*specials, "▁", *characters])}
    backend = Tokenizer(models.BPE(vocab=vocabulary, merges=[], unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never")
    backend.decoder = decoders.Metaspace(prepend_scheme="never")
    if add_bos_token:
        backend.post_processor = processors.TemplateProcessing(
            single=f"{bos_token} $A",
            pair=f"{bos_token}:0 $A:0 {bos_token}:1 $B:1",
            special_tokens=[(bos_token, vocabulary[bos_token])],
        )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        bos_token=bos_token,
        eos_token=eos_token,
        unk_token="<unk>",
        additional_special_tokens=[
            token for token in specials if token not in ("<pad>", "<unk>", bos_token, eos_token)
        ],
        **(
            {"model_input_names": ["input_ids", "token_type_ids", "attention_mask"]} if token_type_ids else {}
        ),
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer
