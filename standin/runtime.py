"""``torch.neuron`` on the stand-in: the functions of TorchNeuron's torch.neuron module reference (device, random
numbers, streams and events, memory, synchronize, compilation metrics), with the same names and signatures.

There is one host and no asynchrony: streams and events are the backend's (its device guard) and complete at once,
``synchronize`` returns at once, memory figures are the host memory behind the device's live tensors (not HBM;
see docs/reference/standin.md). Every function that takes a device checks its index, as the backend does.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch

from standin import cores
from standin import device as _device
from standin.dynamo import get_dynamo_metrics, reset_dynamo_metrics  # noqa: F401  (module API)

# The default generator of each device (set by register), as torch.cuda.default_generators.
default_generators: tuple[torch.Generator, ...] = ()
_DEVICE_TYPE_ID = -1  # the device type's number in c10 (set by register), as a torch.Stream holds it


def module():
    """This module, registered as ``torch.neuron``."""
    return sys.modules[__name__]


# --- devices ------------------------------------------------------------------------------------------------


def device_count() -> int:
    """NeuronCores this process sees (standin.cores: read from the environment when the stand-in started)."""
    return _device.backend().device_count()


def is_available() -> bool:
    return device_count() > 0


def is_initialized() -> bool:
    return True


# torch.utils.checkpoint saves and replays a device's random state only where its module says so, as torch.cuda
# does once initialised: without it a recomputed dropout would draw a new mask.
_initialized = True


def init() -> None:
    """Nothing to initialise: the stand-in's runtime is the host."""


def _is_in_bad_fork() -> bool:
    return False


def _index(device=None) -> int:
    """The index of a device argument (None, an int, a ``torch.device`` or its string), checked."""
    if device is None:
        return current_device()
    if isinstance(device, int):
        index = device
    else:
        device = torch.device(device)
        if device.type != _device.DEVICE_TYPE:
            raise ValueError(f"Expected a neuron device, got {device}")
        index = device.index if device.index is not None else current_device()
    _device.backend().check_index(index)
    return index


def current_device() -> int:
    return _device.current_device()


def set_device(device) -> None:
    _device.backend().set_device(_index(device))


class device:  # noqa: N801  (torch.cuda.device's name)
    """Context manager that selects a device."""

    def __init__(self, device):
        self.index = -1 if device is None or device == -1 else _index(device)
        self.previous = -1

    def __enter__(self):
        if self.index != -1:
            self.previous = current_device()
            set_device(self.index)

    def __exit__(self, *exc):
        if self.previous != -1:
            set_device(self.previous)


@dataclass(frozen=True)
class NeuronDeviceProperties:
    name: str
    total_memory: int


def get_device_name(device=None) -> str:
    return f"neuron:{_index(device)} (stand-in)"


def get_device_properties(device=None) -> NeuronDeviceProperties:
    import psutil

    return NeuronDeviceProperties(name=get_device_name(device), total_memory=psutil.virtual_memory().total)


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float32, torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def synchronize(device=None) -> None:
    """Work on the stand-in completes when its call returns."""
    _index(device)


# --- random numbers -----------------------------------------------------------------------------------------


def _default_generators() -> tuple[torch.Generator, ...]:
    return tuple(_device.generator(index) for index in range(device_count()))


def manual_seed(seed: int) -> None:
    _device.generator(current_device()).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    # torch.manual_seed calls this; it must not call torch.manual_seed back.
    for index in range(device_count()):
        _device.generator(index).manual_seed(int(seed))


def seed() -> None:
    _device.generator(current_device()).seed()


def seed_all() -> None:
    first = _device.generator(0)
    first.seed()
    manual_seed_all(first.initial_seed())


def initial_seed() -> int:
    return _device.generator(current_device()).initial_seed()


def get_rng_state(device=None) -> torch.Tensor:
    return _device.generator(_index(device)).get_state()


def set_rng_state(new_state: torch.Tensor, device=None) -> None:
    _device.generator(_index(device)).set_state(new_state.cpu())


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(index) for index in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


# --- streams and events -------------------------------------------------------------------------------------


# Streams and events are PyTorch's own, on the device (as torch.mtia's are): the backend's device guard makes
# streams, keeps each device's current one and records events.
Stream = torch.Stream
Event = torch.Event


def default_stream(device=None) -> torch.Stream:
    return torch.Stream(stream_id=0, device_index=_index(device), device_type=_DEVICE_TYPE_ID)


def current_stream(device=None) -> torch.Stream:
    return torch.accelerator.current_stream(_index(device))


def set_stream(stream: torch.Stream | None) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes a stream current for the duration of a ``with`` (None: nothing changes)."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.previous: torch.Stream | None = None

    def __enter__(self):
        if self.stream is not None:
            self.previous = current_stream(self.stream.device_index)
            set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.previous is not None:
            set_stream(self.previous)


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)


def wait_stream(stream: torch.Stream) -> None:
    current_stream().wait_stream(stream)


def wait_event(event: torch.Event) -> None:
    current_stream().wait_event(event)


def record_event(event: torch.Event | None = None) -> torch.Event:
    return current_stream().record_event(event)


def query() -> bool:
    return True


# --- memory: the host memory of the device's live storages, counted by the backend ------------------------


def memory_allocated(device=None) -> int:
    return _device.backend().memory_stats(_index(device))["current"]


def max_memory_allocated(device=None) -> int:
    return _device.backend().memory_stats(_index(device))["peak"]


def memory_reserved(device=None) -> int:
    return memory_allocated(device)  # no caching allocator: nothing is reserved beyond what is allocated


def max_memory_reserved(device=None) -> int:
    return max_memory_allocated(device)


def memory_stats(device=None) -> dict[str, int]:
    allocated = memory_allocated(device)
    peak = max_memory_allocated(device)
    return {
        "allocated_bytes.all.current": allocated,
        "allocated_bytes.all.peak": peak,
        "reserved_bytes.all.current": allocated,
        "reserved_bytes.all.peak": peak,
        "active_bytes.all.current": allocated,
        "active_bytes.all.peak": peak,
    }


def memory_summary(device=None, abbreviated: bool = False) -> str:
    stats = memory_stats(device)
    lines = [f"neuron:{_index(device)} (stand-in: host memory of live device storages)"]
    lines += [f"  {name}: {value}" for name, value in stats.items()]
    return "\n".join(lines)


def reset_peak_memory_stats(device=None) -> None:
    _device.backend().reset_peak(_index(device))


def reset_accumulated_memory_stats(device=None) -> None:
    reset_peak_memory_stats(device)


def reset_max_memory_allocated(device=None) -> None:
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    """No caching allocator: nothing to release."""


def mem_get_info(device=None) -> tuple[int, int]:
    import psutil

    _index(device)
    memory = psutil.virtual_memory()
    return memory.available, memory.total


# --- torch.accelerator -----------------------------------------------------------------------------------


def _route_accelerator() -> None:
    """``torch.accelerator``'s memory functions reach a backend through its caching device allocator, which the
    stand-in does not have (its allocator is the host's): they are routed to this module's functions. Its device
    index and synchronize reach the backend's device guard."""
    bindings = torch._C
    bindings._accelerator_isAllocatorInitialized = lambda: True
    bindings._accelerator_getDeviceStats = memory_stats
    bindings._accelerator_resetPeakStats = reset_peak_memory_stats
    bindings._accelerator_resetAccumulatedStats = reset_accumulated_memory_stats
    bindings._accelerator_getMemoryInfo = mem_get_info
    bindings._accelerator_emptyCache = empty_cache
    bindings._accelerator_emptyHostCache = empty_cache


def register() -> None:
    """Rename PrivateUse1 to ``neuron``, register this module as ``torch.neuron``, start the device on the
    NeuronCores the environment gives and route ``torch.accelerator`` here."""
    global default_generators, _DEVICE_TYPE_ID
    count = cores.count()  # first: a malformed set changes nothing
    torch.utils.rename_privateuse1_backend(_device.DEVICE_TYPE)
    torch.utils.generate_methods_for_privateuse1_backend()
    torch._register_device_module(_device.DEVICE_TYPE, module())
    _device.register(count, cores.first(count))
    default_generators = _default_generators()
    _DEVICE_TYPE_ID = torch.Stream(device=_device.DEVICE_TYPE).device_type
    _route_accelerator()
