"""The device's kernels written in Python: what TorchNeuron decides itself (the fused attention kernel it picks,
integer histograms) and the fused RNN cells that PyTorch's LSTM and GRU call on any accelerator (whose only
kernels are CUDA's). Each computes on the host memory of its device tensors (``device.host``) or with device ops.
"""

from __future__ import annotations

import torch

from standin import device
from standin.device import EXECUTED_HERE, aten, host, on_device

_library: torch.library.Library | None = None


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
    place = query.device
    empty = torch.empty(0, dtype=torch.long, device=place)
    return (on_device(out, place), on_device(logsumexp, place), empty, empty, query.shape[2], key.shape[2],
            empty, empty, torch.empty(0, dtype=query.dtype, device=place))  # fmt: skip


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
    device._record_rule("aten::histc")
    data = host(tensor)
    counts = torch.histc(data if data.is_floating_point() else data.float(), bins, min, max)
    return on_device(counts.to(tensor.dtype), tensor.device)


# --- the fused RNN cells: the gate arithmetic of CUDA's kernels, with their workspace layouts -----------------


def _gates(input_gates, hidden_gates, input_bias, hidden_bias):
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias + hidden_bias
    return gates


def _lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    EXECUTED_HERE.add("aten::_thnn_fused_lstm_cell")
    in_gate, forget, cell, out = _gates(input_gates, hidden_gates, input_bias, hidden_bias).chunk(4, 1)
    in_gate, forget, cell, out = in_gate.sigmoid(), forget.sigmoid(), cell.tanh(), out.sigmoid()
    cy = forget * cx + in_gate * cell
    return out * cy.tanh(), cy, torch.cat([in_gate, forget, cell, out], 1)


def _lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    EXECUTED_HERE.add("aten::_thnn_fused_lstm_cell_backward_impl")
    in_gate, forget, cell, out = workspace.chunk(4, 1)
    tanh_cy = cy.tanh()
    grad_c = torch.zeros_like(cy) if grad_cy is None else grad_cy
    if grad_hy is not None:
        grad_c = grad_c + grad_hy * out * (1 - tanh_cy * tanh_cy)
    grad_out = torch.zeros_like(out) if grad_hy is None else grad_hy * tanh_cy * out * (1 - out)
    grad_gates = torch.cat([grad_c * cell * in_gate * (1 - in_gate), grad_c * cx * forget * (1 - forget),
                            grad_c * in_gate * (1 - cell * cell), grad_out], 1)  # fmt: skip
    return grad_gates, grad_c * forget, grad_gates.sum(0) if has_bias else None


def _gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    EXECUTED_HERE.add("aten::_thnn_fused_gru_cell")
    if input_bias is not None:
        input_gates, hidden_gates = input_gates + input_bias, hidden_gates + hidden_bias
    input_reset, input_update, input_new = input_gates.chunk(3, 1)
    hidden_reset, hidden_update, hidden_new = hidden_gates.chunk(3, 1)
    reset = (input_reset + hidden_reset).sigmoid()
    update = (input_update + hidden_update).sigmoid()
    new = (input_new + reset * hidden_new).tanh()
    return new + update * (hx - new), torch.cat([reset, update, new, hx, hidden_new], 1)


def _gru_cell_backward(grad_hy, workspace, has_bias):
    EXECUTED_HERE.add("aten::_thnn_fused_gru_cell_backward")
    reset, update, new, hx, hidden_new = workspace.chunk(5, 1)
    grad_new = grad_hy * (1 - update) * (1 - new * new)
    grad_update = grad_hy * (hx - new) * update * (1 - update)
    grad_reset = grad_new * hidden_new * reset * (1 - reset)
    grad_input_gates = torch.cat([grad_reset, grad_update, grad_new], 1)
    grad_hidden_gates = torch.cat([grad_reset, grad_update, grad_new * reset], 1)
    biases = (grad_input_gates.sum(0), grad_hidden_gates.sum(0)) if has_bias else (None, None)
    return grad_input_gates, grad_hidden_gates, grad_hy * update, *biases


def register() -> None:
    global _library
    _library = torch.library.Library("aten", "IMPL")  # noqa: TOR901  (kept alive: the registrations live with it)
    for name, kernel in (("_scaled_dot_product_fused_attention_overrideable", _sdp_overrideable),
                         ("_scaled_dot_product_fused_attention_overrideable_backward", _sdp_overrideable_backward),
                         ("histc", _histc),
                         ("_thnn_fused_lstm_cell", _lstm_cell),
                         ("_thnn_fused_lstm_cell_backward_impl", _lstm_cell_backward),
                         ("_thnn_fused_gru_cell", _gru_cell),
                         ("_thnn_fused_gru_cell_backward", _gru_cell_backward)):  # fmt: skip
        _library.impl(name, kernel, "PrivateUse1")
