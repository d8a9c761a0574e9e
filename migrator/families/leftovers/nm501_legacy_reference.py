"""NM501: a reference to optimum-neuron / PyTorch-XLA / NxD that is still there after every rewrite."""

from __future__ import annotations

import re

from migrator.families.environment.variables import DROPPED_VARIABLES, MANUAL_VARIABLES, other_xla_frontend
from migrator.families.inference.tables import (
    COMPILED_HUB_REPO,
    FROM_NEURON_EXPORT,
    ORIGINAL_CHECKPOINT_RECORD,
)
from migrator.families.leftovers.patterns import Pattern
from migrator.rules import Example, Rule, Severity
from migrator.target_stack import PINS

LEGACY_REFERENCE = Rule(
    "NM501",
    Severity.ERROR,
    "A legacy reference left in the migrated code or its strings (not its comments): `optimum.neuron`, "
    "`optimum-neuron`, `torch_xla`, `neuronx_distributed`, `neuronx_distributed_inference`, `transformers_neuronx`, `neuron_parallel_compile`, "
    "`optimum-cli ... neuron`, `neuronperf`, `libneuronxla`, vLLM's `vllm.entrypoints.neuron_multi_node` / `NEURON_MULTI_NODE`, "
    "an XLA-only variable (also in a SageMaker job's `environment`: `RUN_NEURON_PARALLEL_COMPILE`), "
    'an `"xla"` device, `model.neuron_config`, `config.neuron_batch_size`, `config.neuron[...]`, '
    "`push_to_hub(..., repository_id=...)`, `TasksManager`, Ray Train's `TorchXLAConfig`, a Hub repository of "
    'models compiled by optimum-neuron (`snapshot_download("aws-neuron/...-seqlen-2048-bs-4")`), a script '
    "downloaded from optimum-neuron's repository (`wget https://raw.githubusercontent.com/huggingface/"
    "optimum-neuron/.../train.py`: migrate a copy; a notebook's download of a file this tree holds becomes a copy "
    "of it, NM474)",
    "A TODO on each statement that holds it (a rerun adds none) and one manual finding per distinct reference "
    "in a block: "
    "nothing on TorchNeuron provides it, so the file is not migrated until a person removes or replaces it.",
    examples=(
        Example(
            before="""\
from optimum.neuron import NeuronModelForCausalLM

model = NeuronModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", export=True, batch_size=1, sequence_length=512)
print(model.neuron_config.batch_size)
""",
            after="""\
import os
from transformers import AutoModelForCausalLM

os.environ.setdefault("HF_DEACTIVATE_ASYNC_LOAD", "1")

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", device_map="neuron")
model.generation_config.cache_implementation = "static"
model.generation_config.max_cache_len = 512
# TODO(neuron-migrate): NM501 `.neuron_config` is an optimum-neuron attribute that Transformers models do not have; read the value from model.config / model.generation_config or from your own settings
print(model.neuron_config.batch_size)
""",
        ),
        Example(
            before="""\
#!/bin/bash
git clone https://github.com/aws-neuron/neuronx-distributed.git
""",
            after="""\
#!/bin/bash
# TODO(neuron-migrate): NM501 `neuronx-distributed` is NeuronX Distributed, the XLA-flow parallel library; use DistributedConfig(tp_size=..., fsdp_size=...) / DTensor with torchrun
git clone https://github.com/aws-neuron/neuronx-distributed.git
""",
            kind="shell",
        ),
    ),
)
RULES = (LEGACY_REFERENCE,)
HANDLER = None  # found by the scan of each output (`scan.py`), after every rule has run

_NON_XLA_NAMES = sorted(name for name in DROPPED_VARIABLES if not name.startswith("XLA_"))


def _nxd_inference(code: str) -> bool:
    """Code written for NxD Inference (it imports neuronx_distributed_inference) rather than optimum-neuron."""
    return "neuronx_distributed_inference" in code and "optimum" not in code


PATTERNS = (
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\boptimum\.(?:exporters\.)?neuron\b|\bfrom\s+optimum\s+import\s+neuron\b"),
        ("optimum",),
        "`{0}` is optimum-neuron, which TorchNeuron replaces",
        'use the Transformers / TRL / Diffusers class on device "neuron" (docs/reference/rules.md lists the targets)',
        subject="optimum.neuron",
    ),
    # Before the package name it holds: a script downloaded from optimum-neuron's repository is code to migrate.
    Pattern(
        LEGACY_REFERENCE,
        re.compile(
            r"https?://(?:raw\.githubusercontent\.com|github\.com)/huggingface/optimum-neuron/[^\s\"'<>]*?"
            r"\.(?:py|sh|ipynb)\b"
        ),
        ("huggingface/optimum-neuron/",),
        "`{0}` is a script of the optimum-neuron repository, downloaded as it is there: not the copy this run "
        "migrated (what it imports is read only once it is here)",
        "download it once, migrate it with neuron-migrate and run the migrated copy instead of downloading it "
        "each time",
        subject="optimum-neuron script",
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\boptimum[-_]neuron\b(?:\[\w+(?:,\w+)*\])?"),
        ("optimum",),
        "`{0}` installs or names optimum-neuron, which TorchNeuron replaces",
        f"install torch-neuronx from the Neuron pip repository with {' and '.join(PINS)} instead",
        subject="optimum-neuron",
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\btorch[-_]xla\b"),
        ("torch_xla", "torch-xla"),
        "`{0}` is PyTorch/XLA, which TorchNeuron does not use (Transformers takes the XLA path when it is importable)",
        'remove it; the device is "neuron" and torch.distributed / torch.compile replace its APIs',
        subject="torch_xla",
    ),
    # Before NxD's: `neuronx-distributed-inference` holds `neuronx-distributed`.
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\bneuronx[-_]distributed[-_]inference\b"),
        ("neuronx",),
        "`{0}` is NxD Inference, the XLA-flow inference library, which TorchNeuron does not use",
        'load the original checkpoint with transformers.AutoModelForCausalLM on device "neuron" with a static '
        "cache (NM101), or serve it with vLLM Neuron",
        subject="neuronx_distributed_inference",
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\bneuronx[-_]distributed\b"),
        ("neuronx",),
        "`{0}` is NeuronX Distributed, the XLA-flow parallel library",
        "use DistributedConfig(tp_size=..., fsdp_size=...) / DTensor with torchrun",
        subject="neuronx_distributed",
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\bneuronperf\b"),
        ("neuronperf",),
        "`{0}` is the Neuron SDK's benchmarking package, which measures models compiled ahead of time for the "
        "XLA flow (`torch_neuronx.trace`); TorchNeuron does not ship it",
        "measure the migrated script on the device instead (`neuron-migrate bench SCRIPT`: step time, latency, "
        "throughput)",
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\blibneuronxla\b"),
        ("libneuronxla",),
        "`{0}` is the Neuron plugin of PyTorch/XLA, which TorchNeuron does not use",
        'remove it: the device is "neuron", registered by torch-neuronx',
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\btransformers[-_]neuronx\b"),
        ("transformers_neuronx", "transformers-neuronx"),
        "`{0}` is transformers-neuronx, the XLA-era inference library (`LlamaForSampling`, `to_neuron()`), "
        "which TorchNeuron does not use",
        'load the original checkpoint with transformers.AutoModelForCausalLM on device "neuron" with a static '
        "cache (NM101), or serve it with vLLM Neuron",
        subject="transformers_neuronx",
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\bvllm\.entrypoints\.neuron_multi_node\b|\bNEURON_MULTI_NODE\b"),
        ("neuron_multi_node", "NEURON_MULTI_NODE"),
        "`{0}` belongs to the multi-node launch of vLLM's former in-tree Neuron worker (transformers-neuronx / NxD "
        "Inference), which vLLM no longer ships",
        "serve with the vLLM Neuron plugin (`vllm serve` on trn2 / trn3) and set up multi-node serving as its "
        "documentation describes",
        subject="vllm.entrypoints.neuron_multi_node",
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\bneuron_parallel_compile\b"),
        ("neuron_parallel_compile",),
        "`{0}` pre-compiles graphs for the XLA flow; TorchNeuron compiles just in time",
        "delete the compile-only run and keep the training run once",
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\boptimum-cli\s+(?:export\s+)?neuron\b"),
        ("optimum-cli",),
        "`{0}` exports or manages optimum-neuron artifacts",
        'load the original checkpoint with Transformers on device "neuron" (see NM452-NM455)',
        subject="optimum-cli neuron",
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\bXLA_(?:USE|DOWNCAST)_BF16\b"),
        ("_BF16",),
        # Both variables are one switch: one TODO where a block reads both.
        "`XLA_USE_BF16` / `XLA_DOWNCAST_BF16` are the XLA flow's bf16 switches, which nothing reads on TorchNeuron",
        "load with dtype=torch.bfloat16 or train with bf16=True (--bf16) instead",
        subject="XLA_USE_BF16/XLA_DOWNCAST_BF16",
        strings_only=True,
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(
            rf"\b(?:PT_)?XLA_(?!(?:USE|DOWNCAST)_BF16\b)[A-Z0-9_]+\b|\b(?:{'|'.join(_NON_XLA_NAMES)})\b"
        ),
        ("XLA_", *_NON_XLA_NAMES),
        "`{0}` is read only by the XLA / NxD flow",
        "remove it: nothing reads it on TorchNeuron",
        strings_only=True,
        foreign=other_xla_frontend,
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\bRUN_NEURON_PARALLEL_COMPILE\b"),
        ("RUN_NEURON_PARALLEL_COMPILE",),
        "`{0}` makes the Neuron training container run the job under neuron_parallel_compile, a compile-only "
        "run whose results are placeholders; TorchNeuron compiles just in time, so this job would now train in full",
        "remove the compile-only job (this environment and its fit()) and keep the training job once",
        strings_only=True,
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(rf"\b(?:{'|'.join(MANUAL_VARIABLES)})\b"),
        tuple(MANUAL_VARIABLES),
        "`{0}` is a setting of the XLA-flow compiler (as in a SageMaker job's environment)",
        "remove it, or set what TorchNeuron reads instead (see the TorchNeuron environment variable reference)",
        strings_only=True,
        torchneuron_setting=True,
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"""(?<![\w"'])[rRuU]?(["'])(?:xla(?::\d+)?|(?:pjrt|xla)://[^"']*)\1"""),
        ("xla", "pjrt"),
        "{0} is a PyTorch/XLA device or rendezvous",
        'use "neuron" for the device and drop the init_method (torchrun sets the rendezvous)',
        subject='"xla"',
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\.neuron_config\b"),
        (".neuron_config",),
        "`.neuron_config` is an optimum-neuron attribute that Transformers models do not have",
        "read the value from model.config / model.generation_config or from your own settings",
        foreign=lambda found, code: _nxd_inference(code),
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\.neuron_config\b"),
        (".neuron_config",),
        "`.neuron_config` is an attribute of NxD Inference (neuronx-distributed-inference) models and configs, "
        "which Transformers models do not have",
        "read the value from model.config / model.generation_config or from your own settings; the NxD "
        "Inference model code itself has no TorchNeuron port: load the Transformers model of this architecture",
        foreign=lambda found, code: not _nxd_inference(code),
        whole_file=True,
    ),
    Pattern(
        LEGACY_REFERENCE,
        # `config.neuron["batch_size"]`, `getattr(model.config, "neuron")` (not `neuron_batch_size`: below).
        re.compile(r"""\bconfig\.neuron\b|\bgetattr\(\s*[\w.]*config\s*,\s*(["'])neuron\1"""),
        ("config.neuron", "config,"),
        "`config.neuron` is the block optimum-neuron writes into a compiled model's config.json; a Transformers "
        "checkpoint's config has none",
        "use the batch size / sequence length your script sets itself (the tokenizer's padding, max_cache_len)",
        subject="config.neuron",
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\.neuron_(?:batch_size|sequence_length|num_cores)\b"),
        (".neuron_",),
        "`{0}` is a config attribute only optimum-neuron sets",
        "use the batch size / max_cache_len your script sets itself",
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\bpush_to_hub\s*\((?:[^()]|\([^()]*\))*?\brepository_id\s*="),
        ("repository_id",),
        "`push_to_hub(save_dir, repository_id=...)` is optimum-neuron's exported-model upload",
        "call model.push_to_hub(repo_id) on the Transformers model (its first argument is the repo id)",
        subject="push_to_hub(repository_id=...)",
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\bray\.train\.torch\.xla\b|\bTorchXLAConfig\b"),
        ("TorchXLAConfig", "torch.xla"),
        "`{0}` is Ray Train's PyTorch/XLA backend (an `xla` process group, neuron_parallel_compile runs)",
        'use ray.train.torch.TorchConfig(backend="neuron") (the process group TorchNeuron registers; check that '
        "your Ray version passes it through) and run the training once",
        subject="TorchXLAConfig",
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(rf"(?<![\w./-]){COMPILED_HUB_REPO}"),  # not a URL's path (github.com/aws-neuron/...)
        ("aws-neuron/",),
        "`{0}` is a Hub repository of models compiled by optimum-neuron, which Transformers / Diffusers cannot "
        "load",
        f'download and load the original checkpoint it was exported from ({ORIGINAL_CHECKPOINT_RECORD}) on device "neuron"',
        strings_only=True,
        # The file loads compiled models through NM106's helper, which reads that record: the ids it names are
        # that helper's (a tokenizer loads from the compiled repository as it is).
        foreign=lambda found, code: f"{FROM_NEURON_EXPORT}(" in code,
    ),
    Pattern(
        LEGACY_REFERENCE,
        re.compile(r"\bTasksManager\b"),
        ("TasksManager",),
        "`TasksManager` resolves optimum export tasks, which TorchNeuron does not need",
        "load the Transformers Auto class for the task directly",
    ),
)
