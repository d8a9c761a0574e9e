"""The ``neuron`` process-group backend of the stand-in: ``init_process_group("neuron")`` as on a trn2, with gloo
moving the data of the CPU tensors inside the stand-in's tensors.

TorchNeuron registers its backend with ``dist.Backend.register_backend("neuron", ..., devices=["neuron"])``
as a Python ``ProcessGroup``; so does this one. Each collective hands gloo its device tensors as CPU tensors
on the same memory, which gloo writes into; gloo is also registered as the group's CPU backend, which gives the group its
name for functional collectives (DTensor, FSDP2, tensor parallelism).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

from standin import device

BACKEND_NAME = "neuron"


def _cpu(tensor: torch.Tensor) -> torch.Tensor:
    return device.host(tensor)


def _cpus(tensors) -> list[torch.Tensor]:
    return [_cpu(tensor) for tensor in tensors]


def _completed(works) -> dist.Work:
    """One Work for collectives run as several gloo calls: they are waited for here."""
    for work in works:
        work.wait()
    future = torch.futures.Future()
    future.set_result(None)
    return _create_work_from_future(future)


def _pairwise(collective, outputs, inputs, options) -> dist.Work:
    """A coalesced collective as one gloo call per (output, input) pair."""
    return _completed([collective(_cpu(o), _cpu(i), options) for o, i in zip(outputs, inputs, strict=True)])


class ProcessGroupStandin(dist.ProcessGroup):
    """``neuron`` collectives on gloo, on CPU tensors on the memory of the device tensors."""

    def __init__(self, store, rank: int, size: int, timeout):
        super().__init__(rank, size)
        self.gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
        self._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, self.gloo)

    def getBackendName(self) -> str:  # noqa: N802  (c10d's name)
        return BACKEND_NAME

    def allreduce(self, tensors, opts=None):
        return self.gloo.allreduce(_cpus(tensors), opts or dist.AllreduceOptions())

    def allreduce_coalesced(self, tensors, opts=None):
        options = dist.AllreduceOptions()
        if opts is not None:
            options.reduceOp = opts.reduceOp
        return _completed([self.gloo.allreduce([tensor], options) for tensor in _cpus(tensors)])

    def broadcast(self, tensors, opts=None):
        return self.gloo.broadcast(_cpus(tensors), opts or dist.BroadcastOptions())

    def reduce(self, tensors, opts=None):
        return self.gloo.reduce(_cpus(tensors), opts or dist.ReduceOptions())

    def allgather(self, output_tensors, input_tensors, opts=None):
        outputs = [_cpus(group) for group in output_tensors]
        return self.gloo.allgather(outputs, _cpus(input_tensors), opts or dist.AllgatherOptions())

    def _allgather_base(self, output, input, opts=None):
        # A flat output of the world's elements (accelerate's gather passes one, which NCCL and TorchNeuron take)
        # is handed to gloo as its inputs stacked along the first dimension, the shape gloo checks each part by.
        output = _cpu(output)
        if input.dim() > 1 and output.dim() != input.dim():
            output = output.view(-1, *input.shape[1:])
        return self.gloo._allgather_base(output, _cpu(input), opts or dist.AllgatherOptions())

    def all_gather_single(self, output, input, opts=None):
        return self._allgather_base(output, input, opts)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        return self.allgather_into_tensor_coalesced(outputs, inputs, opts)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        outputs = [_cpus(group) for group in output_lists]
        return self.gloo.allgather_coalesced(outputs, _cpus(input_list), opts or dist.AllgatherOptions())

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        return _pairwise(self.gloo._allgather_base, outputs, inputs, opts or dist.AllgatherOptions())

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        inputs = [_cpus(group) for group in input_tensors]
        return self.gloo.reduce_scatter(_cpus(output_tensors), inputs, opts or dist.ReduceScatterOptions())

    def _reduce_scatter_base(self, output, input, opts=None):
        return self.gloo._reduce_scatter_base(_cpu(output), _cpu(input), opts or dist.ReduceScatterOptions())

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        return _pairwise(self.gloo._reduce_scatter_base, outputs, inputs, opts or dist.ReduceScatterOptions())

    def reduce_scatter_single(self, output, input, opts=None):
        return self._reduce_scatter_base(output, input, opts)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        return self.reduce_scatter_tensor_coalesced(outputs, inputs, opts)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        return self.gloo.alltoall(_cpus(output_tensors), _cpus(input_tensors), opts or dist.AllToAllOptions())

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        return self.gloo.alltoall_base(
            _cpu(output), _cpu(input), output_split_sizes, input_split_sizes, opts or dist.AllToAllOptions()
        )

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        return self.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)

    def gather(self, output_tensors, input_tensors, opts=None):
        outputs = [_cpus(group) for group in output_tensors]
        return self.gloo.gather(outputs, _cpus(input_tensors), opts or dist.GatherOptions())

    def scatter(self, output_tensors, input_tensors, opts=None):
        inputs = [_cpus(group) for group in input_tensors]
        return self.gloo.scatter(_cpus(output_tensors), inputs, opts or dist.ScatterOptions())

    def barrier(self, opts=None):
        return self.gloo.barrier(opts or dist.BarrierOptions())

    def send(self, tensors, dst_rank: int, tag: int = 0):
        return self.gloo.send(_cpus(tensors), dst_rank, tag)

    def recv(self, tensors, src_rank: int, tag: int = 0):
        return self.gloo.recv(_cpus(tensors), src_rank, tag)

    def recv_anysource(self, tensors, tag: int = 0):
        return self.gloo.recv_anysource(_cpus(tensors), tag)


def _create(store, rank: int, size: int, timeout) -> ProcessGroupStandin:
    return ProcessGroupStandin(store, rank, size, timeout)


def register() -> None:
    if dist.is_available() and BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, _create, devices=["neuron"])
