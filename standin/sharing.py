"""Device tensors between processes. ``pickle`` and ``torch.save`` write a device tensor's data and load it back
onto the device, as for any device. A ``torch.multiprocessing`` queue or pipe shares a tensor's memory with the
receiving process instead (CUDA's IPC handles, the CPU's shared memory): the stand-in's device memory is
ordinary private host memory, which cannot be shared that way, so such a send is refused with what to do, instead
of PyTorch's ``_share_fd_: only available on CPU``."""

from __future__ import annotations

import torch

from standin.device import DEVICE_TYPE

ADVICE = (
    "neuron stand-in: a device tensor cannot cross a torch.multiprocessing queue or pipe (its memory is not "
    "shared memory): send tensor.cpu() and move it to the device in the receiving process"
)


def _refusing(reduce):
    """``reduce`` (torch.multiprocessing's reducer of tensors or storages), refusing the device's."""

    def reduce_unless_on_device(value):
        if value.device.type == DEVICE_TYPE:
            raise RuntimeError(ADVICE)
        return reduce(value)

    return reduce_unless_on_device


def register() -> None:
    from multiprocessing.reduction import ForkingPickler

    from torch.multiprocessing import reductions

    reductions.init_reductions()  # (idempotent) torch's reducers, which these wrap
    for kind in (torch.Tensor, torch.nn.parameter.Parameter):
        ForkingPickler.register(kind, _refusing(reductions.reduce_tensor))
    ForkingPickler.register(torch.UntypedStorage, _refusing(reductions.reduce_storage))
