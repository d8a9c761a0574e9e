"""Shell launcher rules (NM450-NM499; migration map §1.8, §3.3, §3.4). The rewriter is `rewrite.py`."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity


def _example(before: str, after: str | None = None) -> Example:
    return Example(before, after, kind="shell")


PARALLEL_COMPILE = Rule(
    "NM450",
    Severity.ERROR,
    "`neuron_parallel_compile <launch>` (a compile-only run) that no identical launch follows",
    "Left in place with a TODO: TorchNeuron compiles just in time and caches graphs, so there is no separate "
    "pre-compilation run; removing only the prefix would turn it into a second real run. Delete the job.",
    examples=(
        _example(
            "#!/bin/bash\nneuron_parallel_compile torchrun --nproc_per_node=32 train.py --bf16\n",
            "#!/bin/bash\n"
            "# TODO(neuron-migrate): NM450 compile-only run (`neuron_parallel_compile`) with no identical launch after it; TorchNeuron compiles just in time, in the training run itself: delete this job (dropping only the prefix would make it a training run)\n"
            "neuron_parallel_compile torchrun --nproc_per_node=32 train.py --bf16\n",
        ),
    ),
)
PRECOMPILE_RUN = Rule(
    "NM451",
    Severity.INFO,
    "`neuron_parallel_compile <launcher>` followed by the same launcher (compile run, then training run)",
    "The pre-compilation run is removed; the training run is kept once.",
    examples=(
        _example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "neuron_parallel_compile torchrun --nproc_per_node=32 train.py --max_steps 10\n"
            "\n"
            "torchrun --nproc_per_node=32 train.py --max_steps 1000\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "\n"
            "torchrun --nproc_per_node=32 train.py --max_steps 1000\n",
        ),
    ),
)
EXPORT_REMOVED = (
    "Removed: TorchNeuron loads the original checkpoint. Carry --sequence_length into max_cache_len (LLMs) or a "
    "fixed padding length, --batch_size into a fixed batch size, --auto_cast_type into dtype, and load the model "
    "id instead of the export directory."
)
# A core count of the export is not a trn2 tensor-parallel degree (NM504 says the same of Python loads).
EXPORT_TP_SIZE = (
    "choose DistributedConfig(tp_size=...) for the trn2 / trn3 instance (a divisor of its NeuronCores and of the "
    "model's attention heads) and launch with torchrun."
)
EXPORT_COMMAND = Rule(
    "NM452",
    Severity.WARNING,
    "`optimum-cli export neuron ...` ahead-of-time export",
    f"{EXPORT_REMOVED} --num_cores/--tensor_parallel_size counted the compile target's (inf2 / trn1) "
    f"NeuronCores, not trn2 NeuronCores: {EXPORT_TP_SIZE}",
    examples=(
        _example(
            "#!/bin/bash\n"
            "optimum-cli export neuron --model Qwen/Qwen3-0.6B --sequence_length 1024 --batch_size 1 qwen3_neuron/\n",
            "#!/bin/bash\n",
        ),
    ),
)
CONSOLIDATE_COMMAND = Rule(
    "NM453",
    Severity.INFO,
    "`optimum-cli neuron consolidate ...` merges sharded training checkpoints",
    "Removed: `save_pretrained` writes standard, unsharded checkpoints on TorchNeuron (keep the command only "
    "to convert checkpoints made with optimum-neuron).",
    examples=(
        _example(
            "#!/bin/bash\noptimum-cli neuron consolidate output/checkpoint-500 output/consolidated\n",
            "#!/bin/bash\n",
        ),
    ),
)
CACHE_COMMAND = Rule(
    "NM454",
    Severity.WARNING,
    "`optimum-cli neuron cache ...` (Neuron compile cache on the Hub)",
    "Removed: TorchNeuron has no Hub compile cache; it caches compiled graphs locally (see the TorchNeuron "
    "environment variable reference for the cache directory).",
    examples=(
        _example(
            "#!/bin/bash\noptimum-cli neuron cache synchronize\n",
            "#!/bin/bash\n",
        ),
    ),
)
OPTIMUM_CLI_MANUAL = Rule(
    "NM455",
    Severity.ERROR,
    "Another `optimum-cli neuron ...` command (`serve`, ...)",
    "Left in place with a TODO: serve with vLLM on Neuron (`vllm serve`) or run the model with Transformers "
    'on device "neuron".',
    examples=(
        _example(
            "#!/bin/bash\noptimum-cli neuron serve --model Qwen/Qwen3-0.6B\n",
            "#!/bin/bash\n"
            '# TODO(neuron-migrate): NM455 `optimum-cli neuron serve` has no TorchNeuron equivalent; serve with vLLM on Neuron (`vllm serve`) or run the model with Transformers on device "neuron".\n'
            "optimum-cli neuron serve --model Qwen/Qwen3-0.6B\n",
        ),
    ),
)
DROPPED_VARIABLE = Rule(
    "NM456",
    Severity.INFO,
    "An XLA/NxD-only environment variable in a launcher (`export XLA_USE_BF16=1`, `NEURON_FUSE_SOFTMAX=1 cmd`)",
    "Removed: nothing reads it on TorchNeuron.",
    examples=(
        _example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "export NEURON_FUSE_SOFTMAX=1\n"
            "torchrun --nproc_per_node=2 train.py\n",
            "#!/bin/bash\nexport HF_DEACTIVATE_ASYNC_LOAD=1\ntorchrun --nproc_per_node=2 train.py\n",
        ),
    ),
)
MANUAL_VARIABLE = Rule(
    "NM457",
    Severity.WARNING,
    "`NEURON_CC_FLAGS` / `NEURON_COMPILE_CACHE_URL` in a launcher",
    "Left in place with a TODO: these configured the XLA-flow compiler and cache; check the TorchNeuron "
    "environment variable reference and remove or replace them.",
    examples=(
        _example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            'export NEURON_CC_FLAGS="--model-type transformer -O1"\n'
            "torchrun --nproc_per_node=2 train.py\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM457 `NEURON_CC_FLAGS` holds compiler flags tuned for the XLA/NxD graph flow, and whether TorchNeuron's neuron backend reads them is not documented; remove them, or keep only flags the TorchNeuron compiler reference lists\n"
            'export NEURON_CC_FLAGS="--model-type transformer -O1"\n'
            "torchrun --nproc_per_node=2 train.py\n",
        ),
    ),
)
PRECOMPILE_BRANCH = Rule(
    "NM458",
    Severity.INFO,
    '`if [ "$NEURON_EXTRACT_GRAPHS_ONLY" = "1" ]; then ...; else ...; fi`',
    "Folded with the variable unset (only neuron_parallel_compile set it): the branch that runs is kept.",
    examples=(
        _example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            'if [ "$NEURON_EXTRACT_GRAPHS_ONLY" = "1" ]; then\n'
            "    MAX_STEPS=10\n"
            "else\n"
            "    MAX_STEPS=1000\n"
            "fi\n"
            "torchrun --nproc_per_node=2 train.py --max_steps $MAX_STEPS\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "MAX_STEPS=1000\n"
            "torchrun --nproc_per_node=2 train.py --max_steps $MAX_STEPS\n",
        ),
    ),
)
PRECOMPILE_USE = Rule(
    "NM459",
    Severity.WARNING,
    "A use of `NEURON_EXTRACT_GRAPHS_ONLY` / `NEURON_PARALLEL_COMPILE` the codemod cannot fold",
    "Left in place with a TODO: the variable is never set on TorchNeuron; keep only the code for the real run.",
    examples=(
        _example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            'echo "compile only: ${NEURON_EXTRACT_GRAPHS_ONLY:-0}" >> run.log\n'
            "torchrun --nproc_per_node=2 train.py\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM459 `NEURON_EXTRACT_GRAPHS_ONLY` is only set by neuron_parallel_compile, which TorchNeuron does not have; keep only the commands of the real run\n"
            'echo "compile only: ${NEURON_EXTRACT_GRAPHS_ONLY:-0}" >> run.log\n'
            "torchrun --nproc_per_node=2 train.py\n",
        ),
    ),
)
PIP_INSTALL = Rule(
    "NM460",
    Severity.WARNING,
    "An install (`pip install`, `%pip`, a requirements file) of optimum-neuron / torch-xla / neuronx-distributed",
    'Replaced with the TorchNeuron package set, torch-neuronx "transformers>=5.23" "trl>=1.16" peft accelerate, '
    "plus what an optimum-neuron extra pulled in (`[diffusers]`: diffusers), with the replaced line's marker; "
    "`--extra-index-url https://pip.repos.neuron.amazonaws.com` is added: torch-neuronx comes from the Neuron pip "
    "repository, not PyPI. Uninstall torch-xla from existing environments: Transformers still takes the XLA path "
    "when it is importable.",
    examples=(
        _example(
            '#!/bin/bash\npip install "optimum-neuron[diffusers]==0.3.0" datasets\n',
            "#!/bin/bash\n"
            'pip install torch-neuronx "transformers>=5.23" "trl>=1.16" peft accelerate diffusers datasets --extra-index-url https://pip.repos.neuron.amazonaws.com\n',
        ),
    ),
)
FLAG_REMOVED = Rule(
    "NM461",
    Severity.INFO,
    "A training flag Transformers 5 / TRL 1.16 rejects (`--overwrite_output_dir`, `--zero_1`, `--async_save`...)",
    "Removed from the launcher line (HfArgumentParser raises on unknown flags).",
    examples=(
        _example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 run_clm.py --zero_1 true --bf16\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 run_clm.py --bf16\n",
        ),
    ),
)
FLAG_RENAMED = Rule(
    "NM462",
    Severity.INFO,
    "A training flag renamed in Transformers 5 / TRL 1.16 (`--warmup_ratio`, `--max_seq_length`...)",
    "Renamed on the launcher line (`--warmup_ratio r` -> `--warmup_steps r`...).",
    examples=(
        _example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 sft.py --max_seq_length 2048 --zero_1 true\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 sft.py --max_length 2048\n",
        ),
    ),
)
FLAG_DISTRIBUTED = Rule(
    "NM463",
    Severity.WARNING,
    "`--tensor_parallel_size` on a launcher line",
    "Kept as a script argument with a TODO: it now feeds `DistributedConfig(tp_size=...)` when the script "
    "loads the model; torchrun --nproc_per_node must equal tp_size x fsdp_size.",
    examples=(
        _example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 run_clm.py --tensor_parallel_size 8 --zero_1 true\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM463 `--tensor_parallel_size` is kept as a script argument and now feeds DistributedConfig(tp_size=...); tensor parallelism is set when the model is loaded: from_pretrained(..., distributed_config=DistributedConfig(tp_size=...)), and torchrun --nproc_per_node must equal tp_size x fsdp_size\n"
            "torchrun --nproc_per_node=32 run_clm.py --tensor_parallel_size 8\n",
        ),
    ),
)
FLAG_MANUAL = Rule(
    "NM464",
    Severity.ERROR,
    "A training flag with no faithful rewrite (`--logging_dir`, `--pipeline_parallel_size`...)",
    "Left in place with a TODO that says what to do instead.",
    examples=(
        _example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 run_clm.py --logging_dir logs --zero_1 true\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM464 `--logging_dir` removed in Transformers 5 (TrainingArguments raises on it); set the environment variable TENSORBOARD_LOGGING_DIR to this directory before the Trainer is created\n"
            "torchrun --nproc_per_node=32 run_clm.py --logging_dir logs\n",
        ),
    ),
)
ASYNC_LOAD_EXPORT = Rule(
    "NM465",
    Severity.INFO,
    "A launcher runs a Python script but does not set `HF_DEACTIVATE_ASYNC_LOAD`",
    "Added `export HF_DEACTIVATE_ASYNC_LOAD=1` near the top: asynchronous weight loading is not supported on "
    "TorchNeuron.",
    examples=(
        _example(
            "#!/bin/bash\nexport NEURON_FUSE_SOFTMAX=1\ntorchrun --nproc_per_node=2 train.py\n",
            "#!/bin/bash\nexport HF_DEACTIVATE_ASYNC_LOAD=1\ntorchrun --nproc_per_node=2 train.py\n",
        ),
    ),
)
FLAG_UNKNOWN_SCRIPT = Rule(
    "NM466",
    Severity.WARNING,
    "An optimum-neuron training flag (`--zero_1`, `--max_seq_length`...) on a launch of a script whose argument "
    "parser is not known",
    "Left in place with a TODO that says what the flag becomes if the script builds TrainingArguments/SFTConfig "
    "from it: flags are renamed or removed only for Transformers/TRL example scripts and scripts of the same "
    "tree whose parser was read (a script's own `--max_seq_length`, as on `run_glue.py`, is its own).",
    examples=(
        _example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 train.py --zero_1 true --warmup_ratio 0.03\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM466 `train.py` is neither in this tree nor a known Transformers/TRL example script, so its optimum-neuron training flags are left as they are; if they reach TrainingArguments/SFTConfig: remove `--zero_1`; rename `--warmup_ratio` to `--warmup_steps`\n"
            "torchrun --nproc_per_node=32 train.py --zero_1 true --warmup_ratio 0.03\n",
        ),
    ),
)
CPU_FLAG = Rule(
    "NM467",
    Severity.ERROR,
    "`--use_cpu True` / `--no_cuda True` on a training launch",
    "Left in place with a TODO: under XLA it kept the run off CUDA; on TorchNeuron it trains on the CPU. Remove it.",
    examples=(
        _example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 run_clm.py --use_cpu True --zero_1 True\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM467 `--use_cpu` made sense under XLA (the XLA device is not CUDA), but on TorchNeuron it makes the Trainer run on the CPU instead of the neuron device: remove it\n"
            "torchrun --nproc_per_node=32 run_clm.py --use_cpu True\n",
        ),
    ),
)
PRECISION_FLAG = Rule(
    "NM468",
    Severity.WARNING,
    "`XLA_USE_BF16=1` / `XLA_DOWNCAST_BF16=1` (prefix or `export`) before a Trainer/TRL launch",
    "Removed, and `--bf16` added to each Trainer/TRL launch it reached (`--bf16 true` where the launch spells "
    "its booleans): bf16 autocast with float32 master weights, where XLA cast the weights themselves.",
    examples=(
        _example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "export XLA_USE_BF16=1\n"
            "torchrun --nproc_per_node=32 sft.py --model_name_or_path Qwen/Qwen3-0.6B --packing true\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "torchrun --nproc_per_node=32 sft.py --model_name_or_path Qwen/Qwen3-0.6B --packing true --bf16 true\n",
        ),
    ),
)
PRECISION_MANUAL = Rule(
    "NM469",
    Severity.WARNING,
    "`XLA_USE_BF16=1` / `XLA_DOWNCAST_BF16=1` where no Trainer/TRL launch with a known parser follows",
    "Left in place with a TODO: nothing reads it on TorchNeuron, and dropping it alone would train in float32. "
    "Pass --bf16 to a Trainer/TRL script or load the model with dtype=torch.bfloat16, then delete it.",
    examples=(
        _example(
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "export XLA_USE_BF16=1\n"
            "torchrun --nproc_per_node=2 train.py\n",
            "#!/bin/bash\n"
            "export HF_DEACTIVATE_ASYNC_LOAD=1\n"
            "# TODO(neuron-migrate): NM469 `XLA_USE_BF16=1` trained in bf16 under XLA and nothing reads it on TorchNeuron; it reaches `train.py`, whose argument parser is not known: pass --bf16 to a Trainer/TRL script or load the model with dtype=torch.bfloat16, then delete it\n"
            "export XLA_USE_BF16=1\n"
            "torchrun --nproc_per_node=2 train.py\n",
        ),
    ),
)
INSTALL_CONFLICT = Rule(
    "NM472",
    Severity.WARNING,
    "An install pins transformers / trl to versions the migrated code cannot run with (`transformers==4.52.3`)",
    "Left in place with a TODO: the migrated code needs transformers>=5.23 and trl>=1.16; relax the pin.",
    examples=(
        _example(
            '#!/bin/bash\npip install optimum-neuron transformers==4.52.3 "trl>=1.16"\n',
            "#!/bin/bash\n"
            "# TODO(neuron-migrate): NM472 `transformers==4.52.3` left as it is: it excludes `transformers>=5.23`, which the migrated code needs\n"
            'pip install torch-neuronx peft accelerate transformers==4.52.3 "trl>=1.16" --extra-index-url https://pip.repos.neuron.amazonaws.com\n',
        ),
    ),
)
INSTALL_KEPT = Rule(
    "NM473",
    Severity.WARNING,
    "An optimum-neuron / XLA package in an install that the same notebook still imports, or whose extra "
    "(`optimum-neuron[vllm]`) has no TorchNeuron counterpart",
    "Left in place with a TODO: uninstalling it would break the code that still uses it; finish that code's "
    "migration first (or install what the extra stood for), then remove it.",
    examples=(
        _example(
            '#!/bin/bash\npip install "optimum-neuron[vllm]" torch-xla\n',
            "#!/bin/bash\n"
            "# TODO(neuron-migrate): NM473 `optimum-neuron[vllm]` left as it is: its `[vllm]` extra has no TorchNeuron counterpart the codemod can name (serving moves to vLLM Neuron: install it as its documentation says)\n"
            'pip install "optimum-neuron[vllm]" torch-neuronx "transformers>=5.23" "trl>=1.16" peft accelerate --extra-index-url https://pip.repos.neuron.amazonaws.com\n',
        ),
    ),
)
