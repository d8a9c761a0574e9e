"""The optimum-neuron training symbols and what they become (data only: the training rules read it)."""

from __future__ import annotations

from dataclasses import dataclass

from migrator.families.training_args import SFT_CONFIG_ARGUMENTS, TRAINING_ARGUMENTS, ArgAction

_NEURON = "optimum.neuron"
_TRAINERS = "optimum.neuron.trainers"
_TRAINING_MODELS = "optimum.neuron.models.training"


@dataclass(frozen=True)
class Target:
    module: str
    name: str
    arguments: dict[str, ArgAction] | None = None  # the keyword table, for arguments classes
    trainer: bool = False  # a trainer constructor (tokenizer= -> processing_class=)


def _table(entries) -> dict[str, Target]:
    return {f"{module}.{name}": target for modules, name, target in entries for module in modules}


_ARGS_MODULES = (_NEURON, _TRAINERS, f"{_TRAINERS}.training_args", f"{_NEURON}.training_args")
_LEGACY = (_NEURON, _TRAINERS, f"{_NEURON}.training_args", f"{_NEURON}.hf_argparser")
_TRAINING_ARGS = Target("transformers", "TrainingArguments", TRAINING_ARGUMENTS)
_SEQ2SEQ_ARGS = Target("transformers", "Seq2SeqTrainingArguments", TRAINING_ARGUMENTS)
_TRAINER = Target("transformers", "Trainer", trainer=True)
_SEQ2SEQ_TRAINER = Target("transformers", "Seq2SeqTrainer", trainer=True)
_PARSER = Target("transformers", "HfArgumentParser")

# Symbols that are always rewritten (every use can be renamed): qualified optimum name -> target.
RENAMES: dict[str, Target] = _table(
    [
        ((_NEURON, _TRAINERS, f"{_TRAINERS}.transformers"), "NeuronTrainer", _TRAINER),
        (_ARGS_MODULES, "NeuronTrainingArguments", _TRAINING_ARGS),
        (
            (_NEURON, _TRAINERS, f"{_TRAINERS}.sft_trainer"),
            "NeuronSFTTrainer",
            Target("trl", "SFTTrainer", trainer=True),
        ),
        (
            (_NEURON, _TRAINERS, f"{_TRAINERS}.sft_config", f"{_NEURON}.utils", f"{_NEURON}.utils.trl_utils"),
            "NeuronSFTConfig",
            Target("trl", "SFTConfig", SFT_CONFIG_ARGUMENTS),
        ),
        ((_NEURON, f"{_NEURON}.hf_argparser"), "NeuronHfArgumentParser", _PARSER),
        ((_NEURON, _TRAINERS), "Seq2SeqNeuronTrainer", _SEQ2SEQ_TRAINER),
        (_ARGS_MODULES, "Seq2SeqNeuronTrainingArguments", _SEQ2SEQ_ARGS),
        (_LEGACY, "TrainiumTrainer", _TRAINER),
        (_LEGACY, "Seq2SeqTrainiumTrainer", _SEQ2SEQ_TRAINER),
        (_LEGACY, "TrainiumTrainingArguments", _TRAINING_ARGS),
        (_LEGACY, "Seq2SeqTrainiumTrainingArguments", _SEQ2SEQ_ARGS),
        (_LEGACY, "TrainiumHfArgumentParser", _PARSER),
        (
            (_NEURON, _TRAINERS, f"{_NEURON}.utils", f"{_NEURON}.utils.trl_utils"),
            "NeuronORPOTrainer",
            Target("trl.experimental.orpo", "ORPOTrainer", trainer=True),
        ),
        (
            (_NEURON, _TRAINERS, f"{_NEURON}.utils", f"{_NEURON}.utils.trl_utils"),
            "NeuronORPOConfig",
            Target("trl.experimental.orpo", "ORPOConfig", TRAINING_ARGUMENTS),
        ),
        (
            (f"{_NEURON}.peft", f"{_NEURON}.peft.mapping_func", f"{_NEURON}.utils.peft_utils", _NEURON),
            "get_peft_model",
            Target("peft", "get_peft_model"),
        ),
        (
            (
                f"{_NEURON}.peft",
                f"{_NEURON}.peft.peft_model",
                f"{_NEURON}.utils",
                f"{_NEURON}.utils.peft_utils",
            ),
            "NeuronPeftModel",
            Target("peft", "PeftModel"),
        ),
        (
            (f"{_NEURON}.peft", f"{_NEURON}.peft.peft_model"),
            "NeuronPeftModelForCausalLM",
            Target("peft", "PeftModelForCausalLM"),
        ),
    ]
)

# optimum-neuron custom-modeling training classes: rewritten at their `from_pretrained` call only, and only
# when the sharding can be carried to `distributed_config=` (else the load stays, with a TODO).
_AUTO = (_TRAINING_MODELS, f"{_TRAINING_MODELS}.modeling_auto")
TRAINING_MODELS: dict[str, Target] = _table(
    [
        (_AUTO, "NeuronModelForCausalLM", Target("transformers", "AutoModelForCausalLM")),
        (_AUTO, "NeuronModel", Target("transformers", "AutoModel")),
    ]
    + [
        (
            (
                _TRAINING_MODELS,
                f"{_TRAINING_MODELS}.{package}",
                f"{_TRAINING_MODELS}.{package}.modeling_{package}",
            ),
            name,
            Target("transformers", name),
        )
        for package, name in (
            ("llama", "LlamaForCausalLM"),
            ("qwen3", "Qwen3ForCausalLM"),
            ("granite", "GraniteForCausalLM"),
        )
    ]
)

# Calls to the target classes get the same keyword rules (Transformers 5 rejects the old keywords, and a
# second run must find what the first one left).
TARGET_CALLS: dict[str, Target] = {
    f"{t.module}.{t.name}": t for t in RENAMES.values() if t.arguments or t.trainer
}

LAZY_LOAD_FUNCTIONS = frozenset(
    {
        f"{_NEURON}.distributed.lazy_load_for_parallelism",
        f"{_NEURON}.distributed.utils.lazy_load_for_parallelism",
    }
)
CONSOLIDATION_FUNCTIONS = frozenset(
    f"{module}.{name}"
    for module in (
        f"{_NEURON}.distributed",
        f"{_NEURON}.distributed.checkpointing",
        _TRAINING_MODELS,
        f"{_TRAINING_MODELS}.checkpointing",
    )
    for name in (
        "consolidate_model_parallel_checkpoints",
        "consolidate_model_parallel_checkpoints_to_unified_checkpoint",
    )
)
TRAINING_NEURON_CONFIGS = frozenset(
    {f"{_TRAINING_MODELS}.TrainingNeuronConfig", f"{_TRAINING_MODELS}.config.TrainingNeuronConfig"}
)
ACCELERATORS = frozenset({f"{_NEURON}.NeuronAccelerator", f"{_NEURON}.accelerate.NeuronAccelerator"})
TRAINER_KEYWORDS = {"tokenizer": "processing_class"}
MODEL_LOAD_KEYWORDS = {"torch_dtype": "dtype"}
WORLD_SIZE = 'int(os.environ.get("WORLD_SIZE", "1"))'
# The flags NeuronTrainingArguments parsed into its trn_config, as fields of the script's own argument dataclass
# once it parses TrainingArguments: name -> (type, default, help). The shell rules keep them on the launcher.
PARSED_PARALLEL_FIELDS = {
    "tensor_parallel_size": ("int", "1", "tensor parallel degree of the model"),
    # optimum-neuron 0.4.5's NeuronTrainingArguments default: ZeRO-1 on (`--zero_1 false` turns it off)
    "zero_1": ("bool", "True", "ZeRO-1: shard the optimizer state over the data-parallel processes"),
}
# Added beside them where the script passed it to lazy_load_for_parallelism: only a degree of 1 runs.
PARSED_PIPELINE_FIELD = (
    "pipeline_parallel_size",
    (
        "int",
        "1",
        "pipeline parallel degree (TorchNeuron runs Transformers models without pipeline stages: 1)",
    ),
)
MODEL_CLASS_SUFFIXES = ("Model", "LM", "Classification", "Answering", "Generation", "MultipleChoice")


SYMBOLS = frozenset(
    {
        *RENAMES,
        *TRAINING_MODELS,
        *LAZY_LOAD_FUNCTIONS,
        *CONSOLIDATION_FUNCTIONS,
        *ACCELERATORS,
        *TRAINING_NEURON_CONFIGS,
    }
)
# optimum-neuron symbols (named through `optimum`), or the Transformers/TRL classes whose arguments the
# rules check; everything else they do (model loads, scopes) follows from one of those.
TRIGGERS = frozenset({"optimum", *(name.rsplit(".", 1)[1] for name in TARGET_CALLS)})
# The same, plus the model loads and `trn_config` reads that the arguments' sharding goes to.
HINTS = TRIGGERS | {"from_pretrained", "trn_config"}

# Arguments classes (Transformers / TRL names, then optimum-neuron's, before NM201 renames them).
ARGUMENTS_CLASSES = frozenset(
    {
        "TrainingArguments",
        "Seq2SeqTrainingArguments",
        "SFTConfig",
        "ORPOConfig",
        "DPOConfig",
        "GRPOConfig",
        "NeuronTrainingArguments",
        "Seq2SeqNeuronTrainingArguments",
        "NeuronSFTConfig",
        "NeuronORPOConfig",
        "TrainiumTrainingArguments",
        "Seq2SeqTrainiumTrainingArguments",
    }
)
# optimum-neuron's arguments classes (NeuronTrainingArguments and its subclasses, NeuronSFTConfig...), qualified.
NEURON_ARGUMENTS = frozenset(name for name in RENAMES if name.rpartition(".")[2] in ARGUMENTS_CLASSES)
SFT_CONFIG_CLASSES = frozenset({"SFTConfig", "NeuronSFTConfig"})
# The keywords the training rules add to arguments calls, and the classes whose instances have them as fields
# (what `**args.to_dict()` passes on): TrainingArguments' fields are every class's, `packing_strategy` TRL's.
ADDED_FIELDS: dict[str, frozenset[str]] = {
    "bf16": ARGUMENTS_CLASSES,
    "torch_compile": ARGUMENTS_CLASSES,
    "save_only_model": ARGUMENTS_CLASSES,
    "packing_strategy": SFT_CONFIG_CLASSES,
}

# TRL's SFT trainer and optimum-neuron's, qualified, and by the names scripts call them (NM228, NM229).
SFT_TRAINERS = frozenset(
    {
        "trl.SFTTrainer",
        "trl.trainer.SFTTrainer",
        "trl.trainer.sft_trainer.SFTTrainer",
        "optimum.neuron.NeuronSFTTrainer",
        "optimum.neuron.trainers.NeuronSFTTrainer",
        "optimum.neuron.trainers.sft_trainer.NeuronSFTTrainer",
    }
)
SFT_TRAINER_NAMES = frozenset(name.rpartition(".")[2] for name in SFT_TRAINERS)
