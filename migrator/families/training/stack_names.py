"""Names scripts import from transformers / trl / peft / huggingface_hub / datasets that the pinned stack
(constraints.txt: transformers 5.23, trl 1.16, peft 0.21, and the huggingface_hub and datasets Transformers 5 requires)
no longer has, and what replaces them (data only). `tests/migrator/test_stack_names.py` checks every entry
against the installed packages: the old name is gone, the replacement resolves."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Replacement:
    module: str
    name: str
    # Keywords of the old call the replacement does not take: a script using one keeps the name, with a TODO.
    unsupported_keywords: frozenset[str] = frozenset()
    # Defaults of the old callable that the replacement does not share, as (keyword, position, value): a call
    # that passes none of them gets them written out, so that it computes what it did before.
    old_defaults: tuple[tuple[str, int, str], ...] = ()
    # How many positional arguments mean the same in both signatures; a call with more keeps a TODO.
    same_positions: int | None = None


def _from(modules: tuple[str, ...], names: dict[str, Replacement]) -> dict[str, Replacement]:
    return {f"{module}.{name}": target for module in modules for name, target in names.items()}


_TRANSFORMERS = ("transformers",)
_TRL = ("trl",)

RENAMED: dict[str, Replacement] = {
    **_from(
        ("transformers", "transformers.optimization"),
        {
            # transformers.AdamW(params, lr, betas, eps=1e-6, weight_decay=0.0, correct_bias) against
            # torch.optim.AdamW(params, lr, betas, eps=1e-8, weight_decay=1e-2, amsgrad).
            "AdamW": Replacement(
                "torch.optim",
                "AdamW",
                frozenset({"correct_bias", "no_deprecation_warning"}),
                old_defaults=(("eps", 3, "1e-6"), ("weight_decay", 4, "0.0")),
                same_positions=5,
            )
        },
    ),
    **_from(
        _TRANSFORMERS,
        {
            "AutoModelForVision2Seq": Replacement("transformers", "AutoModelForImageTextToText"),
            # Transformers 4.x's own replacement (its deprecation said so): both ask whether torch_xla is what
            # runs, False on a TorchNeuron host. `check_device` has no counterpart: a call passing it keeps a TODO.
            # (`transformers.utils` still has the old name.)
            "is_torch_tpu_available": Replacement(
                "transformers", "is_torch_xla_available", frozenset({"check_device"}), same_positions=0
            ),
        },
    ),
    # datasets 3.0 removed its metrics for evaluate's (the same Hub scripts): load(path, config_name, ...)
    # against load_metric(path, config_name, process_id, ...); `trust_remote_code` has no counterpart.
    "datasets.load_metric": Replacement(
        "evaluate", "load", frozenset({"trust_remote_code"}), same_positions=2
    ),
    **_from(
        ("peft",),
        {
            "prepare_model_for_int8_training": Replacement(
                "peft",
                "prepare_model_for_kbit_training",
                frozenset({"output_embedding_layer_name", "layer_norm_names"}),
            )
        },
    ),
    # TRL 1.x moved these trainers out of the stable API into trl.experimental.
    **_from(
        _TRL,
        {
            name: Replacement(f"trl.experimental.{package}", name)
            for package, names in (
                ("orpo", ("ORPOTrainer", "ORPOConfig")),
                ("cpo", ("CPOTrainer", "CPOConfig")),
                ("online_dpo", ("OnlineDPOTrainer", "OnlineDPOConfig")),
                ("gkd", ("GKDTrainer", "GKDConfig")),
            )
            for name in names
        },
    ),
    **_from(_TRL, {"DataCollatorForChatML": Replacement("trl.experimental.utils", "DataCollatorForChatML")}),
    # The module went; the class is the same one, exported by Transformers itself.
    "transformers.generation_utils.GenerationMixin": Replacement("transformers", "GenerationMixin"),
}

# Transformers 4's vision feature extractors (class -> its model's folder): each was the model's image processor
# under another name (a subclass that only warned); Transformers 5 has only `<Model>ImageProcessor`.
_FEATURE_EXTRACTORS = {
    "BeitFeatureExtractor": "beit",
    "CLIPFeatureExtractor": "clip",
    "ChineseCLIPFeatureExtractor": "chinese_clip",
    "ConditionalDetrFeatureExtractor": "conditional_detr",
    "ConvNextFeatureExtractor": "convnext",
    "DPTFeatureExtractor": "dpt",
    "DeformableDetrFeatureExtractor": "deformable_detr",
    "DeiTFeatureExtractor": "deit",
    "DetrFeatureExtractor": "detr",
    "DonutFeatureExtractor": "donut",
    "FlavaFeatureExtractor": "flava",
    "GLPNFeatureExtractor": "glpn",
    "ImageGPTFeatureExtractor": "imagegpt",
    "LayoutLMv2FeatureExtractor": "layoutlmv2",
    "LayoutLMv3FeatureExtractor": "layoutlmv3",
    "LevitFeatureExtractor": "levit",
    "MaskFormerFeatureExtractor": "maskformer",
    "MobileNetV1FeatureExtractor": "mobilenet_v1",
    "MobileNetV2FeatureExtractor": "mobilenet_v2",
    "MobileViTFeatureExtractor": "mobilevit",
    "OwlViTFeatureExtractor": "owlvit",
    "PerceiverFeatureExtractor": "perceiver",
    "PoolFormerFeatureExtractor": "poolformer",
    "SegformerFeatureExtractor": "segformer",
    "ViTFeatureExtractor": "vit",
    "VideoMAEFeatureExtractor": "videomae",
    "ViltFeatureExtractor": "vilt",
    "YolosFeatureExtractor": "yolos",
}
RENAMED.update(
    {
        f"{module}.{name}": Replacement("transformers", name.replace("FeatureExtractor", "ImageProcessor"))
        for name, model in _FEATURE_EXTRACTORS.items()
        for module in ("transformers", f"transformers.models.{model}.feature_extraction_{model}")
    }
)
RENAMED["transformers.generation_utils.GenerationMixin"] = Replacement("transformers", "GenerationMixin")
# Hub helpers Transformers 4 re-exported (its example scripts import them from `transformers.utils`); huggingface_hub
# has them with the same behaviour (get_full_repo_name's organization= and token= by keyword only there).
RENAMED.update(
    {
        f"{module}.get_full_repo_name": Replacement("huggingface_hub", "get_full_repo_name", same_positions=1)
        for module in ("transformers.utils", "transformers.utils.hub")
    }
)
RENAMED["transformers.utils.is_offline_mode"] = Replacement("huggingface_hub", "is_offline_mode")
# huggingface_hub 1.x (which Transformers 5 requires) removed HfFolder; its token reader is a function now. Scripts
# import it from the package or from `huggingface_hub.hf_api` (AWS's SageMaker samples).
HF_FOLDER_MODULES = ("huggingface_hub", "huggingface_hub.hf_api")
RENAMED.update(
    {
        f"{module}.HfFolder.get_token": Replacement("huggingface_hub", "get_token")
        for module in HF_FOLDER_MODULES
    }
)

_DATASETS = "removed from Transformers; build the dataset with the `datasets` library"
_TRL_REMOVED = "removed in TRL 1.x with no replacement in the pinned stack; pin an older TRL for this script"
# Removed names with no faithful replacement: qualified name -> what to do.
REMOVED: dict[str, str] = {
    "transformers.AutoModelWithLMHead": "removed in Transformers 5; use AutoModelForCausalLM, "
    "AutoModelForMaskedLM or AutoModelForSeq2SeqLM, whichever head the checkpoint has",
    "transformers.TextDataset": _DATASETS,
    "transformers.LineByLineTextDataset": _DATASETS,
    "transformers.GlueDataset": _DATASETS,
    "transformers.GlueDataTrainingArguments": _DATASETS,
    "transformers.SquadDataset": _DATASETS,
    "transformers.top_k_top_p_filtering": "removed from Transformers; filter logits with TopKLogitsWarper and "
    "TopPLogitsWarper, or pass top_k / top_p to generate()",
    "transformers.create_optimizer": "TensorFlow support was removed in Transformers 5; use torch.optim",
    "transformers.AdamWeightDecay": "TensorFlow support was removed in Transformers 5; use torch.optim.AdamW",
    "trl.DataCollatorForCompletionOnlyLM": "removed in TRL 1.x; train on prompt-completion data with "
    "SFTConfig(completion_only_loss=True), or on conversations with assistant_only_loss=True",
    "trl.setup_chat_format": "removed in TRL 1.x; trl.clone_chat_template(model, tokenizer, source) copies a "
    "chat template from another tokenizer",
    "trl.get_kbit_device_map": 'removed in TRL 1.x; on TorchNeuron place the model with device_map="neuron"',
    "trl.is_xpu_available": "removed in TRL 1.x",
    **{
        f"{module}.HfFolder": "removed in huggingface_hub 1.x; its methods became functions: get_token(), "
        "login(token=...), logout(), constants.HF_TOKEN_PATH"
        for module in HF_FOLDER_MODULES
    },
    **{
        f"{module}.HfFolder.{method}": reason
        for module in HF_FOLDER_MODULES
        for method, reason in (
            ("save_token", "removed in huggingface_hub 1.x; huggingface_hub.login(token=...) stores a token"),
            (
                "delete_token",
                "removed in huggingface_hub 1.x; huggingface_hub.logout() deletes the stored token",
            ),
            (
                "path_token",
                "removed in huggingface_hub 1.x; the path is huggingface_hub.constants.HF_TOKEN_PATH",
            ),
        )
    },
    # NxD's Llama modeling files (copied into many training samples) import these from Transformers 4.3x.
    **dict.fromkeys(
        (
            "transformers.models.llama.modeling_llama.LlamaLinearScalingRotaryEmbedding",
            "transformers.models.llama.modeling_llama.LlamaDynamicNTKScalingRotaryEmbedding",
        ),
        "removed from Transformers; LlamaRotaryEmbedding(config) scales the positions itself when the config's "
        'rope_parameters set rope_type ("linear", "dynamic") and factor',
    ),
    **dict.fromkeys(
        (
            "transformers.models.llama.modeling_llama.LLAMA_START_DOCSTRING",
            "transformers.models.llama.modeling_llama.LLAMA_INPUTS_DOCSTRING",
        ),
        "removed from Transformers, which writes model docstrings with @auto_docstring; delete the "
        "add_start_docstrings / add_start_docstrings_to_model_forward decorators that use it (docstrings only)",
    ),
    "datasets.filesystems.S3FileSystem": "removed in datasets 3; it was s3fs.S3FileSystem under another name: "
    "`from s3fs import S3FileSystem` (pip install s3fs)",
    "huggingface_hub.Repository": "removed in huggingface_hub 1.x (the git-based repository class); push files "
    "with huggingface_hub.HfApi().upload_folder(repo_id=..., folder_path=...) (create_repo first)",
    "huggingface_hub.cached_download": "removed from huggingface_hub; download with "
    "huggingface_hub.hf_hub_download(repo_id, filename)",
    **dict.fromkeys(
        [
            f"trl.{name}"
            for name in (
                "PPOTrainer",
                "PPOConfig",
                "AutoModelForCausalLMWithValueHead",
                "AutoModelForSeq2SeqLMWithValueHead",
                "XPOTrainer",
                "XPOConfig",
                "NashMDTrainer",
                "NashMDConfig",
                "BCOTrainer",
                "BCOConfig",
                "PRMTrainer",
                "PRMConfig",
                "AlignPropTrainer",
                "AlignPropConfig",
                "DDPOTrainer",
                "DDPOConfig",
                "IterativeSFTTrainer",
            )
        ],
        _TRL_REMOVED,
    ),
}
# TensorFlow and Flax classes (`TFAutoModel...`, `FlaxAutoModel...`): Transformers 5 has none.
REMOVED_PREFIXES: dict[str, str] = {
    "transformers.TF": "TensorFlow support was removed in Transformers 5; use the PyTorch class (no `TF` prefix)",
    "transformers.Flax": "Flax support was removed in Transformers 5; use the PyTorch class (no `Flax` prefix)",
}
# Removed functions whose calls only had effects outside the program: qualified name -> what they did. A call
# statement of one is deleted with its import; any other use keeps a TODO.
DROPPED: dict[str, str] = {
    f"{module}.send_example_telemetry": "sent the example's name and arguments to Hugging Face as usage statistics"
    for module in ("transformers.utils", "transformers.utils.hub")
}
# Modules Transformers no longer has (whatever is imported from them): module -> what to do instead.
REMOVED_MODULES: dict[str, str] = {
    "transformers.generation_utils": "removed from Transformers; `GenerationMixin` is `transformers.GenerationMixin`, "
    "the `*SearchOutput` classes became `transformers.generation.GenerateDecoderOnlyOutput` / "
    "`GenerateEncoderDecoderOutput` / `GenerateBeamDecoderOnlyOutput`",
    "transformers.deepspeed": "removed from Transformers; import it from `transformers.integrations.deepspeed`",
    "transformers.onnx": "removed in Transformers 5; export to ONNX with optimum (`optimum-cli export onnx`)",
}
STACK_MODULES = ("transformers", "trl", "peft", "huggingface_hub", "datasets")


def removed_reason(qualified: str) -> str | None:
    if qualified in REMOVED:
        return REMOVED[qualified]
    for module, reason in REMOVED_MODULES.items():
        if qualified == module or qualified.startswith(module + "."):
            return reason
    for prefix, reason in REMOVED_PREFIXES.items():
        rest = qualified.removeprefix(prefix)
        if rest != qualified and rest[:1].isupper():
            return reason
    return None


# Last names of everything above: the rule's triggers and hints.
NAMES = frozenset(name.rpartition(".")[2] for name in (*RENAMED, *REMOVED, *REMOVED_MODULES, *DROPPED)) | {
    "TF",
    "Flax",
}
