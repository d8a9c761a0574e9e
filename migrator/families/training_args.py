"""What each `NeuronTrainingArguments` / `NeuronSFTConfig` field becomes on TorchNeuron.

Declarative: the training family applies it to keyword arguments of the constructors, the shell family
to `--flag value` arguments of `torchrun`/`python` launcher lines. A field that is not listed is kept
as is (the 48 fields optimum-neuron 0.4.5 shares with Transformers 5.23 `TrainingArguments`, and every
TRL 1.16 `SFTConfig` field optimum-neuron forwarded unchanged).

Kinds:
- keep: same name, same meaning.
- rename: same value under `target` (a `TrainingArguments`/`SFTConfig` field).
- switch: a removed boolean whose `True` is now `value` and whose `False` is `off` (Python source, the target's
  default) of the field `target`: a literal `True` becomes `target=value`, a literal `False` goes, any other value
  `x` becomes `target=value if x else off` (evaluated once, as before); manual (`note`) where `target` is given too.
- drop: no equivalent in Transformers 5 / TRL 1.16; remove it (`note` says what changes).
- distributed: moves to the model load, `DistributedConfig(<target>=...)` on `from_pretrained`.
- environment: moves to the environment variable `target`, set just before the arguments are built (where a
  statement can go there; else as manual, and `note` is what to do).
- manual: no faithful rewrite; `note` is "<why>; <what to do>" for the TODO. Where `inactive` is given, the
  literal value at which the field does nothing (a pipeline degree of 1) is removed instead.

Sources: optimum-neuron 0.4.5 `trainers/training_args.py` and `trainers/sft_config.py` (and older tags
for legacy fields), Transformers 5.23 `training_args.py`, TRL 1.16 `trainer/sft_config.py`; for the Transformers
4.x fields 5.x removed, Transformers' MIGRATION_GUIDE_V5.md ("Trainer": the removed `TrainingArguments`
arguments) and the fields of 4.57.3's `TrainingArguments` that 5.23's lacks (read from both wheels; every
one is listed but the private `_n_gpu`; `tests/migrator/test_stack_calls.py` checks that 5.23 rejects each).
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = frozenset({"keep", "rename", "switch", "drop", "distributed", "environment", "manual"})


@dataclass(frozen=True)
class ArgAction:
    kind: str
    target: str | None = None
    note: str = ""
    value: str | None = None  # switch: what `target` is set to for True
    off: str | None = None  # switch: what `target` is for False (its default)
    inactive: str | None = None  # manual: the literal (Python source) at which the field does nothing

    def removes(self, value: str | None) -> bool:
        """Whether a manual field given as `value` (its literal source, None when not a literal) is inactive."""
        return self.kind == "manual" and self.inactive is not None and value == self.inactive

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown argument action {self.kind!r}")
        if (self.kind in ("rename", "switch", "distributed", "environment")) != (self.target is not None):
            raise ValueError(f"{self.kind!r} actions need a target, other kinds none")
        if (self.kind == "switch") != (self.value is not None and self.off is not None):
            raise ValueError("switch actions need a value and an off value, other kinds neither")
        if self.inactive is not None and self.kind != "manual":
            raise ValueError("only manual actions have an inactive value")


KEEP = ArgAction("keep")


def _drop(note: str) -> ArgAction:
    return ArgAction("drop", note=note)


_NEURON_RUNTIME = "Neuron/NxD runtime option with no meaning on TorchNeuron"
_NO_METRICS = "optimum-neuron throughput/MFU metrics; Trainer logs samples_per_second itself"
_MASTER_WEIGHTS = (
    "optimum-neuron ZeRO-1 optimizer option; for fp32 master weights load the model in float32 and train "
    "with bf16=True (autocast)"
)
_PIPELINE = (
    "pipeline parallelism of HF models is not documented on TorchNeuron and DistributedConfig(pp_size=...) "
    "cannot be combined with FSDP; remove the pipeline stages and shard with DistributedConfig(tp_size=..., "
    "fsdp_size=...) instead"
)
# 1 stage, 1 microbatch, 1 virtual stage: no pipeline parallelism (optimum-neuron's and NxD's defaults).
_PIPELINE_FIELD = ArgAction("manual", note=_PIPELINE, inactive="1")
# Why a manual field given its inactive value is removed (the findings of the training and shell families).
INACTIVE_NOTE = "at that value it does nothing (no pipeline parallelism), the same as not giving it"

TRAINING_ARGUMENTS: dict[str, ArgAction] = {
    # optimum-neuron 0.4.5 fields that Transformers 5.23 TrainingArguments rejects or handles differently.
    "overwrite_output_dir": _drop(
        "removed in Transformers 5 (TrainingArguments raises on it); output_dir is always written to"
    ),
    "warmup_ratio": ArgAction(
        "rename", "warmup_steps", "Transformers 5 reads a warmup_steps value in [0, 1) as a ratio"
    ),
    "logging_dir": ArgAction(
        "environment",
        "TENSORBOARD_LOGGING_DIR",
        note="removed in Transformers 5 (TrainingArguments raises on it); set the environment variable "
        "TENSORBOARD_LOGGING_DIR to this directory before the Trainer is created",
    ),
    "tensor_parallel_size": ArgAction(
        "distributed",
        "tp_size",
        "tensor parallelism is set when the model is loaded: "
        "from_pretrained(..., distributed_config=DistributedConfig(tp_size=...))",
    ),
    "zero_1": ArgAction(
        "distributed",
        "fsdp_size",
        "ZeRO-1 becomes FSDP2 over the data-parallel ranks, "
        "DistributedConfig(fsdp_size=WORLD_SIZE // tp_size); FSDP2 also shards parameters and gradients "
        "(more memory saved, different communication)",
    ),
    "pipeline_parallel_size": _PIPELINE_FIELD,
    "pipeline_parallel_num_microbatches": _PIPELINE_FIELD,
    "disable_sequence_parallel": _drop(
        "DistributedConfig.enable_sequence_parallel is reserved and not wired up in Transformers 5.23"
    ),
    "kv_size_multiplier": _drop("NxD GQA key/value replication; DTensor TP plans shard KV heads"),
    "num_local_ranks_per_step": _drop(_NEURON_RUNTIME + " (staggered checkpoint loading)"),
    "use_xser": _drop(_NEURON_RUNTIME + " (NxD serialized checkpoints)"),
    "async_save": _drop(_NEURON_RUNTIME + " (NxD asynchronous checkpointing)"),
    "fuse_qkv": _drop("NxD custom modeling option; Transformers models keep their own projections"),
    "recompute_causal_mask": _drop("NxD custom modeling option"),
    "use_autocast": _drop(
        "bf16=True now always means autocast; optimum-neuron's bf16 without use_autocast trained bf16 "
        "weights directly, so keep loading the model with dtype=torch.bfloat16 to keep those numerics"
    ),
    "stochastic_rounding_enabled": _drop(_NEURON_RUNTIME + " (NEURON_RT_STOCHASTIC_ROUNDING_EN)"),
    "optimizer_use_master_weights": _drop(_MASTER_WEIGHTS),
    "optimizer_use_fp32_grad_acc": _drop(_MASTER_WEIGHTS),
    "optimizer_save_master_weights_in_ckpt": _drop(_MASTER_WEIGHTS),
    "skip_cache_push": _drop(_NEURON_RUNTIME + " (Neuron compile cache on the Hub)"),
    "dataloader_prefetch_size": _drop(
        "XLA device-loader prefetch; dataloader_prefetch_factor is a different, worker-side knob"
    ),
    "enable_throughput_metrics": _drop(_NO_METRICS),
    "enable_mfu_metrics": _drop(_NO_METRICS),
    "enable_efficiency_metrics": _drop(_NO_METRICS),
    "metrics_window_size": _drop(_NO_METRICS),
    # optimum-neuron <= 0.3 fields.
    "half_precision_backend": _drop("removed in Transformers 5; bf16=True selects autocast"),
    "disable_embedding_parallelization": _drop("NxD parallelizer option; TP plans decide the sharding"),
    "neuron_cc_optlevel": _drop("neuronx-cc option of the XLA flow; TorchNeuron picks its own"),
    "mp_plugin": ArgAction(
        "manual",
        note="optimum-neuron ModelParallelismPlugin has no TrainingArguments equivalent; load the model with "
        "distributed_config=DistributedConfig(tp_size=..., fsdp_size=...)",
    ),
    # Transformers 4.x fields (inherited by Trainium/Neuron arguments classes) that 5.23 no longer has.
    "evaluation_strategy": ArgAction("rename", "eval_strategy", "renamed in Transformers 4.46"),
    "per_gpu_train_batch_size": ArgAction("rename", "per_device_train_batch_size"),
    "per_gpu_eval_batch_size": ArgAction("rename", "per_device_eval_batch_size"),
    # A true value trains on the CPU on TorchNeuron: NM220 / NM467 leave a TODO on it as well.
    "no_cuda": ArgAction("rename", "use_cpu"),
    "push_to_hub_token": ArgAction("rename", "hub_token"),
    "save_safetensors": _drop("removed in Transformers 5, which always saves safetensors"),
    "include_tokens_per_second": _drop("removed in Transformers 5; samples_per_second remains"),
    "tpu_num_cores": _drop("TPU option"),
    "use_mps_device": _drop("Apple MPS option"),
    "fp16_backend": _drop("removed in Transformers 5"),
    "torchdynamo": _drop(
        "removed in Transformers 5; torch_compile=True picks the neuron backend by itself on TorchNeuron"
    ),
    "use_ipex": _drop("Intel extension option"),
    "jit_mode_eval": _drop("removed in Transformers 5"),
    "xpu_backend": _drop("Intel XPU option"),
    "use_legacy_prediction_loop": _drop("removed in Transformers 5; the evaluation loop replaces it"),
    "sharded_ddp": ArgAction(
        "manual",
        note="removed in Transformers 5; shard with "
        "from_pretrained(..., distributed_config=DistributedConfig(fsdp_size=...)) instead",
    ),
    "group_by_length": ArgAction(
        "switch",
        "train_sampling_strategy",
        'removed in Transformers 5; use train_sampling_strategy="group_by_length" if it was enabled',
        value='"group_by_length"',
        off='"random"',
    ),
    "include_inputs_for_metrics": ArgAction(
        "switch",
        "include_for_metrics",
        'removed in Transformers 5; use include_for_metrics=["inputs"] if it was enabled',
        value='["inputs"]',
        off="[]",
    ),
    "past_index": ArgAction(
        "manual",
        note="removed in Transformers 5; models with memory states (XLNet, Transformer-XL) need a custom "
        "loop",
    ),
    "mp_parameters": _drop(
        "removed in Transformers 5; SageMaker model parallelism's, which the Trainer ignored"
    ),
    "tpu_metrics_debug": _drop("removed in Transformers 5; a TPU debug option"),
    "fp16_opt_level": _drop(
        "removed in Transformers 5; Apex AMP's level (Transformers 5 has no Apex backend)"
    ),
    "ray_scope": ArgAction(
        "environment",
        "RAY_SCOPE",
        "removed in Transformers 5; Ray hyperparameter search reads the RAY_SCOPE environment variable",
    ),
    "adafactor": ArgAction(
        "switch",
        "optim",
        'removed in Transformers 5; use optim="adafactor" if it was enabled',
        value='"adafactor"',
        off='"adamw_torch_fused"',
    ),
    "fsdp_min_num_params": ArgAction(
        "manual",
        note='removed in Transformers 5; move it into fsdp_config={"min_num_params": ...} (or shard with '
        "DistributedConfig(fsdp_size=...) at the load on TorchNeuron)",
    ),
    "fsdp_transformer_layer_cls_to_wrap": ArgAction(
        "manual",
        note='removed in Transformers 5; move it into fsdp_config={"transformer_layer_cls_to_wrap": [...]} '
        "(or shard with DistributedConfig(fsdp_size=...) at the load on TorchNeuron)",
    ),
    **dict.fromkeys(
        ("push_to_hub_model_id", "push_to_hub_organization"),
        ArgAction(
            "manual",
            note='removed in Transformers 5; pass the full repository name as hub_model_id="organization/name"',
        ),
    ),
}

SFT_CONFIG_ARGUMENTS: dict[str, ArgAction] = {
    # NeuronSFTConfig = NeuronTrainingArguments + TRL SFTConfig: the training table applies too.
    **TRAINING_ARGUMENTS,
    "max_seq_length": ArgAction(
        "rename", "max_length", "TRL 1.16 has only max_length; optimum-neuron copied max_seq_length into it"
    ),
    "padding_free": _drop(
        "optimum-neuron forced padding_free=False whatever was passed, and False is TRL's default"
    ),
}

# How HfArgumentParser read the flag of each dropped field in the classes that had it (optimum-neuron 0.4.5
# `NeuronTrainingArguments` and older tags, Transformers 4.57.3 `TrainingArguments` and older, TRL's SFTConfig): the
# booleans, with their default (a True default also gave `--no_<name>`); every other dropped field took a value. A
# script that parses optimum-neuron's arguments still accepts these flags, and ignores them (NM226).
BOOLEAN_FLAGS: dict[str, bool] = {
    **dict.fromkeys(
        (
            *("overwrite_output_dir", "use_mps_device", "jit_mode_eval", "tpu_metrics_debug", "use_ipex"),
            *("use_legacy_prediction_loop", "include_tokens_per_second", "skip_cache_push", "use_autocast"),
            *("optimizer_save_master_weights_in_ckpt", "disable_sequence_parallel", "async_save", "fuse_qkv"),
            *("disable_embedding_parallelization", "padding_free"),
        ),
        False,
    ),
    **dict.fromkeys(
        (
            *("save_safetensors", "stochastic_rounding_enabled", "optimizer_use_master_weights"),
            *(
                "optimizer_use_fp32_grad_acc",
                "use_xser",
                "recompute_causal_mask",
                "enable_throughput_metrics",
            ),
            *("enable_mfu_metrics", "enable_efficiency_metrics"),
        ),
        True,
    ),
}

# The fields above that Transformers 4 / TRL 0.x had and Transformers 5.23 / TRL 1.16 no longer have (the rest are
# optimum-neuron's own): a plain Transformers script passes them too, so they mark a file for migration.
REMOVED_UPSTREAM = frozenset(
    {
        *(
            "overwrite_output_dir",
            "warmup_ratio",
            "logging_dir",
            "half_precision_backend",
            "evaluation_strategy",
        ),
        *(
            "per_gpu_train_batch_size",
            "per_gpu_eval_batch_size",
            "no_cuda",
            "push_to_hub_token",
            "save_safetensors",
        ),
        *("include_tokens_per_second", "tpu_num_cores", "use_mps_device", "fp16_backend", "torchdynamo"),
        *(
            "use_ipex",
            "jit_mode_eval",
            "xpu_backend",
            "use_legacy_prediction_loop",
            "sharded_ddp",
            "past_index",
        ),
        *(
            "group_by_length",
            "include_inputs_for_metrics",
            "mp_parameters",
            "tpu_metrics_debug",
            "fp16_opt_level",
        ),
        *("ray_scope", "adafactor", "fsdp_min_num_params", "fsdp_transformer_layer_cls_to_wrap"),
        *("push_to_hub_model_id", "push_to_hub_organization", "max_seq_length"),
    }
)

# `optim` values Transformers removed from `OptimizerNames` (the 4.49.0, 4.57.3 and 5.23 wheels compared: no other
# value went) -> (the value that builds that optimizer now, why). The Trainer passed both the same learning rate,
# betas, eps and weight decay.
REMOVED_OPTIMIZERS: dict[str, tuple[str, str]] = {
    "adamw_hf": (
        "adamw_torch",
        "Transformers' own AdamW, removed in 4.50 where `transformers.AdamW` became torch.optim.AdamW (torch "
        "applies eps after the bias correction and the decay before the step, as Transformers 4.50+ did)",
    ),
    "adamw_apex_fused": (
        "adamw_torch_fused",
        "Apex's FusedAdam (AdamW mode), removed with Apex support in Transformers 5; torch's fused AdamW computes "
        "the same update",
    ),
}

# Fields the Transformers / TRL class has as well, with the same meaning: the table changes them only where it
# rewrites an optimum-neuron class (a plain `SFTConfig(padding_free=True)` keeps its padding_free).
PLAIN_FIELDS = frozenset({"padding_free"})


def without_plain_fields(table: dict[str, ArgAction]) -> dict[str, ArgAction]:
    """The table for a Transformers / TRL class written as such (not one of optimum-neuron's)."""
    return {name: action for name, action in table.items() if name not in PLAIN_FIELDS}


# `TrainingNeuronConfig` (optimum.neuron.models.training.config, 0.3+), the NxD model-parallel settings given
# to a training model's from_pretrained; it becomes `DistributedConfig`. Positional order: tensor_parallel_size.
TRAINING_NEURON_CONFIG_FIELDS: dict[str, ArgAction] = {
    "tensor_parallel_size": TRAINING_ARGUMENTS["tensor_parallel_size"],
    "pipeline_parallel_use_zero1_optimizer": TRAINING_ARGUMENTS["zero_1"],
    "pipeline_parallel_size": _PIPELINE_FIELD,
    "virtual_pipeline_parallel_size": _PIPELINE_FIELD,
    "pipeline_parallel_num_microbatches": _PIPELINE_FIELD,
    "sequence_parallel_enabled": TRAINING_ARGUMENTS["disable_sequence_parallel"],
    "kv_size_multiplier": TRAINING_ARGUMENTS["kv_size_multiplier"],
    "num_local_ranks_per_step": TRAINING_ARGUMENTS["num_local_ranks_per_step"],
    "use_xser": TRAINING_ARGUMENTS["use_xser"],
    "async_save": TRAINING_ARGUMENTS["async_save"],
    "fuse_qkv": TRAINING_ARGUMENTS["fuse_qkv"],
    "recompute_causal_mask": TRAINING_ARGUMENTS["recompute_causal_mask"],
    "transpose_nki_inputs": _drop("NxD NKI kernel layout option"),
    "gradient_checkpointing": ArgAction(
        "manual",
        note="gradient checkpointing is a training argument in Transformers; set gradient_checkpointing=True "
        "in TrainingArguments (or call model.gradient_checkpointing_enable()) and remove it here",
    ),
    "checkpoint_dir": ArgAction(
        "manual",
        note="resuming is done by the Trainer; pass trainer.train(resume_from_checkpoint=...) (model weights "
        "only for a sharded model) and remove it here",
    ),
}

__all__ = [
    "BOOLEAN_FLAGS",
    "REMOVED_OPTIMIZERS",
    "KEEP",
    "SFT_CONFIG_ARGUMENTS",
    "TRAINING_ARGUMENTS",
    "TRAINING_NEURON_CONFIG_FIELDS",
    "ArgAction",
]

# TRL 0.11's `SFTTrainer(...)` keywords that TRL 0.12+ moved to SFTConfig (TRL 1.16 rejects them on the trainer:
# TypeError) -> the SFTConfig field each became; trl 0.11.4's `sft_trainer.py` copied each into its config.
SFT_TRAINER_KEYWORDS = {
    "dataset_text_field": "dataset_text_field",
    "packing": "packing",
    "max_seq_length": "max_length",
    "dataset_num_proc": "dataset_num_proc",
    "dataset_kwargs": "dataset_kwargs",
    "eval_packing": "eval_packing",
    "model_init_kwargs": "model_init_kwargs",
    "neftune_noise_alpha": "neftune_noise_alpha",
    "dataset_batch_size": None,  # the batch size of its tokenizing map: the rows are the same
}
# ...and those of TRL 0.11's ConstantLengthDataset (packing=True), which TRL 1.x's packing has no equivalent of.
SFT_TRAINER_PACKING_KEYWORDS = ("infinite", "num_of_sequences", "chars_per_token")
# TrainingArguments' defaults where SFTConfig's differ (Transformers 5.23, TRL 1.16; SFTConfig's bf16=None becomes
# True unless fp16): a TrainingArguments call that becomes an SFTConfig keeps them, as TRL's own conversion of a
# TrainingArguments given to SFTTrainer (`SFTConfig(**args.to_dict())`) keeps every value.
TRAINING_ARGUMENTS_DEFAULTS_SFT_CHANGES = {
    "learning_rate": "5e-05",
    "logging_steps": "500",
    "bf16": "False",
    "gradient_checkpointing": "False",
}
