"""The ``neuron`` device: PyTorch's PrivateUse1 backend renamed, with tensors whose data is a CPU tensor.

A tensor on ``neuron:N`` is a :class:`NeuronTensor`: a wrapper subclass with its own sizes, strides, dtype and
device, holding the CPU tensor ``_cpu`` that has its data. Every ATen op on it reaches
``NeuronTensor.__torch_dispatch__``, which runs the op on the CPU tensors and wraps what comes back; the few
entry points that reach the backend without a NeuronTensor (allocation, copies between devices) are
PrivateUse1 kernels. ``__tensor_flatten__``/``__tensor_unflatten__`` let Dynamo and AOT autograd trace it, so a
compiled graph is the ATen graph of the CPU tensors inside.

The dispatch runs once per op, so it is written for speed: one dictionary lookup per op for everything known
about it (``_op_info``), flat loops instead of pytree maps, no per-op allocation beyond the result's wrapper.
"""

from __future__ import annotations

import threading

import torch
from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

from compat_matrix import sim_backend

CPU = torch.device("cpu")
DEVICE_TYPE = "neuron"
aten = torch.ops.aten
_Tensor = torch.Tensor
_make_wrapper = torch.Tensor._make_wrapper_subclass
_is_inference_mode_enabled = torch.is_inference_mode_enabled
_STRIDED = torch.strided


class _State(threading.local):
    current: int = 0  # torch.neuron.current_device(), per thread as on CUDA


STATE = _State()
# The ops that ran on the device (since clear_op_tracking), for torch_neuronx.get_executed_ops(); and the ops
# among them that TorchNeuron runs on the CPU in eager mode (neuron_rules.json), by schema name, for
# torch_neuronx.get_fallback_ops().
EXECUTED: dict = {}
FALLBACK: set[str] = set()


class NeuronTensor(torch.Tensor):
    """A tensor on ``neuron:N`` whose data is the CPU tensor ``_cpu``."""

    _cpu: torch.Tensor
    _device: torch.device
    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, cpu: torch.Tensor, device: torch.device, requires_grad: bool = False):
        return _wrap(cpu, device, requires_grad)

    def __tensor_flatten__(self):
        return ["_cpu"], self._device

    @staticmethod
    def __tensor_unflatten__(inner, device, outer_size, outer_stride):
        return NeuronTensor(inner["_cpu"], device)

    def __coerce_same_metadata_as_tangent__(self, expected_metadata, expected_type=None):
        # A compiled graph's output that Dynamo traced as a plain device tensor (made by a factory inside the
        # graph) comes back as this wrapper; as the tangent of that output, the backward graph gets its data.
        if expected_type is NeuronTensor or expected_type is None:
            return self
        return self._cpu

    def __format__(self, format_spec: str) -> str:
        # torch.Tensor formats a 0-dim tensor through .item() only for plain tensors.
        if self.dim() == 0:
            return self.item().__format__(format_spec)
        return super().__format__(format_spec)

    def __repr__(self, *, tensor_contents=None) -> str:
        # As a device tensor prints: "tensor([...], device='neuron:0')", not the subclass's name.
        text = torch._tensor_str._str(self, tensor_contents=tensor_contents)
        prefix = f"{type(self).__name__}("
        if not text.startswith(prefix):
            return text
        return "tensor(" + text[len(prefix) :].replace("\n" + " " * len(prefix), "\n" + " " * len("tensor("))

    # Outside compilation, storage identity and addresses are the data's: libraries tell shared (tied) weights
    # apart by them (safetensors, save_pretrained). The wrapper has no storage of its own; Dynamo describes
    # it as such when it fakes the tensor.
    def untyped_storage(self):
        if torch.compiler.is_compiling():
            return super().untyped_storage()
        return self._cpu.untyped_storage()

    def data_ptr(self) -> int:
        if torch.compiler.is_compiling():
            return super().data_ptr()
        return self._cpu.data_ptr()

    def tolist(self):
        return self._cpu.tolist()

    def __reduce_ex__(self, protocol):
        # As PyTorch saves a device tensor without host storage: its CPU data and device, restored with
        # torch.load's map_location (and allowed by weights_only loading).
        rebuild = torch._utils._rebuild_device_tensor_from_cpu_tensor
        return rebuild, (self._cpu.detach(), self.dtype, str(self.device), self.requires_grad)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        info = _OP_INFO.get(id(func))  # by id: OpOverload.__hash__ is a Python function
        if info is None:
            info = _op_info(func)
        if info[0] is not None:
            return info[0](func, info, args, kwargs or {})
        return _run(func, info, args, kwargs)


def _run(func, info: tuple, args: tuple, kwargs: dict | None):
    """Run ``func`` on the CPU tensors inside, and wrap what it returns on the device it came from."""
    device = None
    unwrapped = []
    for arg in args:
        kind = type(arg)
        if kind is NeuronTensor:
            if device is None:
                device = arg._device
            unwrapped.append(arg._cpu)
        elif kind is list or kind is tuple:
            items = []
            for item in arg:
                if type(item) is NeuronTensor:
                    if device is None:
                        device = item._device
                    items.append(item._cpu)
                elif isinstance(item, _Tensor):
                    items.append(_other_tensor(item, func))
                else:
                    items.append(item)
            unwrapped.append(items)
        elif isinstance(arg, _Tensor):
            unwrapped.append(_other_tensor(arg, func))
        else:
            unwrapped.append(arg)
    if kwargs:
        cpu_kwargs, device = _host_kwargs(func, kwargs, device)
        if info[2] and cpu_kwargs.get("generator") is None:
            cpu_kwargs["generator"] = generator(device)
        out = func._op(*unwrapped, **cpu_kwargs)
    elif info[2]:
        out = func._op(*unwrapped, generator=generator(device))
    else:
        out = func._op(*unwrapped)
    if info[3] is not None:
        _record_eager_rule(func, info[3])
    if device is None or device is CPU:  # (not device.type: that property formats a new string per call)
        return out
    if info[1] >= 0:  # an in-place or out= op returns the tensor it wrote to
        return args[info[1]] if info[1] < len(args) else kwargs.get("out")
    if info[4] and _is_inference_mode_enabled() and not args[0].is_inference():
        # A view of an ordinary tensor is an ordinary tensor, in inference mode too (autograd then shares the
        # base's version counter with it, which an inference tensor cannot have): made outside inference mode.
        with torch._C._InferenceMode(False):
            return _wrap_all(out, device)
    if type(out) is _Tensor:  # one tensor, the common case
        return _wrap(out, device)
    return _wrap_all(out, device)


def _host_kwargs(func, kwargs: dict, device: torch.device | None) -> tuple[dict, torch.device | None]:
    """``kwargs`` with the CPU tensors inside, and the device the result goes to (``device`` if none says)."""
    cpu_kwargs = {}
    for name, value in kwargs.items():
        if type(value) is NeuronTensor:
            if device is None:
                device = value._device
            value = value._cpu
        elif name == "device":
            # A device argument names where the result goes: neuron keeps it wrapped, cpu (the constant
            # CPU, which no stand-in tensor has) does not.
            if value is not None and torch.device(value).type == DEVICE_TYPE:
                device = torch.device(value)
                value = CPU
            elif value is not None:
                device = CPU
        elif isinstance(value, _Tensor):
            value = _other_tensor(value, func)
        elif type(value) is list or type(value) is tuple:  # out=[...] of a foreach or split copy
            value = [_unwrap(item) if isinstance(item, _Tensor) else item for item in value]
            if device is None:
                device = next((item._device for item in kwargs[name] if type(item) is NeuronTensor), None)
        cpu_kwargs[name] = value
    return cpu_kwargs, device


def _wrap_all(out, device: torch.device):
    if type(out) is _Tensor or isinstance(out, _Tensor):
        return _wrap(out, device)
    if type(out) is tuple or type(out) is list:
        return type(out)(_wrap(o, device) if isinstance(o, _Tensor) else o for o in out)
    return out


def _wrap(cpu: torch.Tensor, device: torch.device, requires_grad: bool = False) -> NeuronTensor:
    """A NeuronTensor for ``cpu`` on ``device``; the dispatch calls it directly (no ``type.__call__``)."""
    # Positional: _make_wrapper_subclass(cls, size, strides, storage_offset, memory_format, dtype, layout,
    # device, pin_memory, requires_grad) parses faster so.
    tensor = _make_wrapper(NeuronTensor, cpu.size(), cpu.stride(), cpu.storage_offset(), None, cpu.dtype,
                           _STRIDED, device, False, requires_grad)  # fmt: skip
    tensor._cpu = cpu
    tensor._device = device  # read per op: cheaper than the .device property, which builds a new object
    return tensor


# Ops that take tensors from another device by design (copies, indices for indexing).
_CROSS_DEVICE_OPS = frozenset(
    {"aten::copy_", "aten::_to_copy", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::index",
     "aten::index_put", "aten::index_put_", "aten::_index_put_impl_", "aten::set_", "aten::lift_fresh"}
)  # fmt: skip


def _other_tensor(tensor: torch.Tensor, func) -> torch.Tensor:
    """A tensor argument that is not a NeuronTensor. A CPU scalar (0-dim) mixes with device tensors as on every
    device; another CPU tensor is an error there, and here. A plain tensor on ``neuron`` is a fake (or
    functional) tensor that a compiled region created with ``device="neuron"``: it is moved to the CPU side."""
    device = tensor.device
    if device.type == DEVICE_TYPE:
        return aten._to_copy.default(tensor, device=CPU)
    if device.type == "cpu" and tensor.dim() and func._schema.name not in _CROSS_DEVICE_OPS:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, "
            f"{DEVICE_TYPE}:{STATE.current} and cpu! (when checking argument for {func._schema.name})"
        )
    return tensor


_OP_INFO: dict = {}


def _op_info(func) -> tuple:
    """(special handler or None, index of the argument an in-place/out op returns or -1, takes a generator,
    eager rule or None, is a view), computed once per op."""
    schema = func._schema
    returned = -1
    if len(schema.returns) == 1 and schema.returns[0].alias_info is not None:
        alias = schema.returns[0].alias_info
        if alias.is_write:
            for index, argument in enumerate(schema.arguments):
                if argument.alias_info is not None and argument.alias_info.is_write:
                    returned = index if not argument.kwarg_only else len(schema.arguments)
                    break
    takes_generator = any(argument.name == "generator" for argument in schema.arguments)
    names = (str(func), str(func).rsplit(".", 1)[0])
    rules = sim_backend._op_rule_index()
    rule = next((rules[name] for name in names if name in rules), None)
    special = _SPECIAL.get(func)
    if special is None and torch._C._dispatch_has_kernel_for_dispatch_key(
        func.name(), "CompositeImplicitAutograd"
    ):
        special = _decompose
    info = (special, returned, takes_generator, rule, func.is_view)
    _OP_INFO[id(func)] = info
    EXECUTED[id(func)] = func
    return info


def clear_op_tracking() -> None:
    _OP_INFO.clear()
    EXECUTED.clear()
    FALLBACK.clear()


def _record_eager_rule(func, rule: dict) -> None:
    sim_backend.check_op_and_dtypes(func, (), "eager")
    if rule.get("eager_action", rule["action"]) == "cpu-fallback":
        FALLBACK.add(func._schema.name)


# --- random numbers: one generator per device, apart from the CPU's (torch.neuron.manual_seed seeds them) --

_generators: dict[int, torch.Generator] = {}


def generator(device: torch.device | None) -> torch.Generator:
    index = device.index if device is not None and device.index is not None else STATE.current
    found = _generators.get(index)
    if found is None:
        found = _generators[index] = torch.Generator()
        found.manual_seed(torch.initial_seed())
    return found


# --- special ops ---------------------------------------------------------------------------------------------


def _sdp_choice(func, info, args, kwargs):
    """Like TorchNeuron (its SdpBackendSelection), 4-D attention takes the ``overrideable`` fused kernel, here
    where the CPU would take its fused (flash) kernel; the rest takes the math decomposition."""
    query, key, value = (a._cpu for a in args[:3])
    mask = args[3] if len(args) > 3 else kwargs.get("attn_mask")
    cpu_args = (query, key, value, mask._cpu if isinstance(mask, NeuronTensor) else mask, *args[4:])
    cpu_choice = aten._fused_sdp_choice.default(*cpu_args, **kwargs)
    trainable_mask = mask is not None and mask.requires_grad
    overrideable = cpu_choice == 1 and query.dim() == 4 and not trainable_mask
    return 4 if overrideable else 0


def _sdp_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
                   enable_gqa=False):  # fmt: skip
    """``scaled_dot_product_attention`` on the device, above autograd. PyTorch picks its fused kernel through a
    per-device-type stub that only a C++ backend can fill, so eager attention on a Python backend would always
    take the math decomposition (two batched matmuls and a softmax, each saved for backward); this makes the
    choice ``_fused_sdp_choice`` makes, and runs the ``overrideable`` kernel as TorchNeuron does."""
    kwargs = {"scale": scale, "enable_gqa": enable_gqa}
    args = (query, key, value, attn_mask, dropout_p, is_causal)
    same_heads = query.dim() == 4 and query.size(1) == key.size(1) == value.size(1)
    # Dynamo's fake propagation may hand a plain fake key or value made on the device: the math path then.
    on_device = type(query) is NeuronTensor and type(key) is NeuronTensor and type(value) is NeuronTensor
    if same_heads and on_device and _sdp_choice(None, None, args, kwargs) == 4:
        if (
            attn_mask is not None and attn_mask.dtype == torch.bool
        ):  # as PyTorch hands a mask to a fused kernel
            attn_mask = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill_(~attn_mask, float("-inf"))
        return aten._scaled_dot_product_fused_attention_overrideable.default(
            query, key, value, attn_mask, dropout_p, is_causal, False, scale=scale
        )[0]
    return aten.scaled_dot_product_attention.default.decompose(*args, **kwargs)


def _unwrap(value):
    return value._cpu if type(value) is NeuronTensor else value


def _sdp_overrideable(func, info, args, kwargs):
    query, key, value, bias = (_unwrap(a) for a in (*args[:3], args[3] if len(args) > 3 else None))
    dropout_p = args[4] if len(args) > 4 else kwargs.get("dropout_p", 0.0)
    is_causal = args[5] if len(args) > 5 else kwargs.get("is_causal", False)
    device = args[0]._device
    out, logsumexp = aten._scaled_dot_product_flash_attention_for_cpu.default(
        query, key, value, dropout_p, is_causal, attn_mask=bias, scale=kwargs.get("scale")
    )
    empty = torch.empty(0, dtype=torch.long)
    wrap = NeuronTensor
    return (wrap(out, device), wrap(logsumexp, device), wrap(empty, device), wrap(empty, device),
            query.shape[2], key.shape[2], wrap(empty, device), wrap(empty, device),
            wrap(torch.empty(0, dtype=query.dtype), device))  # fmt: skip


def _sdp_overrideable_backward(func, info, args, kwargs):
    grad_out, query, key, value, bias, grad_input_mask, out, logsumexp = (_unwrap(a) for a in args[:8])
    dropout_p, is_causal = args[12], args[13]
    device = args[1]._device
    grads = aten._scaled_dot_product_flash_attention_for_cpu_backward.default(
        grad_out, query, key, value, out, logsumexp, dropout_p, is_causal,
        attn_mask=bias if bias is not None and bias.numel() else None, scale=kwargs.get("scale"),
    )  # fmt: skip
    return (*(NeuronTensor(g, device) for g in grads), None)


def _decompose(func, info, args, kwargs):
    """An op that is a composite of others reaches the device only where autograd is off (inference mode skips
    the autograd key that would have decomposed it): decomposed here as there, so ``to`` stays a no-op on the
    device it names and every op inside it dispatches as usual."""
    return func.decompose(*args, **kwargs)


def _histc(func, info, args, kwargs):
    """Integer histograms, as a device computes them (the CPU kernel takes floating point only; Transformers'
    MoE routing on a device counts expert ids with torch.histc)."""
    tensor = args[0]
    if tensor.is_floating_point():
        return _run(func, info, args, kwargs)
    return _run(func, info, (tensor.float(), *args[1:]), kwargs).to(tensor.dtype)


_SPECIAL = {
    aten.histc.default: _histc,
    aten._fused_sdp_choice.default: _sdp_choice,
    # Reaches the device itself only with autograd off (inference mode); else the AutogradPrivateUse1 kernel.
    aten.scaled_dot_product_attention.default: lambda func, info, args, kwargs: _sdp_attention(
        *args, **kwargs
    ),
    aten._scaled_dot_product_fused_attention_overrideable.default: _sdp_overrideable,
    aten._scaled_dot_product_fused_attention_overrideable_backward.default: _sdp_overrideable_backward,
}


# --- PrivateUse1 kernels: the entry points that reach the backend without a NeuronTensor -------------------


def _target(device: torch.device | None) -> torch.device:
    if device is None or device.index is None:
        return torch.device(DEVICE_TYPE, STATE.current)
    from compat_matrix.standin import runtime

    runtime.check_index(device.index)
    return device


def _check_dtype(dtype: torch.dtype | None) -> None:
    if dtype is not None and str(dtype) in _DTYPE_RULES:
        sim_backend.check_op_and_dtypes("aten.empty", [torch.empty(0, dtype=dtype)], "eager")


def _empty(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    _check_dtype(dtype)
    cpu = torch.empty(size, dtype=dtype, memory_format=memory_format or torch.contiguous_format)
    return NeuronTensor(cpu, _target(device))


def _empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    _check_dtype(dtype)
    return NeuronTensor(torch.empty_strided(size, stride, dtype=dtype), _target(device))


def _copy_from(src, dst, non_blocking=False):
    (dst._cpu if type(dst) is NeuronTensor else dst).copy_(_unwrap(src))
    return dst


def _copy_from_and_resize(src, dst):
    target = dst._cpu if type(dst) is NeuronTensor else dst
    target.resize_(src.shape)
    target.copy_(_unwrap(src))
    return dst


def _pin_memory(tensor, device=None):
    # The device's pinned host memory is ordinary host memory here: the copy a real pin would make.
    return tensor.clone(memory_format=torch.contiguous_format)


def _keep_device_copies_fake() -> None:
    """A fake tensor with a constant (a 1-element CPU tensor) copied to the device inside a compiled region is
    constant-propagated by running the copy for real; FakeTensor keeps only plain tensors as constants, and a
    device tensor here is a wrapper subclass. So such a copy stays an ordinary fake (as when the device is
    unavailable, FakeTensorMode's ``avoid_device_init``)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    may_turn_const = FakeTensorMode.may_turn_const

    def may_turn_const_unless_on_device(self, tensor: torch.Tensor) -> bool:
        return type(tensor) is not NeuronTensor and may_turn_const(self, tensor)

    FakeTensorMode.may_turn_const = may_turn_const_unless_on_device


def _same_device_tensor(first, second) -> bool:
    """Two stand-in tensors that are the same tensor: same data, layout, dtype, device and requires_grad."""
    if first is second:
        return True
    if type(first) is not NeuronTensor or type(second) is not NeuronTensor:
        return False
    a, b = first._cpu, second._cpu
    return (
        first._device == second._device
        and a.dtype == b.dtype
        and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        and (a.size(), a.stride(), a.storage_offset()) == (b.size(), b.stride(), b.storage_offset())
        and first.requires_grad == second.requires_grad
    )


def _skip_swaps_that_change_nothing() -> None:
    """``Module.to`` swaps the parameters of a wrapper subclass (``torch.utils.swap_tensors``) even where the
    move is a no-op, and the swap refuses a parameter that something else references (a compiled graph's
    guards): moving a model already on the device failed. On a device the move sets ``param.data`` to the same
    tensor; here a swap of a stand-in tensor with itself is skipped."""
    swap = torch.utils.swap_tensors

    def swap_tensors(t1, t2):
        if _same_device_tensor(t1, t2):
            return
        swap(t1, t2)

    swap_tensors.__doc__ = swap.__doc__
    torch.utils.swap_tensors = swap_tensors


_PRIVATEUSE1 = torch._C._autograd.DeviceType.PrivateUse1


class _DeviceGuard(torch._C._acc.DeviceGuard):
    """The python PrivateUse1 device guard. The autograd engine asks it for its device type about four times per
    backward node: answered from a constant."""

    def type_(self):
        return _PRIVATEUSE1


_DTYPE_RULES: frozenset[str] = frozenset()
_library: torch.library.Library | None = None


def register() -> None:
    """Rename PrivateUse1 to ``neuron``, register ``torch.neuron`` and the kernels."""
    global _library, _DTYPE_RULES
    from compat_matrix.standin import runtime

    _setup_privateuseone_for_python_backend(rename=DEVICE_TYPE, backend_module=runtime.module(),
                                            device_guard=_DeviceGuard())  # fmt: skip
    runtime.route_accelerator()
    _DTYPE_RULES = frozenset(sim_backend._dtype_rule_index())
    _keep_device_copies_fake()
    _skip_swaps_that_change_nothing()
    _library = torch.library.Library("aten", "IMPL")  # noqa: TOR901  (kept alive: the registrations live with it)
    for name, kernel in (("empty.memory_format", _empty), ("empty_strided", _empty_strided),
                         ("_copy_from", _copy_from), ("_copy_from_and_resize", _copy_from_and_resize)):  # fmt: skip
        _library.impl(name, kernel, "PrivateUse1")
    # On a device, optimizers and clip_grad_norm_ take the foreach path (device tensors are plain tensors
    # there); registered the way DTensor registers itself.
    from torch.optim import optimizer
    from torch.utils import _foreach_utils

    for supported in (optimizer._foreach_supported_types, _foreach_utils._foreach_supported_types):
        if NeuronTensor not in supported:
            supported.append(NeuronTensor)
    _library.impl("scaled_dot_product_attention", _sdp_attention, "AutogradPrivateUse1")
    # DataLoader(pin_memory=True) pins for the current accelerator: for this one, a plain host copy.
    _library.impl("_pin_memory", _pin_memory, "CPU")
