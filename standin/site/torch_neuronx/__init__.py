"""The stand-in's ``torch_neuronx`` (neuron-migrate, standin): importable only where the stand-in is
switched on (its directory is on the path), so that ``import torch_neuronx`` and
``transformers.utils.is_torch_neuron_available()`` behave as on a trn2. Not TorchNeuron: see docs/reference/standin.md."""

import torch

import standin as _standin

_standin.activate()

from standin import device as _device  # noqa: E402
from standin.runtime import (  # noqa: E402, F401  (torch_neuronx's public functions)
    Event,
    Stream,
    current_device,
    current_stream,
    default_stream,
    device,
    device_count,
    empty_cache,
    get_device_properties,
    get_dynamo_metrics,
    max_memory_allocated,
    max_memory_reserved,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_dynamo_metrics,
    reset_peak_memory_stats,
    set_device,
    set_stream,
    stream,
    synchronize,
)

# A local version label marks everything measured with it as the stand-in's.
__version__ = "0.0.0+standin"
STANDIN = True
neuron = torch.neuron


def is_neuron_runtime_initialized() -> bool:
    return True


def get_fallback_ops() -> list[str]:
    """Ops that ran on the CPU instead of the device (TorchNeuron's eager CPU fallback, neuron_rules.json)."""
    return sorted(_device.FALLBACK)


def get_executed_ops() -> list[str]:
    return _device.executed_ops()


def clear_op_tracking() -> None:
    _device.clear_op_tracking()
