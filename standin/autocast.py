"""``torch.autocast("neuron")`` on the stand-in: PyTorch's autocast policy for the ``neuron`` device key.

Every op falls through the AutocastPrivateUse1 key, except the ops autocast runs in lower precision (matrix
products, convolutions, attention: cast to the autocast dtype) and those it runs in float32 (reductions, norms,
losses, exp/log family), the policy PyTorch applies on CUDA. TorchNeuron registers its own policy; where it
differs, numerics on a trn2 differ (docs/reference/standin.md).
"""

from __future__ import annotations

import torch

KEY = "AutocastPrivateUse1"
DEVICE_TYPE = "neuron"
LOWER_PRECISION = (
    "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d.input",
    "conv_transpose3d.input", "convolution", "prelu", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv",
    "linear", "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot", "scaled_dot_product_attention",
)  # fmt: skip
FLOAT32 = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
    "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar", "softplus", "layer_norm", "group_norm",
    "frobenius_norm.dim", "nuclear_norm", "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss",
    "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss",
    "mse_loss", "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
    "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
)  # fmt: skip
_EXCLUDE = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)
_libraries: list[torch.library.Library] = []  # kept alive: the registrations live with them


def _cast(value, dtype: torch.dtype):
    if isinstance(value, torch.Tensor):
        eligible = (
            value.is_floating_point() and value.dtype != torch.float64 and value.device.type == DEVICE_TYPE
        )
        return value.to(dtype) if eligible and value.dtype != dtype else value
    if isinstance(value, list | tuple):
        return type(value)(_cast(item, dtype) for item in value)
    return value


def _kernel(op, lower_precision: bool):
    def autocast_kernel(*args, **kwargs):
        dtype = torch.get_autocast_dtype(DEVICE_TYPE) if lower_precision else torch.float32
        args = _cast(args, dtype)
        kwargs = {name: _cast(value, dtype) for name, value in kwargs.items()}
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            return op(*args, **kwargs)

    return autocast_kernel


def register() -> None:
    fallthrough = torch.library.Library("_", "IMPL")  # noqa: TOR901
    fallthrough.fallback(torch.library.fallthrough_kernel, KEY)
    policy = torch.library.Library("aten", "IMPL")  # noqa: TOR901
    for names, lower_precision in ((LOWER_PRECISION, True), (FLOAT32, False)):
        for name in names:
            packet, _, overload = name.partition(".")
            op = getattr(getattr(torch.ops.aten, packet), overload or "default")
            policy.impl(name, _kernel(op, lower_precision), KEY)
    _libraries.extend((fallthrough, policy))
