"""Environment variables of the XLA / NxD flow and what becomes of them (migration map §3.3); shared by
the Python rules and the shell family."""

from __future__ import annotations

# Variables only the XLA / NxD flow reads (migration map §3.3); any XLA_* / PT_XLA_* is torch_xla's.
DROPPED_VARIABLES: dict[str, str] = {
    "XLA_USE_BF16": "XLA-only casting flag; load the model with dtype=torch.bfloat16 or train with bf16=True",
    "XLA_DOWNCAST_BF16": "XLA-only casting flag; load the model with dtype=torch.bfloat16 or train with bf16=True",
    "NEURON_FUSE_SOFTMAX": "compiler toggle of the XLA/NxD flow",
    "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS": "no longer enables asynchronous execution (Neuron 2.31+)",
    "NEURON_NUM_RECENT_MODELS_TO_KEEP": "runtime tuning of the XLA flow",
    "NEURON_RT_ONE_TMPBUF_PAGE_SIZE_MB": "runtime tuning of the XLA flow",
    "NEURON_RT_STOCHASTIC_ROUNDING_EN": "runtime tuning of the XLA flow",
    "NEURON_PLATFORM_TARGET_OVERRIDE": "ahead-of-time compilation for another target; TorchNeuron compiles on the "
    "device it runs on",
    "NEURON_EXTRACT_GRAPHS_ONLY": "only meaningful under neuron_parallel_compile, which TorchNeuron does not have",
    "NEURON_PARALLEL_COMPILE": "only meaningful under neuron_parallel_compile, which TorchNeuron does not have",
}
DROPPED_PREFIXES = ("XLA_", "PT_XLA_")
MANUAL_VARIABLES: dict[str, str] = {
    "NEURON_CC_FLAGS": "compiler flags tuned for the XLA/NxD graph flow, and whether TorchNeuron's neuron "
    "backend reads them is not documented; remove them, or keep only flags the TorchNeuron compiler "
    "reference lists",
    "NEURON_COMPILE_CACHE_URL": "the XLA-flow compile cache location; set TorchNeuron's NEFF cache variables "
    "(see the TorchNeuron environment variable reference) instead",
}
PRECOMPILE_VARIABLES = frozenset({"NEURON_EXTRACT_GRAPHS_ONLY", "NEURON_PARALLEL_COMPILE"})


def dropped_reason(variable: str) -> str | None:
    if variable in DROPPED_VARIABLES:
        return DROPPED_VARIABLES[variable]
    if variable.startswith(DROPPED_PREFIXES):
        return "PyTorch/XLA setting"
    return None
