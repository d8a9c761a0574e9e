"""Tiny, randomly initialised models built from Transformers config classes (no download).

Every size knob is shrunk consistently: width, heads, kv heads, head_dim, layers (and every per-layer list,
keeping one layer of each kind), experts, vocab, rope settings, windows, and the sub-configs of composite
models. Knobs that only one architecture family uses live in ``FAMILY_OVERRIDES``.

Two sizes exist: ``PRIMARY`` (every row) and ``SECOND`` (twice the width and heads, same head_dim), on which the
artifact guard re-measures a failure before blaming anyone. ``overrides`` (a checkpoint's code-path values,
already mapped to tiny sizes) go into the constructor, so ``__post_init__`` derives from them as it would.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from transformers import CONFIG_MAPPING, PreTrainedConfig
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from compat_matrix.families import SPEECH_RECOGNITION, TEXT2TEXT_GENERATION, TEXT_GENERATION
from compat_matrix.settings import TINY_VOCAB as VOCAB

LAYERS = 2
EXPERTS = 4
TOP_K = 2
WINDOW = 8  # smaller than the longer prompt, so sliding-window code paths run
POSITIONS = 1024  # training pads to 256 tokens; leave room


@dataclasses.dataclass(frozen=True)
class TinySize:
    """The width knobs of a tiny model; head_dim stays hidden / heads."""

    name: str
    hidden: int
    heads: int
    kv_heads: int
    ffn: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


PRIMARY = TinySize("primary", hidden=64, heads=4, kv_heads=2, ffn=64)
# Powers of two like the primary size, so every family's divisibility constraints still hold.
SECOND = TinySize("second", hidden=128, heads=8, kv_heads=4, ffn=128)
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN = (
    PRIMARY.hidden,
    PRIMARY.heads,
    PRIMARY.kv_heads,
    PRIMARY.head_dim,
    PRIMARY.ffn,
)

# One canonical value per size knob, with every alias an architecture uses for it. Width knobs (None here)
# take their value from the TinySize being built.
KNOB_ALIASES: dict[str, tuple[tuple[str, ...], int | None]] = {
    "hidden": (
        ("hidden_size", "d_model", "n_embd", "embed_dim", "dim", "model_dim", "attention_hidden_size"),
        None,
    ),
    "ffn": (
        (
            "intermediate_size",
            "ffn_dim",
            "n_inner",
            "d_ff",
            "dff",
            "dim_ff",
            "ffn_hidden_size",
            "moe_intermediate_size",
            "shared_expert_intermediate_size",
            "shared_intermediate_size",
            "shared_experts_intermediate_size",
            "expert_intermediate_size",
            "prefix_dense_intermediate_size",
            "intermediate_size_mlp",
            "decoder_ffn_dim",
            "encoder_ffn_dim",
        ),
        None,
    ),
    "heads": (
        (
            "num_attention_heads",
            "n_head",
            "n_heads",
            "num_heads",
            "decoder_attention_heads",
            "encoder_attention_heads",
            "swa_num_attention_heads",
        ),
        None,
    ),
    "head_dim": (
        (
            "head_dim",
            "attention_head_dim",
            "kv_channels",
            "dim_head",
            "swa_head_dim",
            "v_head_dim",
            "qk_nope_head_dim",
            "linear_key_head_dim",
            "linear_value_head_dim",
            "linear_head_dim",
            "mamba_d_head",
            "index_head_dim",
        ),
        None,
    ),
    "layers": (
        (
            "num_hidden_layers",
            "n_layer",
            "n_layers",
            "num_layers",
            "decoder_layers",
            "encoder_layers",
            "num_decoder_layers",
            "num_encoder_layers",
        ),
        LAYERS,
    ),
    "experts": (("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"), EXPERTS),
    "top_k": (
        (
            "num_experts_per_tok",
            "moe_topk",
            "moe_k",
            "top_k_experts",
            "centroid_intermediate_top_k",
            "num_experts_per_token",
            "moe_top_k",
        ),
        TOP_K,
    ),
    "window": (
        (
            "sliding_window",
            "attention_chunk_size",
            "sliding_window_size",
            "local_attention_window_len",
            "window_size",
        ),
        WINDOW,
    ),
    "positions": (
        ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "seq_length"),
        POSITIONS,
    ),
    "vocab": (("vocab_size",), VOCAB),
}
WIDTH_KNOBS = {"hidden": "hidden", "ffn": "ffn", "heads": "heads", "head_dim": "head_dim"}


def size_knobs(size: TinySize = PRIMARY) -> dict[str, int]:
    """Every alias of every size knob with its tiny value at ``size``."""
    return {
        name: value if value is not None else getattr(size, WIDTH_KNOBS[knob])
        for knob, (names, value) in KNOB_ALIASES.items()
        for name in names
    }


LAYER_KNOBS = KNOB_ALIASES["layers"][0]
TOP_K_KNOBS = KNOB_ALIASES["top_k"][0]
# Knobs that scale with heads but keep grouped-query structure (MHA stays MHA, MQA stays MQA).
KV_KNOBS = (
    "num_key_value_heads",
    "n_kv_heads",
    "num_kv_heads",
    "multi_query_group_num",
    "swa_num_key_value_heads",
    "linear_num_key_heads",
    "index_n_heads",
)
SMALL_KNOBS: dict[str, int] = {
    "kv_lora_rank": 32,
    "q_lora_rank": 32,
    "qk_rope_head_dim": 8,
    "o_lora_rank": 32,
    "rotary_dim": 8,
    "n_group": 1,
    "topk_group": 1,
    "index_topk": 8,
    "first_k_dense_replace": 1,
    "num_dense_layers": 1,
    "state_size": 8,
    "mamba_d_state": 8,
    "time_step_rank": 8,
    "mamba_dt_rank": 8,
    "mamba_n_groups": 1,
    "n_groups": 1,
    "num_expert_group": 1,
    "laurel_rank": 8,
    "hidden_size_per_layer_input": 8,
    "vocab_size_per_layer_input": VOCAB,
    "num_kv_shared_layers": 0,
    "num_nextn_predict_layers": 0,
    "num_mtp_layers": 0,
    "gated_norm_rank": 8,
    "num_centroids": 4,
    "chunk_size": 16,
    "mamba_chunk_size": 16,
    "block_size": 16,
    "num_shared_experts": 1,
    "n_shared_experts": 1,
    "moe_num_shared_experts": 1,
}
# Knobs that follow the width. Mamba heads: n_heads x head_dim = expand (2) x hidden.
SIZED_KNOBS: dict[str, Callable[[TinySize], int]] = {
    "embedding_size": lambda size: size.hidden,
    "backbone_hidden_size": lambda size: size.hidden,
    "lru_width": lambda size: size.hidden,
    "linear_num_value_heads": lambda size: size.heads,
    "linear_num_heads": lambda size: size.heads,
    "mamba_n_heads": lambda size: 2 * size.heads,
}
# Vision / audio towers of composite models are built but not run by text generation: make them minimal.
TOWER_KNOBS: dict[str, int] = {
    "hidden_size": 32,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "image_size": 32,
    "patch_size": 8,
    "out_hidden_size": 64,
    "depth": 1,
    "num_heads": 2,
    "embed_dim": 32,
    "projection_dim": 32,
    "vision_output_dim": 32,
    "num_channels": 3,
}
# Text-image dual encoders: both towers are the model (SigLIP compares their outputs without a projection, so
# they need the same width): built at the model's tiny size, not the minimal tower size.
DUAL_ENCODERS = frozenset({"clip", "siglip", "siglip2"})
# Per-family knobs the generic pass cannot infer (values must satisfy the family's own constraints).
FAMILY_OVERRIDES: dict[str, dict[str, Any]] = {
    "mamba2": {"expand": 2, "n_groups": 1},
    # Hybrids whose layer kinds come from a period/offset or an index list rather than a per-layer list.
    "jamba": {
        "attn_layer_period": 2,
        "attn_layer_offset": 1,
        "expert_layer_period": 2,
        "expert_layer_offset": 1,
    },
    "bamba": {"attn_layer_indices": [1]},
    "recurrent_gemma": {"block_types": ["recurrent", "attention"]},
    "granitemoehybrid": {"layer_types": ["mamba", "attention"]},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},
    "zaya": {"num_experts_per_tok": 1},
    "falcon_h1": {"mamba_expand": 2},
    "reformer": {"is_decoder": True, "axial_pos_embds_dim": [16, 48], "axial_pos_shape": [16, 64]},
    "zamba2": {
        "mamba_headdim": 16,
        "adapter_rank": 8,
    },
    "qwen4_exp_text": {
        "indexer_n_heads": 2,
        "indexer_kv_heads": 1,
        "indexer_head_dim": 16,
        "indexer_budget": 8,
        "indexer_compress_ratio": 2,
    },
    # DbrxAttention reads attn_config.rope_theta, which DbrxAttentionConfig does not declare, and clamps by
    # clip_qkv even when it is None: released checkpoints set both (clip_qkv 8).
    "dbrx": {"attn_config": {"rope_theta": 10000.0, "clip_qkv": 8}},
    # The default rope_parameters is empty, but the rotary embedding looks up one entry per layer type.
    "cohere_compass_text": {
        "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    },
    "dots1": {"n_routed_experts": EXPERTS, "n_shared_experts": 1},
}


def family_overrides(model_type: str, size: TinySize) -> dict[str, Any]:
    """``FAMILY_OVERRIDES`` plus the per-family knobs that follow the width."""
    overrides = dict(FAMILY_OVERRIDES.get(model_type, {}))
    mamba_heads = SIZED_KNOBS["mamba_n_heads"](size)
    if (
        model_type == "zamba2"
    ):  # its shared attention block runs on [hidden, input embeddings]: twice the width
        overrides |= {"attention_hidden_size": 2 * size.hidden, "attention_head_dim": 2 * size.head_dim,
                      "n_mamba_heads": mamba_heads}  # fmt: skip
    elif model_type == "mamba2":
        overrides |= {"num_heads": mamba_heads, "head_dim": size.head_dim}
    elif model_type == "falcon_h1":
        overrides |= {
            "mamba_d_ssm": 2 * size.hidden,
            "mamba_n_heads": mamba_heads,
            "mamba_d_head": size.head_dim,
        }
    elif model_type == "dots1":
        overrides["moe_intermediate_size"] = size.ffn
    return overrides


# Knobs whose full-size default is None although the model needs a value (checkpoints always set them);
# None: from the TinySize being built.
REQUIRED_WHEN_NONE: dict[str, int | None] = {
    "head_dim": None, "num_key_value_heads": None, "num_experts_per_tok": TOP_K, "n_group": 1, "topk_group": 1,
}  # fmt: skip

SPECIAL_TOKEN_KNOB_SUFFIXES = ("_token_id", "_token_index")


def causal_lm_model_types() -> list[str]:
    """Every `model_type` in the installed Transformers' causal-LM mapping, in mapping order."""
    return list(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def _full_size_values(
    config_cls: type[PreTrainedConfig], overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Field values of the full-size config (the class defaults, with ``overrides`` applied), including lists
    ``__post_init__`` derives from them (a checkpoint's ``use_sliding_window`` changes ``layer_types``)."""
    overrides = overrides or {}
    try:
        return {
            name: value for name, value in vars(config_cls(**overrides)).items() if not name.startswith("_")
        }
    except (
        Exception
    ):  # some composite configs cannot be built with all defaults: fall back to the declared ones
        values = {}
        for field in dataclasses.fields(config_cls):
            if field.default is not dataclasses.MISSING:
                values[field.name] = field.default
            elif field.default_factory is not dataclasses.MISSING:
                values[field.name] = field.default_factory()
        return values | overrides


# Fields a checkpoint's config.json still writes under their older names; the constructor converts them.
LEGACY_FIELDS = {"rope_scaling": "rope_parameters", "rope_theta": "rope_parameters"}
# Fields every config's constructor reads although a class may not declare them: T5's __post_init__ turns a
# checkpoint's tie_word_embeddings false (T5 v1.1, FLAN-T5) into unscaled decoder outputs.
CONSTRUCTOR_FIELDS = ("tie_word_embeddings",)


def declares(config_cls: type, name: str) -> bool:
    """Whether ``config_cls`` has the field ``name`` (or the field a legacy name converts to)."""
    if not dataclasses.is_dataclass(config_cls):
        return False
    fields = {field.name for field in dataclasses.fields(config_cls)}
    return LEGACY_FIELDS.get(name, name) in fields or name in CONSTRUCTOR_FIELDS


def _is_layer_index_list(name: str, values: list | tuple, n_layers: int) -> bool:
    """Which layers have a property (`moe_layers=[0, 1, ...]`, `hybrid_layer_ids`), as opposed to one value
    per layer: a layer-named list of distinct layer indices in increasing order."""
    return (
        any(word in name for word in ("layer", "idx", "indices", "indexes"))
        and len(values) > 0
        and all(isinstance(v, int) and not isinstance(v, bool) for v in values)
        and list(values) == sorted(set(values))
        and values[-1] < n_layers
    )


def _kept_layer_indices(layer_lists: list[list[Any]], n_layers: int) -> list[int]:
    """Indices of layers to keep: the first layer of every distinct kind, then fill up to ``n_layers``."""
    kinds = list(zip(*layer_lists, strict=True))
    keep: list[int] = []
    seen = set()
    for index, kind in enumerate(kinds):
        if repr(kind) not in seen:
            seen.add(repr(kind))
            keep.append(index)
    for index in range(len(kinds)):
        if len(keep) >= n_layers:
            break
        if index not in keep:
            keep.append(index)
    return sorted(keep)


def _shrink_rope(rope: Any, head_dim: int) -> Any:
    if not isinstance(rope, dict):
        return rope
    rope = dict(rope)
    if "mrope_section" in rope and rope["mrope_section"]:
        sections = list(rope["mrope_section"])
        half, total = head_dim // 2, sum(sections)
        scaled = [max(1, s * half // total) for s in sections]
        scaled[0] += half - sum(scaled)
        rope["mrope_section"] = scaled
    for key in ("short_factor", "long_factor"):
        if isinstance(rope.get(key), list):
            rope[key] = rope[key][: head_dim // 2]
    if "original_max_position_embeddings" in rope:
        rope["original_max_position_embeddings"] = POSITIONS // 4
    return rope


def tiny_config_kwargs(
    config_cls: type[PreTrainedConfig],
    tower: bool = False,
    size: TinySize = PRIMARY,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Constructor kwargs that shrink ``config_cls`` (recursing into sub-configs). ``overrides`` are full-size
    field values (a checkpoint's): each goes to the config that declares it, and is shrunk like a default."""
    overrides = overrides or {}
    own = {name: value for name, value in overrides.items() if declares(config_cls, name)}
    # Building standardises nested dicts in place: it gets a copy.
    defaults = _full_size_values(config_cls, copy.deepcopy(own))
    kwargs: dict[str, Any] = copy.deepcopy(own)
    _shrink_knobs(kwargs, defaults, size, tower)
    _shrink_layer_lists(kwargs, defaults)
    if "qk_rope_head_dim" in defaults and "head_dim" in defaults:  # MLA: rope runs on the rope part only
        kwargs["head_dim"] = SMALL_KNOBS["qk_rope_head_dim"]
    rest = {name: value for name, value in overrides.items() if name not in own}
    kwargs.update(_sub_config_kwargs(config_cls, defaults, size, rest))
    kwargs.update(family_overrides(getattr(config_cls, "model_type", ""), size))
    return kwargs


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shrink_knobs(kwargs: dict[str, Any], defaults: dict[str, Any], size: TinySize, tower: bool) -> None:
    """Set the tiny value of every size knob among ``defaults``: routing top-k, widths and counts, kv heads,
    knobs a model needs although their default is None, and special token ids outside the tiny vocabulary."""
    knobs = size_knobs(size) | SMALL_KNOBS | {name: knob(size) for name, knob in SIZED_KNOBS.items()}
    if tower:
        knobs = knobs | TOWER_KNOBS
    heads = size.heads if not tower else TOWER_KNOBS["num_attention_heads"]
    for name, default in defaults.items():
        if name in TOP_K_KNOBS and default == 1:
            kwargs[name] = 1  # top-1 routing is its own code path (no mixing of expert outputs)
        elif name in knobs and _is_count(default) and default > 0:
            kwargs[name] = knobs[name]
        elif name in KV_KNOBS and _is_count(default):
            kwargs[name] = _kv_heads(default, defaults.get("num_attention_heads") or default, heads, size)
        elif name in REQUIRED_WHEN_NONE and default is None:
            kwargs[name] = _required_value(name, size)
        elif name.endswith(SPECIAL_TOKEN_KNOB_SUFFIXES) and isinstance(default, int) and default >= VOCAB:
            kwargs[name] = VOCAB - 1 - len([k for k in kwargs if k.endswith(SPECIAL_TOKEN_KNOB_SUFFIXES)])


def _kv_heads(default: int, base_heads: int, heads: int, size: TinySize) -> int:
    """Tiny kv heads that keep the attention kind: MHA stays MHA, MQA stays MQA, GQA stays grouped."""
    if default >= base_heads:
        return heads
    return 1 if default == 1 else min(size.kv_heads, heads)


def _required_value(name: str, size: TinySize) -> int:
    required = REQUIRED_WHEN_NONE[name]
    return (
        required if required is not None else getattr(size, name.replace("num_key_value_heads", "kv_heads"))
    )


def _layer_lists(defaults: dict[str, Any]) -> tuple[int, dict[str, list], dict[str, list]]:
    """The full-size layer count, the per-layer lists (one value per layer) and the layer-index lists
    (`moe_layers`, `full_attn_idxs`) among ``defaults``."""
    base_layers = next((defaults[n] for n in LAYER_KNOBS if isinstance(defaults.get(n), int)), None)
    if not base_layers:
        return 0, {}, {}
    lists = {n: v for n, v in defaults.items() if isinstance(v, list | tuple)}
    index_lists = {n: v for n, v in lists.items() if _is_layer_index_list(n, v, base_layers)}
    per_layer = {n: v for n, v in lists.items() if len(v) == base_layers and n not in index_lists}
    return base_layers, per_layer, index_lists


def _shrink_layer_lists(kwargs: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Keep one layer of each kind, consistently across the per-layer and layer-index lists, and renumber the
    kept indices."""
    base_layers, per_layer, index_lists = _layer_lists(defaults)
    if not (per_layer or index_lists):
        return
    members = [[i in indices for i in range(base_layers)] for indices in map(set, index_lists.values())]
    keep = _kept_layer_indices([*per_layer.values(), *members], LAYERS)
    for name, values in per_layer.items():
        kwargs[name] = [values[i] for i in keep]
    for name, values in index_lists.items():
        kwargs[name] = [keep.index(i) for i in values if i in keep]
    for name in LAYER_KNOBS:
        if name in kwargs:
            kwargs[name] = len(keep)


def _sub_config_kwargs(
    config_cls: type[PreTrainedConfig], defaults: dict[str, Any], size: TinySize, rest: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """The tiny kwargs of each sub-config; ``rest`` (the overrides the parent does not declare) go to the
    text parts, never to a tower."""
    kwargs = {}
    for name, sub_cls in getattr(config_cls, "sub_configs", {}).items():
        # Sub-configs declared through AutoConfig take their concrete class from the default instance.
        if isinstance(defaults.get(name), PreTrainedConfig):
            sub_cls = type(defaults[name])
        if not (isinstance(sub_cls, type) and issubclass(sub_cls, PreTrainedConfig)):
            continue
        is_tower = _is_tower(name, sub_cls) and getattr(config_cls, "model_type", "") not in DUAL_ENCODERS
        kwargs[name] = tiny_config_kwargs(
            sub_cls, tower=is_tower, size=size, overrides=None if is_tower else rest
        )
        if sub_cls.model_type:
            kwargs[name]["model_type"] = sub_cls.model_type
    return kwargs


def _is_tower(name: str, sub_cls: type[PreTrainedConfig]) -> bool:
    """A vision or audio tower; a part of the model's own blocks (DBRX's attn_config/ffn_config) has no
    model_type and is not one."""
    return bool(sub_cls.model_type) and not name.startswith(
        ("text", "decoder", "global", "encoder", "patcher")
    )


def _sub_configs(config: PreTrainedConfig) -> list[PreTrainedConfig]:
    subs = [getattr(config, name, None) for name in getattr(config, "sub_configs", {})]
    return [config, *(sub for sub in subs if isinstance(sub, PreTrainedConfig))]


def _fix_derived_fields(config: PreTrainedConfig, size: TinySize) -> None:
    """Fields that ``__post_init__`` derives from full-size defaults (token-id lists, rope) are shrunk here."""
    for sub in _sub_configs(config):
        for name, value in list(vars(sub).items()):
            if name.endswith(SPECIAL_TOKEN_KNOB_SUFFIXES) and isinstance(value, list):
                setattr(sub, name, [v if v < VOCAB else VOCAB - 1 for v in value])
        for name in ("rope_parameters", "rope_scaling"):
            if isinstance(getattr(sub, name, None), dict):
                head_dim = vars(sub).get("head_dim") or size.head_dim
                setattr(sub, name, _shrink_rope(getattr(sub, name), head_dim))


def build_tiny_config(
    model_type: str,
    size: TinySize = PRIMARY,
    overrides: dict[str, Any] | None = None,
    exact: dict[str, Any] | None = None,
) -> PreTrainedConfig:
    """``overrides``: full-size values, shrunk like defaults. ``exact``: tiny values set as given after
    shrinking, on every (sub-)config that has the field (the artifact guard's tie-free top-k)."""
    config_cls = CONFIG_MAPPING[model_type]
    config = config_cls(**tiny_config_kwargs(config_cls, size=size, overrides=overrides))
    _fix_derived_fields(config, size)
    for name, value in (exact or {}).items():
        for sub in _sub_configs(config):
            if hasattr(sub, name):
                setattr(sub, name, value)
    return config


# The Auto class each generation task builds its model with (Transformers' pipelines use the same ones).
GENERATION_AUTO_CLASSES = {
    TEXT_GENERATION: "AutoModelForCausalLM",
    TEXT2TEXT_GENERATION: "AutoModelForSeq2SeqLM",
    SPEECH_RECOGNITION: "AutoModelForSpeechSeq2Seq",
}


def build_tiny_model(
    model_type: str,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    size: TinySize = PRIMARY,
    overrides: dict[str, Any] | None = None,
    exact: dict[str, Any] | None = None,
    task: str = TEXT_GENERATION,
) -> torch.nn.Module:
    """A tiny random-weight model for ``model_type`` with the generation head of ``task`` (a causal LM, or an
    encoder-decoder; eval mode). Attention is what Transformers chooses for the class (SDPA where supported),
    as it is for a user's model on the device. ``overrides``: full-size config values to build from instead of
    the class defaults (a checkpoint's, see ``checkpoints``)."""
    import transformers

    config = build_tiny_config(model_type, size, overrides, exact)
    torch.manual_seed(seed)
    model = getattr(transformers, GENERATION_AUTO_CLASSES[task]).from_config(config, dtype=dtype)
    if hasattr(model, "set_default_language"):  # X-MOD routes through per-language adapters
        model.set_default_language(config.languages[0])
    if config.is_encoder_decoder and model.generation_config.decoder_start_token_id is None:
        # T5's config class leaves it unset; its checkpoints start decoding from the pad token (t5-small's
        # config.json: decoder_start_token_id 0, its pad_token_id), as Transformers' T5 docs say.
        model.generation_config.decoder_start_token_id = config.pad_token_id
    return model.eval()
