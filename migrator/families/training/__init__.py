"""Training (NM2xx): optimum-neuron trainers, arguments, training models -> Transformers / TRL / PEFT.

`NeuronTrainer`/`NeuronSFTTrainer`/`NeuronTrainingArguments`/`NeuronSFTConfig`/`NeuronHfArgumentParser`
(and their legacy names) become the plain Transformers/TRL classes (`nm201_renames.py`); argument keywords
follow the table in `training_args.py` (`nm202_arguments.py`). Model parallelism leaves the arguments:
`tensor_parallel_size`/`zero_1` become `DistributedConfig(tp_size=..., fsdp_size=...)` on the model's
`from_pretrained` in the same scope, the only place Transformers shards a model (`state.py` follows the
scopes, `nm209_model_load.py` writes it). Whatever cannot be rewritten faithfully (parallelism that is only
known from parsed command-line flags, pipeline parallelism, ...) is left as it is with a TODO, so that
running the migrator again reports it again and finishes the job once the user has acted.
"""
