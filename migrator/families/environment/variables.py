"""Environment variables of the XLA / NxD flow and what becomes of them on TorchNeuron; shared by the Python
rules and the shell family."""

from __future__ import annotations

import re

# Variables only the XLA / NxD flow reads (each entry says what it did there); any XLA_* / PT_XLA_* is
# torch_xla's. The Neuron runtime's own variables (NEURON_RT_*: stochastic rounding, visible cores, in-flight
# requests...) stay: TorchNeuron runs on the same runtime (libnrt), which reads them (TorchNeuron environment
# variable reference).
DROPPED_VARIABLES: dict[str, str] = {
    "XLA_USE_BF16": "XLA-only casting flag; load the model with dtype=torch.bfloat16 or train with bf16=True",
    "XLA_DOWNCAST_BF16": "XLA-only casting flag; load the model with dtype=torch.bfloat16 or train with bf16=True",
    "NEURON_FUSE_SOFTMAX": "compiler toggle of the XLA/NxD flow",
    "NEURON_NUM_RECENT_MODELS_TO_KEEP": "graph cache tuning of the XLA flow",
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


# Other XLA frontends read some XLA_* variables too: XLA_PYTHON_CLIENT_* is JAX's client (torch_xla does not
# read it), XLA_FLAGS is read by every frontend. A file that is JAX or TensorFlow code, or passes flags of
# XLA's GPU backend, sets XLA_FLAGS for that frontend (a GPU job in the same repository), not for Neuron.
_OTHER_FRONTEND_ONLY = "XLA_PYTHON_CLIENT_"
_OTHER_FRONTEND = re.compile(r"\b(?:jax|jaxlib|flax|tensorflow)\b|--xla_gpu_")


def other_xla_frontend(variable: str, code: str) -> bool:
    """Whether `variable`, in a file of text `code`, is set for JAX / TensorFlow rather than PyTorch/XLA."""
    if variable.startswith(_OTHER_FRONTEND_ONLY):
        return True
    return variable == "XLA_FLAGS" and _OTHER_FRONTEND.search(code) is not None


def dropped_reason(variable: str, code: str) -> str | None:
    """Why `variable`, set in a file of text `code`, goes (None: it stays)."""
    if other_xla_frontend(variable, code):
        return None
    if variable in DROPPED_VARIABLES:
        return DROPPED_VARIABLES[variable]
    if variable.startswith(DROPPED_PREFIXES):
        return "PyTorch/XLA setting"
    return None


# Code written for TorchNeuron already (`torch.compile(..., backend="neuron")`, the "neuron" device) with nothing
# of the XLA flow in it: the compiler and cache variables it sets are set for TorchNeuron, on purpose.
_TORCHNEURON = re.compile(
    r"""backend\s*=\s*["']neuron["']|torch\.device\(\s*["']neuron["']|device_map\s*=\s*["']neuron["']"""
    r"""|\.to\(\s*["']neuron["']"""
)
_XLA_FLOW = re.compile(
    r"\b(?:torch_xla|optimum\.neuron|neuronx_distributed|transformers_neuronx|torch_neuron|neuron_parallel_compile)\b"
    r"|\b(?:PT_)?XLA_[A-Z_]+\b|\bNEURON_(?:EXTRACT_GRAPHS_ONLY|PARALLEL_COMPILE|FUSE_SOFTMAX)\b"
)


def torchneuron_code(code: str) -> bool:
    """Whether `code` (a file as its author wrote it) already targets TorchNeuron and nothing of the XLA flow."""
    return _TORCHNEURON.search(code) is not None and _XLA_FLOW.search(code) is None


# Asynchronous weight loading is not supported on TorchNeuron; this variable turns it off.
ASYNC_LOAD_VARIABLE = "HF_DEACTIVATE_ASYNC_LOAD"
