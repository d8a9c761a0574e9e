"""The ``neuron`` device: PyTorch's PrivateUse1 backend renamed, run by the C++ backend in backend.cpp.

A tensor on ``neuron:N`` is a plain PyTorch tensor of the PrivateUse1 backend, as on a trn2; its memory is host
memory. Every ATen op on it reaches backend.cpp's kernels or its fallback, which runs the op's CPU kernel on
that memory. Python adds what TorchNeuron decides itself: the fused attention kernel it picks, integer
histograms, and the record of the ops that its rules (``neuron_rules.json``) name.
"""

from __future__ import annotations

import torch

from standin import native, sim_backend

DEVICE_TYPE = "neuron"
aten = torch.ops.aten
# The ops among those that ran on the device that TorchNeuron runs on the CPU in eager mode (neuron_rules.json),
# by schema name, for torch_neuronx.get_fallback_ops(); and the ops that ran through this module's kernels.
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
    """Schema names of the ops that ran on the device (the backend's fallback and this module's kernels) since
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


# --- what TorchNeuron decides itself -----------------------------------------------------------------------


def _additive(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A boolean attention mask as the additive bias PyTorch hands a fused kernel."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.zeros_like(mask, dtype=dtype).masked_fill_(~mask, float("-inf"))


def _sdp_overrideable(query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False, return_debug_mask=False,
                      *, scale=None):  # fmt: skip
    EXECUTED_HERE.add("aten::_scaled_dot_product_fused_attention_overrideable")
    attn_bias = _additive(attn_bias, query.dtype)
    out, logsumexp = aten._scaled_dot_product_flash_attention_for_cpu.default(
        host(query), host(key), host(value), dropout_p, is_causal,
        attn_mask=None if attn_bias is None else host(attn_bias), scale=scale,
    )  # fmt: skip
    device = query.device
    empty = torch.empty(0, dtype=torch.long, device=device)
    return (on_device(out, device), on_device(logsumexp, device), empty, empty, query.shape[2], key.shape[2],
            empty, empty, torch.empty(0, dtype=query.dtype, device=device))  # fmt: skip


def _sdp_overrideable_backward(grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp,
                               cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed,
                               philox_offset, *, scale=None):  # fmt: skip
    EXECUTED_HERE.add("aten::_scaled_dot_product_fused_attention_overrideable_backward")
    attn_bias = _additive(attn_bias, query.dtype)
    grads = aten._scaled_dot_product_flash_attention_for_cpu_backward.default(
        host(grad_out), host(query), host(key), host(value), host(out), host(logsumexp), dropout_p, is_causal,
        attn_mask=host(attn_bias) if attn_bias is not None and attn_bias.numel() else None, scale=scale,
    )  # fmt: skip
    return (*(on_device(grad, query.device) for grad in grads), None)


def _histc(tensor, bins=100, min=0, max=0):  # noqa: A002  (the schema's names)
    """Integer histograms, as a device computes them (the CPU kernel takes floating point only; Transformers'
    MoE routing on a device counts expert ids with torch.histc)."""
    EXECUTED_HERE.add("aten::histc")
    _record_rule("aten::histc")
    data = host(tensor)
    counts = torch.histc(data if data.is_floating_point() else data.float(), bins, min, max)
    return on_device(counts.to(tensor.dtype), tensor.device)


_library: torch.library.Library | None = None


def register(device_count: int, first_device: int) -> None:
    """Start the backend with its NeuronCores and current device, and register the Python kernels."""
    global _library
    backend().start(device_count, first_device, _has_rule, _record_rule, _dtype_rule)
    _library = torch.library.Library("aten", "IMPL")  # noqa: TOR901  (kept alive: the registrations live with it)
    # The fused attention kernel that backend.cpp's choice picks, as TorchNeuron picks it.
    for name, kernel in (("_scaled_dot_product_fused_attention_overrideable", _sdp_overrideable),
                         ("_scaled_dot_product_fused_attention_overrideable_backward", _sdp_overrideable_backward),
                         ("histc", _histc)):  # fmt: skip
        _library.impl(name, kernel, "PrivateUse1")
