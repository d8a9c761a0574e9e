"""The names in users' code that say a value is a model id or a dataset: keyword arguments, command-line
options and parts of variable names. One list of each, read by the checklist and by `neuron-migrate try`."""

# Keyword arguments whose value is a model id (`from_pretrained(model_name_or_path=...)`, `pipeline(model=...)`).
MODEL_ARGUMENTS = frozenset(
    {
        "model",
        "model_id",
        "model_name",
        "model_name_or_path",
        "pretrained_model_name_or_path",
        "model_path",
        "checkpoint",
    }
)
# The helper a migrated file loads a compiled decoder with (NM106): `_from_neuron_export(AutoModelForCausalLM, ID)`
# loads the checkpoint ID's record names, or ID itself; its model id is its second argument.
COMPILED_MODEL_LOADER = "_from_neuron_export"
# The same as command-line options (`--model-id` and `--model_id` alike), but for `--model_path` and
# `--checkpoint`, which a launch also uses for its own folders (where to resume, where to write).
MODEL_OPTIONS = MODEL_ARGUMENTS - {"model_path", "checkpoint"}
# Parts of a variable, option or field name whose string value is a Hub repo to serve: the model's, and its
# tokenizer's, which a try must serve too.
MODEL_NAME_PARTS = ("model", "tokenizer", "checkpoint")
# Parts of a name whose value is a dataset id.
DATASET_NAME_PARTS = ("dataset", "data_name", "data_path")
# Parts of a name whose repo id is not a model the code loads (`TOKENIZER_ID = "mistralai/..."`): the checklist
# does not list it as a model to check.
NOT_A_MODEL_NAME_PARTS = ("tokenizer", "tokeniser", "processor", "dataset", "data_")

# The Neuron SDK modules a migrated file must no longer import (the migrator's sources: migration-map.md): what
# the migration replaces, never something to install.
NEURON_SDK_MODULES = (
    "optimum.neuron",
    "optimum",
    "torch_xla",
    "torch_neuronx",
    "neuronx_distributed",
    "neuronx_distributed_inference",
    "transformers_neuronx",
    "libneuronxla",
    "neuronxcc",
    "neuronperf",
    "nki",
    "neuron",
)
