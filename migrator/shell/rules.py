"""Shell launcher rules (NM450-NM499; migration map §1.8, §3.3, §3.4). The rewriter is `rewrite.py`."""

from __future__ import annotations

from migrator.rules import Severity, define

PARALLEL_COMPILE = define(
    "NM450",
    Severity.ERROR,
    "`neuron_parallel_compile <launch>` (a compile-only run) that no identical launch follows",
    "Left in place with a TODO: TorchNeuron compiles just in time and caches graphs, so there is no separate "
    "pre-compilation run; removing only the prefix would turn it into a second real run. Delete the command, "
    "or keep its launch without the prefix if it is the only run.",
)
PRECOMPILE_RUN = define(
    "NM451",
    Severity.INFO,
    "`neuron_parallel_compile <launcher>` followed by the same launcher (compile run, then training run)",
    "The pre-compilation run is removed; the training run is kept once.",
)
EXPORT_COMMAND = define(
    "NM452",
    Severity.WARNING,
    "`optimum-cli export neuron ...` ahead-of-time export",
    "Removed: TorchNeuron loads the original checkpoint. Carry --sequence_length into max_cache_len (LLMs) or a "
    "fixed padding length, --batch_size into a fixed batch size, --num_cores/--tensor_parallel_size into "
    "DistributedConfig(tp_size=...) with torchrun, --auto_cast_type into dtype, and load the model id instead "
    "of the export directory.",
)
CONSOLIDATE_COMMAND = define(
    "NM453",
    Severity.INFO,
    "`optimum-cli neuron consolidate ...` merges sharded training checkpoints",
    "Removed: `save_pretrained` writes standard, unsharded checkpoints on TorchNeuron (keep the command only "
    "to convert checkpoints made with optimum-neuron).",
)
CACHE_COMMAND = define(
    "NM454",
    Severity.WARNING,
    "`optimum-cli neuron cache ...` (Neuron compile cache on the Hub)",
    "Removed: TorchNeuron has no Hub compile cache; it caches compiled graphs locally (see the TorchNeuron "
    "environment variable reference for the cache directory).",
)
OPTIMUM_CLI_MANUAL = define(
    "NM455",
    Severity.ERROR,
    "Another `optimum-cli neuron ...` command (`serve`, ...)",
    "Left in place with a TODO: serve with vLLM on Neuron (`vllm serve`) or run the model with Transformers "
    'on device "neuron".',
)
DROPPED_VARIABLE = define(
    "NM456",
    Severity.INFO,
    "An XLA/NxD-only environment variable in a launcher (`export XLA_USE_BF16=1`, `NEURON_FUSE_SOFTMAX=1 cmd`)",
    "Removed: nothing reads it on TorchNeuron.",
)
MANUAL_VARIABLE = define(
    "NM457",
    Severity.WARNING,
    "`NEURON_CC_FLAGS` / `NEURON_COMPILE_CACHE_URL` in a launcher",
    "Left in place with a TODO: these configured the XLA-flow compiler and cache; check the TorchNeuron "
    "environment variable reference and remove or replace them.",
)
PRECOMPILE_BRANCH = define(
    "NM458",
    Severity.INFO,
    '`if [ "$NEURON_EXTRACT_GRAPHS_ONLY" = "1" ]; then ...; else ...; fi`',
    "Folded with the variable unset (only neuron_parallel_compile set it): the branch that runs is kept.",
)
PRECOMPILE_USE = define(
    "NM459",
    Severity.WARNING,
    "A use of `NEURON_EXTRACT_GRAPHS_ONLY` / `NEURON_PARALLEL_COMPILE` the codemod cannot fold",
    "Left in place with a TODO: the variable is never set on TorchNeuron; keep only the code for the real run.",
)
PIP_INSTALL = define(
    "NM460",
    Severity.WARNING,
    "`pip install` of optimum-neuron / torch-xla / neuronx-distributed",
    "Replaced with the TorchNeuron package set: torch-neuronx (from the Neuron pip repository, --extra-index-url "
    'https://pip.repos.neuron.amazonaws.com) "transformers>=5.23" "trl>=1.16" peft accelerate. Uninstall '
    "torch-xla from existing environments: Transformers still takes the XLA path when it is importable.",
)
FLAG_REMOVED = define(
    "NM461",
    Severity.INFO,
    "A training flag Transformers 5 / TRL 1.16 rejects (`--overwrite_output_dir`, `--zero_1`, `--async_save`...)",
    "Removed from the launcher line (HfArgumentParser raises on unknown flags).",
)
FLAG_RENAMED = define(
    "NM462",
    Severity.INFO,
    "A training flag renamed in Transformers 5 / TRL 1.16 (`--warmup_ratio`, `--max_seq_length`...)",
    "Renamed on the launcher line (`--warmup_ratio r` -> `--warmup_steps r`...).",
)
FLAG_DISTRIBUTED = define(
    "NM463",
    Severity.WARNING,
    "`--tensor_parallel_size` on a launcher line",
    "Kept as a script argument with a TODO: it now feeds `DistributedConfig(tp_size=...)` when the script "
    "loads the model; torchrun --nproc_per_node must equal tp_size x fsdp_size.",
)
FLAG_MANUAL = define(
    "NM464",
    Severity.ERROR,
    "A training flag with no faithful rewrite (`--logging_dir`, `--pipeline_parallel_size`...)",
    "Left in place with a TODO that says what to do instead.",
)
ASYNC_LOAD_EXPORT = define(
    "NM465",
    Severity.INFO,
    "A launcher runs a Python script but does not set `HF_DEACTIVATE_ASYNC_LOAD`",
    "Added `export HF_DEACTIVATE_ASYNC_LOAD=1` near the top: asynchronous weight loading is not supported on "
    "TorchNeuron.",
)
