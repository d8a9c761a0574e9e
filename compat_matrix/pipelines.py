"""Tiny Diffusers pipelines in place of Hub pipelines: the same pipeline class, component classes and folder
layout as the checkpoint (model_index.json, each component's config and weights, the scheduler's config, the
tokenizers), built from tiny configs and saved with the pipeline's own `save_pretrained`, so
`DiffusionPipeline.from_pretrained(ID)` and `FluxPipeline.from_pretrained(ID)` run their own loading code.

What the script's shapes depend on is kept from the checkpoint (`pipelines.json`): the default image size (the
denoiser's sample size), the VAE's 8x down-scaling and latent channels, the scheduler class and prediction
type, the tokenizers' lengths, SDXL's micro-conditioning and Flux's guidance embedding. Widths, depths and
vocabularies are tiny: the text encoders are `compat_matrix.tiny`'s, the denoisers and the VAE use the
smallest widths their group norms allow. `try` stands these pipelines in for Hub ones (`try_run.hub`); the
compatibility matrix probes them (`diffusion_probes`), at a second tiny size (every width doubled) too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compat_matrix.settings import TINY_VOCAB
from usercode import model_ids

if TYPE_CHECKING:  # (torch and Transformers are imported only to build: `try` matches ids with this module)
    from compat_matrix.tiny import TinySize

SPECS_PATH = Path(__file__).with_name("data") / "pipelines.json"
CHARACTERS = [chr(code) for code in range(33, 127)]
TEXT_VOCAB = TINY_VOCAB  # the tiny text encoders' vocabulary; the tokenizers stay below it


class CannotBuild(Exception):
    """A pipeline family the stand-ins do not build; the message is the run's reason."""


@dataclass(frozen=True)
class PipelineSpec:
    checkpoint: str
    family: str  # stable-diffusion, stable-diffusion-xl, pixart, flux
    pipeline: str  # the Diffusers class the checkpoint's model_index.json names
    values: dict[str, Any]
    sources: dict[str, str]


@cache
def _specs() -> tuple[tuple[tuple[str, ...], PipelineSpec], ...]:
    document = json.loads(SPECS_PATH.read_text(encoding="utf-8"))
    return tuple(
        (
            tuple(pattern.lower() for pattern in row["patterns"]),
            PipelineSpec(row["checkpoint"], row["family"], row["pipeline"], row["values"], row["sources"]),
        )
        for row in document["pipelines"]
    )


def spec_for(model_id: str) -> PipelineSpec | None:
    lowered = model_id.lower()
    return next(
        (spec for patterns, spec in _specs() if any(model_ids.matches(lowered, p) for p in patterns)), None
    )


def checkpoints() -> list[str]:
    """The checkpoints whose pipelines are stood in for, for messages."""
    return [spec.checkpoint for _, spec in _specs()]


def family_spec(family: str) -> PipelineSpec:
    """The first checkpoint of a family (`pipelines.json` lists the family's most-used one first)."""
    return next(spec for _, spec in _specs() if spec.family == family)


def families() -> tuple[str, ...]:
    return tuple(dict.fromkeys(spec.family for _, spec in _specs()))


def build(spec: PipelineSpec, size: TinySize | None = None, seed: int = 0):
    """The tiny pipeline of `spec`'s family (eval mode, float32, seeded); `size`: the text encoders' tiny size
    (`tiny.PRIMARY` by default), the denoiser's and the VAE's widths scaled with it."""
    import torch

    from compat_matrix.tiny import PRIMARY

    size = size or PRIMARY
    torch.manual_seed(seed)
    builder = {
        "stable-diffusion": _stable_diffusion,
        "stable-diffusion-xl": _stable_diffusion_xl,
        "pixart": _pixart,
        "flux": _flux,
    }.get(spec.family)
    if builder is None:
        raise CannotBuild(f"no tiny stand-in for a {spec.family} pipeline")
    return builder(spec.values, size, size.hidden // PRIMARY.hidden)


def _clip_tokenizer(max_length: int):
    """CLIP's byte-level BPE tokenizer class over single characters (word-final forms with `</w>`)."""
    from transformers import CLIPTokenizer

    vocabulary = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for token in [*CHARACTERS, *(character + "</w>" for character in CHARACTERS)]:
        vocabulary.setdefault(token, len(vocabulary))
    return CLIPTokenizer(vocab=vocabulary, merges=[], model_max_length=max_length)


def _t5_tokenizer(max_length: int):
    """T5's unigram tokenizer class over single characters (word-initial forms with `▁`)."""
    from transformers import T5Tokenizer

    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -1.0)]
    pieces += [(character, -2.0) for character in CHARACTERS]
    pieces += [("▁" + character, -1.5) for character in CHARACTERS]
    return T5Tokenizer(vocab=pieces, extra_ids=0, model_max_length=max_length)


def _clip_text_encoder(max_positions: int, size: TinySize, with_projection: bool = False):
    from transformers import CLIPTextModel, CLIPTextModelWithProjection

    from compat_matrix.tiny import build_tiny_config

    config = build_tiny_config(
        "clip_text_model", size, exact={"max_position_embeddings": max_positions, "vocab_size": TEXT_VOCAB}
    )
    config.projection_dim = size.hidden
    config.bos_token_id, config.eos_token_id, config.pad_token_id = 0, 1, 1  # the tokenizer's
    return (CLIPTextModelWithProjection if with_projection else CLIPTextModel)(config).eval()


def _t5_encoder(size: TinySize):
    from transformers import T5EncoderModel

    from compat_matrix.tiny import build_tiny_config

    config = build_tiny_config("t5", size, exact={"vocab_size": TEXT_VOCAB})
    config.pad_token_id, config.eos_token_id = 0, 1
    return T5EncoderModel(config).eval()


def _vae(values: dict[str, Any], scale: int):
    """Four blocks like the checkpoints' VAEs, so images are 8x the latents."""
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=(8 * scale,) * 4,
        layers_per_block=1,
        norm_num_groups=4,
        latent_channels=values["vae.latent_channels"],
        sample_size=values["vae.sample_size"],
        scaling_factor=values["vae.scaling_factor"],
        shift_factor=values.get("vae.shift_factor"),
        use_quant_conv=values.get("vae.use_quant_conv", True),
        use_post_quant_conv=values.get("vae.use_quant_conv", True),
    ).eval()


def _scheduler(values: dict[str, Any]):
    import diffusers

    scheduler_class = getattr(diffusers, values["scheduler"])
    return scheduler_class.from_config(
        {key.split(".", 1)[1]: value for key, value in values.items() if key.startswith("scheduler.")}
    )


def _unet(values: dict[str, Any], scale: int, cross_attention_dim: int, **extra):
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        sample_size=values["unet.sample_size"],
        in_channels=4,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        block_out_channels=(16 * scale, 32 * scale),
        layers_per_block=1,
        norm_num_groups=8,
        attention_head_dim=(2 * scale, 4 * scale),
        cross_attention_dim=cross_attention_dim,
        time_cond_proj_dim=values.get("unet.time_cond_proj_dim"),
        use_linear_projection=values.get("unet.use_linear_projection", False),
        **extra,
    ).eval()


def _stable_diffusion(values: dict[str, Any], size: TinySize, scale: int):
    import diffusers
    from transformers import CLIPImageProcessor

    pipeline_class = getattr(diffusers, values["pipeline"])
    return pipeline_class(
        vae=_vae(values, scale),
        text_encoder=_clip_text_encoder(values["tokenizer.model_max_length"], size),
        tokenizer=_clip_tokenizer(values["tokenizer.model_max_length"]),
        unet=_unet(values, scale, cross_attention_dim=size.hidden),
        scheduler=_scheduler(values),
        safety_checker=None,  # a safety checker is a CLIP vision model run on each image: not stood in for
        feature_extractor=CLIPImageProcessor(),
        requires_safety_checker=False,
    )


def _stable_diffusion_xl(values: dict[str, Any], size: TinySize, scale: int):
    from diffusers import StableDiffusionXLPipeline

    time_embedding = 8
    length = values["tokenizer.model_max_length"]
    return StableDiffusionXLPipeline(
        vae=_vae(values, scale),
        text_encoder=_clip_text_encoder(length, size),
        text_encoder_2=_clip_text_encoder(length, size, with_projection=True),
        tokenizer=_clip_tokenizer(length),
        tokenizer_2=_clip_tokenizer(length),
        # The two encoders' hidden states side by side; micro-conditioning: pooled text + 6 size/crop numbers.
        unet=_unet(
            values,
            scale,
            cross_attention_dim=2 * size.hidden,
            addition_embed_type="text_time",
            addition_time_embed_dim=time_embedding,
            projection_class_embeddings_input_dim=size.hidden + 6 * time_embedding,
            transformer_layers_per_block=(1, 2),
        ),
        scheduler=_scheduler(values),
    )


def _pixart(values: dict[str, Any], size: TinySize, scale: int):
    from diffusers import PixArtAlphaPipeline, PixArtTransformer2DModel

    encoder = _t5_encoder(size)
    transformer = PixArtTransformer2DModel(
        sample_size=values["transformer.sample_size"],
        num_layers=2,
        patch_size=2,
        attention_head_dim=8,
        num_attention_heads=3
        * scale,  # a width divisible by 3: the size and aspect-ratio embeddings take a third each
        caption_channels=encoder.config.d_model,
        in_channels=4,
        out_channels=8,  # the learned variance, as PixArt-alpha predicts it
        cross_attention_dim=24 * scale,
        attention_bias=True,
        activation_fn="gelu-approximate",
        num_embeds_ada_norm=1000,
        norm_type="ada_norm_single",
        norm_elementwise_affine=False,
        norm_eps=1e-6,
        use_additional_conditions=values["transformer.use_additional_conditions"],
    ).eval()
    return PixArtAlphaPipeline(
        tokenizer=_t5_tokenizer(values["tokenizer.model_max_length"]),
        text_encoder=encoder,
        vae=_vae(values, scale),
        transformer=transformer,
        scheduler=_scheduler(values),
    )


def _flux(values: dict[str, Any], size: TinySize, scale: int):
    from diffusers import FluxPipeline, FluxTransformer2DModel

    encoder = _t5_encoder(size)
    transformer = FluxTransformer2DModel(
        patch_size=1,
        in_channels=4 * values["vae.latent_channels"],  # latents packed 2 x 2
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2 * scale,
        joint_attention_dim=encoder.config.d_model,
        pooled_projection_dim=size.hidden,
        guidance_embeds=values["transformer.guidance_embeds"],
        axes_dims_rope=(4, 6, 6),
    ).eval()
    return FluxPipeline(
        scheduler=_scheduler(values),
        vae=_vae(values, scale),
        text_encoder=_clip_text_encoder(values["tokenizer.model_max_length"], size),
        tokenizer=_clip_tokenizer(values["tokenizer.model_max_length"]),
        text_encoder_2=encoder,
        tokenizer_2=_t5_tokenizer(values["tokenizer_2.model_max_length"]),
        transformer=transformer,
    )
