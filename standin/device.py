"""The ``neuron`` device: PyTorch's PrivateUse1 backend renamed, run by the C++ backend (``csrc/``).

A tensor on ``neuron:N`` is a plain PyTorch tensor of the PrivateUse1 backend, as on a trn2; its memory is host
memory. Every ATen op on it reaches the backend's kernels (or the Python ones of ``kernels.py``) or its fallback,
which runs the op's CPU kernel on that memory. This module starts the backend, gives the rest of the stand-in its
functions, and records the ops that the rules (``neuron_rules.json``) name.
"""

from __future__ import annotations

import torch

from standin import native, sim_backend

DEVICE_TYPE = "neuron"
aten = torch.ops.aten
# The ops among those that ran on the device that TorchNeuron runs on the CPU in eager mode (neuron_rules.json),
# by schema name, for torch_neuronx.get_fallback_ops(); and the ops that ran through the Python kernels (kernels.py).
FALLBACK: set[str] = set()
EXECUTED_HERE: set[str] = set()


def backend():
    """The compiled backend (native.load), whose functions the stand-in's Python calls."""
    return native.load()


def host(tensor: torch.Tensor) -> torch.Tensor:
    """A device tensor as a CPU tensor on the same memory (a CPU tensor as it is)."""
    return backend().host(tensor)


def on_device(cpu: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CPU tensor as a tensor on ``device`` on the same memory."""
    return backend().device_tensor(cpu, device.index if device.index is not None else current_device())


def current_device() -> int:
    return backend().current_device()


def generator(index: int) -> torch.Generator:
    """The default generator of ``neuron:index``: random ops on the device draw from it, apart from the CPU's."""
    return backend().default_generator(index)


def executed_ops() -> list[str]:
    """Schema names of the ops that ran on the device (the backend's kernels and fallback, and kernels.py) since
    clear_op_tracking."""
    return sorted({*backend().executed_ops(), *EXECUTED_HERE})


def clear_op_tracking() -> None:
    backend().clear_executed_ops()
    FALLBACK.clear()
    EXECUTED_HERE.clear()


def _op(name: str):
    """``aten::add.Tensor`` as ``torch.ops.aten.add.Tensor``."""
    namespace, _, qualified = name.partition("::")
    packet, _, overload = qualified.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), packet), overload or "default")


def _op_rule(name: str) -> dict | None:
    """The rule that names ``aten::op.overload`` (by overload, else by op), or None."""
    rules = sim_backend._op_rule_index()
    dotted = name.replace("::", ".")
    return rules.get(dotted) or rules.get(".".join(dotted.split(".")[:2]))


def _has_rule(name: str) -> bool:
    """Asked by the backend at an op's first call: does a rule name it (then each call is recorded)?"""
    return _op_rule(name) is not None


def _record_rule(name: str) -> None:
    """One eager call of an op: recorded where a rule names it."""
    rule = _op_rule(name)
    if rule is None:
        return
    op = _op(name)
    sim_backend.check_op_and_dtypes(op, (), "eager")
    if rule.get("eager_action", rule["action"]) == "cpu-fallback":
        FALLBACK.add(op._schema.name)


def _dtype_rule(dtype: torch.dtype) -> bool:
    """Asked by the backend when it allocates a dtype: a dtype a rule names is recorded at each allocation."""
    if str(dtype) not in sim_backend._dtype_rule_index():
        return False
    sim_backend.check_op_and_dtypes(aten.empty.memory_format, [torch.empty(0, dtype=dtype)], "eager")
    return True


def register(device_count: int, first_device: int) -> None:
    """Start the backend with its NeuronCores and the current device every thread starts on (after PyTorch's
    PrivateUse1 backend is renamed ``neuron``: runtime.register)."""
    backend().start(device_count, first_device, _has_rule, _record_rule, _dtype_rule)
