"""Data for the inference rules: which optimum-neuron symbol becomes which Transformers/Diffusers symbol,
and what each load-time argument means, read from the optimum-neuron 0.4.5 wheel (its model classes, their
`from_pretrained` / export arguments and pipelines) and checked against the installed Transformers 5.23 /
Diffusers 0.42.1."""

from __future__ import annotations

from usercode.names import COMPILED_MODEL_LOADER


def _paths(name: str, *modules: str) -> dict[str, str]:
    """Qualified names under which a user script may import `name` (lazy re-export + defining modules)."""
    return {f"{module}.{name}": name for module in ("optimum.neuron", *modules)}


# --- decoder LLMs -------------------------------------------------------------------------------------------------

CAUSAL_LM = _paths(
    "NeuronModelForCausalLM",
    "optimum.neuron.models.inference.modeling_utils",
    "optimum.neuron.modeling_decoder",
    "optimum.neuron.modeling",
)

# --- traced encoders, seq2seq, audio, vision -> transformers ----------------------------------------------------

_TASK_MODELS = {
    "NeuronModelForFeatureExtraction": "AutoModel",
    "NeuronModelForMaskedLM": "AutoModelForMaskedLM",
    "NeuronModelForQuestionAnswering": "AutoModelForQuestionAnswering",
    "NeuronModelForSequenceClassification": "AutoModelForSequenceClassification",
    "NeuronModelForTokenClassification": "AutoModelForTokenClassification",
    "NeuronModelForMultipleChoice": "AutoModelForMultipleChoice",
    "NeuronModelForImageClassification": "AutoModelForImageClassification",
    "NeuronModelForSemanticSegmentation": "AutoModelForSemanticSegmentation",
    "NeuronModelForObjectDetection": "AutoModelForObjectDetection",
    "NeuronModelForCTC": "AutoModelForCTC",
    "NeuronModelForAudioClassification": "AutoModelForAudioClassification",
    "NeuronModelForAudioFrameClassification": "AutoModelForAudioFrameClassification",
    "NeuronModelForXVector": "AutoModelForAudioXVector",
}
_ARCH_MODELS = {
    "optimum.neuron.models.inference.bert": {
        "NeuronBertModel": "BertModel",
        "NeuronBertForMaskedLM": "BertForMaskedLM",
        "NeuronBertForQuestionAnswering": "BertForQuestionAnswering",
        "NeuronBertForSequenceClassification": "BertForSequenceClassification",
        "NeuronBertForTokenClassification": "BertForTokenClassification",
        "NeuronBertForMultipleChoice": "BertForMultipleChoice",
    },
    "optimum.neuron.models.inference.clip": {
        "NeuronCLIPModel": "CLIPModel",
        "NeuronCLIPForImageClassification": "CLIPForImageClassification",
    },
    "optimum.neuron.models.inference.whisper": {
        "NeuronWhisperForConditionalGeneration": "WhisperForConditionalGeneration"
    },
    "optimum.neuron.models.inference.yolos": {"NeuronYolosForObjectDetection": "YolosForObjectDetection"},
}
_LEGACY_ARCH_MODULE = {"optimum.neuron.models.inference.bert": "optimum.neuron.models.bert"}  # <= 0.2

# qualified optimum name -> transformers class name
TRANSFORMERS_MODELS: dict[str, str] = {}
for _neuron, _target in _TASK_MODELS.items():
    for _qualified in _paths(_neuron, "optimum.neuron.modeling"):
        TRANSFORMERS_MODELS[_qualified] = _target
for _qualified in _paths("NeuronModelForSeq2SeqLM", "optimum.neuron.modeling_seq2seq"):
    TRANSFORMERS_MODELS[_qualified] = "AutoModelForSeq2SeqLM"
for _module, _classes in _ARCH_MODELS.items():
    _modules = (_module, _LEGACY_ARCH_MODULE[_module]) if _module in _LEGACY_ARCH_MODULE else (_module,)
    for _neuron, _target in _classes.items():
        for _qualified in _paths(_neuron, *_modules):
            TRANSFORMERS_MODELS[_qualified] = _target

# --- diffusion pipelines -> diffusers -----------------------------------------------------------------------------

_PIPELINES = {
    "NeuronStableDiffusionPipeline": "StableDiffusionPipeline",
    "NeuronStableDiffusionImg2ImgPipeline": "StableDiffusionImg2ImgPipeline",
    "NeuronStableDiffusionInpaintPipeline": "StableDiffusionInpaintPipeline",
    "NeuronStableDiffusionInstructPix2PixPipeline": "StableDiffusionInstructPix2PixPipeline",
    "NeuronLatentConsistencyModelPipeline": "LatentConsistencyModelPipeline",
    "NeuronStableDiffusionXLPipeline": "StableDiffusionXLPipeline",
    "NeuronStableDiffusionXLImg2ImgPipeline": "StableDiffusionXLImg2ImgPipeline",
    "NeuronStableDiffusionXLInpaintPipeline": "StableDiffusionXLInpaintPipeline",
    "NeuronPixArtAlphaPipeline": "PixArtAlphaPipeline",
    "NeuronPixArtSigmaPipeline": "PixArtSigmaPipeline",
    "NeuronFluxPipeline": "FluxPipeline",
    "NeuronFluxKontextPipeline": "FluxKontextPipeline",
    "NeuronFluxInpaintPipeline": "FluxInpaintPipeline",
}
DIFFUSERS_PIPELINES: dict[str, str] = {
    qualified: target
    for neuron, target in _PIPELINES.items()
    for qualified in _paths(neuron, "optimum.neuron.modeling_diffusion")
}

# --- sentence-transformers -> sentence_transformers.SentenceTransformer -----------------------------------------

# `NeuronModelForSentenceTransformers` is the name optimum-neuron used before 0.3 (its notebooks still import it).
SENTENCE_TRANSFORMERS = frozenset(
    {
        *_paths("NeuronSentenceTransformers", "optimum.neuron.modeling_sentence_transformers"),
        *_paths("NeuronModelForSentenceTransformers", "optimum.neuron.modeling"),
    }
)
# What SentenceTransformer(...) calls the Hub arguments of a load; the others have no counterpart there.
SENTENCE_TRANSFORMER_LOAD_ARGS = {
    "token": "token",
    "revision": "revision",
    "trust_remote_code": "trust_remote_code",
    "local_files_only": "local_files_only",
    "cache_dir": "cache_folder",
}

# --- pipeline() ---------------------------------------------------------------------------------------------------

PIPELINE = frozenset(
    _paths("pipeline", "optimum.neuron.pipelines", "optimum.neuron.pipelines.transformers.base")
)

# --- symbols left in place with a TODO (qualified name -> "<why>; <what to do>") --------------------------------

_MANUAL_BY_NAME = {
    "NeuronModelForEmbedding": (
        ("optimum.neuron.models.inference.modeling_utils",),
        "optimum-neuron's compiled embedding model returns the hidden state of each sequence's last token "
        "(batch x 1 x hidden: right padding only, not normalised), for the batch size, sequence length and "
        "tensor-parallel degree it was exported with; which replacement is the owner's decision: "
        'sentence_transformers.SentenceTransformer(model_id, device="neuron") and `model.encode(...)` (the model '
        'card\'s pooling and normalisation), or transformers.AutoModel.from_pretrained(model_id, device_map="neuron") '
        "and `model(**inputs).last_hidden_state` read by your own pooling, inputs padded to the exported "
        "sequence_length",
    ),
    "NeuronDecoderModel": (
        ("optimum.neuron.modeling_decoder",),
        "optimum-neuron base class of compiled decoders; use transformers.PreTrainedModel in type checks",
    ),
    "NeuronTracedModel": (
        ("optimum.neuron.modeling_traced",),
        "optimum-neuron base class of traced models; use transformers.PreTrainedModel in type checks",
    ),
    "NeuronModel": (
        ("optimum.neuron.modeling_base",),
        "optimum-neuron base class of compiled models; use transformers.PreTrainedModel in type checks",
    ),
    "NeuronBaseModel": (
        ("optimum.neuron.modeling_base",),
        "optimum-neuron base class of compiled models; use transformers.PreTrainedModel in type checks",
    ),
    "NeuronModelForImageTextToText": (
        (),
        "no rewrite rule yet; load transformers.AutoModelForImageTextToText from the original checkpoint with "
        'device_map="neuron" and a static cache (generation_config.cache_implementation = "static")',
    ),
    "NeuronDiffusionPipelineBase": (
        ("optimum.neuron.modeling_diffusion",),
        "optimum-neuron base class of compiled pipelines; use diffusers.DiffusionPipeline",
    ),
    "NeuronStableDiffusionControlNetPipeline": (
        ("optimum.neuron.modeling_diffusion",),
        "ControlNet weights were fused at export time; load diffusers.StableDiffusionControlNetPipeline with "
        'controlnet=ControlNetModel.from_pretrained(controlnet_id) and move it with .to("neuron")',
    ),
    "NeuronStableDiffusionXLControlNetPipeline": (
        ("optimum.neuron.modeling_diffusion",),
        "ControlNet weights were fused at export time; load diffusers.StableDiffusionXLControlNetPipeline with "
        'controlnet=ControlNetModel.from_pretrained(controlnet_id) and move it with .to("neuron")',
    ),
    "NeuronGenerationMixin": (
        ("optimum.neuron.generation",),
        "optimum-neuron's own generation loop; Transformers' generate() replaces it",
    ),
    "NxDNeuronConfig": (
        ("optimum.neuron.models.inference.backend.config",),
        "compilation config object; carry sequence_length to generation_config.max_cache_len (static cache) and "
        "tensor_parallel_size to DistributedConfig(tp_size=...)",
    ),
    "NeuronConfig": (
        ("optimum.neuron.configuration_utils",),
        "compilation config object; carry sequence_length to generation_config.max_cache_len (static cache) and "
        "tensor_parallel_size to DistributedConfig(tp_size=...)",
    ),
}
MANUAL_SYMBOLS: dict[str, str] = {
    qualified: why for name, (modules, why) in _MANUAL_BY_NAME.items() for qualified in _paths(name, *modules)
}
# The exporters package has no ahead-of-time equivalent on TorchNeuron at all.
EXPORTERS_MODULE = "optimum.exporters.neuron"
EXPORTERS_WHY = (
    "there is no ahead-of-time export on TorchNeuron (the first call on device neuron compiles); "
    "delete the export step, load the original checkpoint with Transformers/Diffusers on neuron and warm it up "
    "with the production input shapes"
)

# --- load-time arguments ------------------------------------------------------------------------------------------

# auto_cast_type strings (optimum) -> torch dtype attribute. tf32 and fp8 have no load-dtype equivalent.
AUTO_CAST_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}

# Arguments Transformers/Diffusers `from_pretrained` accepts with the same meaning: kept as they are.
KEPT_LOAD_ARGS = frozenset(
    {"token", "revision", "trust_remote_code", "cache_dir", "force_download", "local_files_only", "subfolder"}
)
# What optimum-neuron's load of a compiled decoder passes on to its download (the rest it ignores, `revision`
# aside: that of the compiled model, where the record names the checkpoint's own).
COMPILED_LOAD_PASSED = frozenset(
    {"token", "cache_dir", "force_download", "local_files_only", "trust_remote_code"}
)
# Compiler / export-only arguments: meaningless without ahead-of-time compilation.
EXPORT_ONLY_ARGS = frozenset(
    {
        "export",
        "auto_cast",
        "instance_type",
        "target",
        "optlevel",
        "disable_neuron_cache",
        "compiler_workdir",
        "inline_weights_to_neff",
        "inline_weights_neff",
        "disable_fast_relayout",
        "disable_fallback",
        "dynamic_batch_size",
        "disable_validation",
        "low_cpu_mem_usage",
        "load_weights",
        "task",
    }
)
# Static input shapes of traced models: dropped from the loader, they become fixed padding.
TRACED_SHAPE_ARGS = frozenset(
    {
        "batch_size",
        "sequence_length",
        "num_choices",
        "num_channels",
        "width",
        "height",
        "image_size",
        "patch_size",
        "audio_sequence_length",
        "num_beams",
        "text_batch_size",
        "image_batch_size",
        "num_images_per_prompt",
        "num_image_per_prompt",
    }
)
TP_ARGS = ("tensor_parallel_size", "num_cores")
# The sequence length a decoder was compiled for; `n_positions` is its old optimum-neuron name.
SEQUENCE_LENGTH_ARGS = ("sequence_length", "n_positions")
# What a decoder load argument without a mapping is (NM116 says it); others: no equivalent known.
UNMAPPED_DECODER_ARGS = {
    "continuous_batching": "a serving feature of vLLM Neuron, not of Transformers generate()",
    "speculation_length": "speculative decoding, a serving feature of vLLM Neuron",
    "on_device_sampling": "an NxD Inference setting; generate() samples on the device already",
}
DTYPE_ARGS = ("auto_cast_type", "torch_dtype")
# Export-time fusing of adapters / data parallelism over cores: no load-time equivalent.
DIFFUSION_MANUAL_ARGS = {
    "controlnet_ids": "ControlNet weights were fused at export time; load the matching diffusers "
    "ControlNet pipeline with controlnet=ControlNetModel.from_pretrained(controlnet_id)",
    "lora_model_ids": "LoRA adapters were fused at export time; call pipe.load_lora_weights(...) and "
    "pipe.set_adapters(...) after loading",
    "ip_adapter_id": "the IP-Adapter was fused at export time; call pipe.load_ip_adapter(...) and "
    "pipe.set_ip_adapter_scale(...) after loading",
    "data_parallel_mode": "optimum-neuron replicated the pipeline over NeuronCores; run one process per core "
    "(torchrun) or use a single device",
    "tensor_parallel_size": "optimum-neuron sharded the Flux transformer over NeuronCores; Diffusers (0.42) shards "
    "the transformers that have a tensor-parallel plan (`_tp_plan`: Flux, Flux2, Qwen-Image) with "
    "`TensorParallelConfig`: run the script with torchrun, one process per NeuronCore, move the pipeline to "
    '`torch.device("neuron", LOCAL_RANK)` and call `pipe.transformer.enable_parallelism(config='
    "TensorParallelConfig(tp_degree=N))`; a transformer without a plan loads on one device",
}
# Hub repositories of models compiled by optimum-neuron that AWS publishes: `aws-neuron/<model>-neuron[-latency]`,
# `-seqlen-2048-bs-4`, `-1024x1024`, `-cores-2`, and the compile cache `aws-neuron/optimum-neuron-cache`.
COMPILED_HUB_REPO = r"aws-neuron/[\w.-]*?(?:neuron|seqlen|-bs-?\d|\d+x\d+|cores)[\w.-]*"
COMPILED_HUB_ID = rf"^{COMPILED_HUB_REPO}"
# Where a compiled model names the checkpoint it was compiled from (optimum-neuron 0.4.5 records it for decoders
# only, in NxDNeuronConfig's file; the transformers-neuronx era, in config.json's `neuron` section).
ORIGINAL_CHECKPOINT_RECORD = (
    "`checkpoint_id` in its neuron_config.json (0.4.x decoders), `neuron.checkpoint_id` in its config.json (earlier "
    "releases), else its model card"
)

# The helper NM106 writes into a file to load a compiled decoder (its source: loads.FROM_NEURON_EXPORT_SOURCE).
FROM_NEURON_EXPORT = COMPILED_MODEL_LOADER
# NM106's finding on a compiled decoder's load it rewrote.
COMPILED_DECODER_LOADED = (
    "Loads a model optimum-neuron compiled: rewritten to `_from_neuron_export(AutoModelForCausalLM, ...)`, a helper "
    'added to the file that loads, on device "neuron", the checkpoint the compiled model records '
    f"({ORIGINAL_CHECKPOINT_RECORD.rsplit(', else', 1)[0]}) with its dtype and a static cache of its sequence "
    "length; a model without that record (a folder the migrated program saved) loads as it is. The compiled "
    "batch size and core count are not carried: the static cache compiles per batch size, and tensor "
    "parallelism on trn2 is DistributedConfig(tp_size) under torchrun."
)

# What a get_neuron_config/export pair may pass for the pair to be rewritten in one go (never half-way, NM108); the
# load rewrite (NM101) moves each of these config arguments into the load (auto_cast_type becomes its dtype).
CONFIG_ARGS = ("batch_size", "sequence_length", "tensor_parallel_size", "instance_type", "auto_cast_type")
# What NM102 says of a causal-LM load or text pipeline without a sequence length.
NO_CACHE_LEN = (
    "No sequence_length was given (optimum-neuron then compiled for the model's maximum length): the static "
    "cache is sized per generate() call from prompt + max_new_tokens, so each new size recompiles. Set "
    "`generation_config.max_cache_len` to a fixed length."
)
# What NM117 says of a load optimum-neuron sharded over every visible core, before how to launch it.
ONE_CORE = (
    'Rewritten for one NeuronCore (`device_map="neuron"`); for tensor parallelism pass '
    "`distributed_config=DistributedConfig(tp_size=N)` and "
)
