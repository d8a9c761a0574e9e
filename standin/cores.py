"""The NeuronCores a stand-in process sees, read from the Neuron runtime's environment variables as the runtime
reads them: ``NEURON_RT_VISIBLE_CORES`` (``0-1``, ``2``, ``0,3``), else ``NEURON_RT_NUM_CORES``, else one Trainium2
chip at the default logical-core size (a trn2.3xlarge, 4 cores). A malformed value is one message
(:class:`standin.StandinUnavailable`), whichever variable holds it."""

from __future__ import annotations

import os
import re

from standin.unavailable import StandinUnavailable

DEFAULT_CORES = 4
# A core id or an ascending range of them: 0, 2-3.
_PART = re.compile(r"(\d+)(?:-(\d+))?")


def _malformed(name: str, value: str) -> Exception:
    return StandinUnavailable(
        f"{name}={value!r} is not a NeuronCore set: NEURON_RT_VISIBLE_CORES takes core ids and ascending ranges "
        "(0-1, 2, 0,3), NEURON_RT_NUM_CORES a count of at least 1"
    )


def _count_visible(value: str) -> int:
    count = 0
    for part in value.split(","):
        match = _PART.fullmatch(part.strip())
        if match is None or (match[2] is not None and int(match[2]) < int(match[1])):
            raise _malformed("NEURON_RT_VISIBLE_CORES", value)
        count += int(match[2]) - int(match[1]) + 1 if match[2] is not None else 1
    return count


def count() -> int:
    """NeuronCores this process sees (StandinUnavailable where the variable that says is malformed)."""
    visible = os.environ.get("NEURON_RT_VISIBLE_CORES", "").strip()
    if visible:
        return _count_visible(visible)
    number = os.environ.get("NEURON_RT_NUM_CORES", "").strip()
    if not number:
        return DEFAULT_CORES
    if not number.isdigit() or int(number) < 1:
        raise _malformed("NEURON_RT_NUM_CORES", number)
    return int(number)


def first(total: int) -> int:
    """The current device a process starts with: under torchrun (LOCAL_RANK) its local rank modulo the device
    count, so each worker has a NeuronCore of its own by default, as Accelerate (``torch.neuron.current_device()``
    with no ``set_device``) and TorchNeuron's torch.distributed guide (``torch.device("neuron")``) expect; else 0."""
    local_rank = os.environ.get("LOCAL_RANK", "").strip()
    return int(local_rank) % total if local_rank.isdigit() else 0
