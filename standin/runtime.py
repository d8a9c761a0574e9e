"""``torch.neuron`` on the stand-in: the functions of TorchNeuron's torch.neuron module reference (device, random
numbers, streams and events, memory, synchronize, compilation metrics), with the same names and signatures.

There is one host and no asynchrony: streams and events complete at once, ``synchronize`` returns at once,
memory figures are the host memory behind the device's live tensors (not HBM; see docs/standin.md).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import torch

from standin import device as _device
from standin.dynamo import get_dynamo_metrics, reset_dynamo_metrics  # noqa: F401  (module API)

# NeuronCores a process sees without NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES: one Trainium2 chip at the
# default logical-core size (a trn2.3xlarge).
DEFAULT_CORES = 4


def module():
    """This module, registered as ``torch.neuron``."""
    return sys.modules[__name__]


# --- devices ------------------------------------------------------------------------------------------------


def _count_cores(spec: str) -> int:
    count = 0
    for part in spec.split(","):
        first, _, last = part.strip().partition("-")
        count += int(last) - int(first) + 1 if last else 1
    return count


def device_count() -> int:
    """NeuronCores this process sees: NEURON_RT_VISIBLE_CORES (``0-1``, ``2``, ``0,3``), else NEURON_RT_NUM_CORES,
    else DEFAULT_CORES."""
    visible = os.environ.get("NEURON_RT_VISIBLE_CORES", "").strip()
    if visible:
        return _count_cores(visible)
    number = os.environ.get("NEURON_RT_NUM_CORES", "").strip()
    return int(number) if number else DEFAULT_CORES


def first_device() -> int:
    """The current device a process starts with: under torchrun (LOCAL_RANK) its local rank modulo the device
    count, so each worker has a NeuronCore of its own by default, as Accelerate (``torch.neuron.current_device()``
    with no ``set_device``) and TorchNeuron's torch.distributed guide (``torch.device("neuron")``) expect; else 0."""
    local_rank = os.environ.get("LOCAL_RANK", "").strip()
    return int(local_rank) % device_count() if local_rank.isdigit() else 0


def check_index(index: int) -> None:
    count = device_count()
    if not 0 <= index < count:
        raise RuntimeError(f"Invalid device id: {index}. Valid range is 0 to {count - 1} (neuron stand-in)")


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
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != _device.DEVICE_TYPE:
        raise ValueError(f"Expected a neuron device, got {device}")
    return device.index if device.index is not None else current_device()


def current_device() -> int:
    return _device.current_device()


def set_device(device) -> None:
    index = _index(device)
    check_index(index)
    _device.backend().set_device(index)


class device:  # noqa: N801  (torch.cuda.device's name)
    """Context manager that selects a device."""

    def __init__(self, device):
        self.index = -1 if device is None else _index(device)
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


# --- random numbers -----------------------------------------------------------------------------------------


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


class Event:
    """An event: recorded work is complete at once; timing is host wall time."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.enable_timing = enable_timing
        self._time: float | None = None

    def record(self, stream: Stream | None = None) -> None:
        self._time = time.perf_counter()

    def wait(self, stream: Stream | None = None) -> None:
        """Recorded work is already complete."""

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        """Recorded work is already complete."""

    def elapsed_time(self, end_event: Event) -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with enable_timing=True")
        if self._time is None or end_event._time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time")
        return (end_event._time - self._time) * 1000.0


class Stream(torch.Stream):
    """A stream (a ``torch.Stream`` of the device, as TorchNeuron's are): work on it is complete when its call
    returns, so its queries, waits and synchronizations return at once."""

    def __new__(cls, device=None, priority: int = 0, **_ignored):
        return super().__new__(
            cls, device=torch.device(_device.DEVICE_TYPE, _index(device)), priority=priority
        )

    def __init__(self, device=None, priority: int = 0, **_ignored):
        """Made by ``__new__``."""

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        """Work is complete."""

    def wait_stream(self, stream: torch.Stream) -> None:
        """Work is complete."""

    def wait_event(self, event: Event) -> None:
        """Work is complete (the event may be this module's or a ``torch.Event``)."""

    def record_event(self, event: Event | None = None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def __enter__(self):
        self._context = StreamContext(self)
        return self._context.__enter__()

    def __exit__(self, *exc):
        self._context.__exit__(*exc)


_current_streams: dict[int, Stream] = {}


def default_stream(device=None) -> Stream:
    return Stream(device=_index(device))


def current_stream(device=None) -> Stream:
    index = _index(device)
    return _current_streams.get(index) or default_stream(index)


def set_stream(stream: Stream | None) -> None:
    if stream is not None:
        _current_streams[stream.device_index] = stream


class StreamContext:
    """Selects a stream for the duration of a ``with``."""

    def __init__(self, stream: Stream | None):
        self.stream = stream
        self.previous: Stream | None = None

    def __enter__(self):
        if self.stream is not None:
            self.previous = current_stream(self.stream.device_index)
            set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.previous is not None:
            set_stream(self.previous)


def stream(stream: Stream | None) -> StreamContext:
    return StreamContext(stream)


def wait_stream(stream: Stream) -> None:
    current_stream().wait_stream(stream)


def wait_event(event: Event) -> None:
    current_stream().wait_event(event)


def record_event(event: Event | None = None) -> Event:
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

    memory = psutil.virtual_memory()
    return memory.available, memory.total


# --- torch.accelerator -----------------------------------------------------------------------------------


def register() -> None:
    """Rename PrivateUse1 to ``neuron``, register this module as ``torch.neuron``, start the device and route
    ``torch.accelerator`` here."""
    torch.utils.rename_privateuse1_backend(_device.DEVICE_TYPE)
    torch.utils.generate_methods_for_privateuse1_backend()
    torch._register_device_module(_device.DEVICE_TYPE, module())
    _device.register(device_count(), first_device())
    route_accelerator()


def route_accelerator() -> None:
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
