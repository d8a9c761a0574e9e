"""Run header shared by every row: versions, platform, backend, settings hash."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import sys
from pathlib import Path

from compat_matrix import HARNESS_VERSION
from compat_matrix.families import TEXT_TO_IMAGE
from compat_matrix.settings import ProbeSettings


def cache_home() -> Path:
    """Where neuron-migrate keeps what it can measure again (``$NEURON_MIGRATE_CACHE``, else the user's cache)."""
    base = os.environ.get("NEURON_MIGRATE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "neuron-migrate"
    )
    return Path(base)


class BackendUnavailable(RuntimeError):
    """The requested backend cannot run on this machine."""


def neuron_device_available() -> bool:
    """True on a Trainium host: torch_neuronx importable and at least one neuron device present."""
    if importlib.util.find_spec("torch_neuronx") is None:
        return False
    import torch

    try:
        import torch_neuronx  # noqa: F401  (registers the neuron device and the "neuron" dynamo backend)
    except Exception:  # an install for another host (no driver, wrong torch) is "not available", not a crash
        return False
    device_count = getattr(getattr(torch, "neuron", None), "device_count", None)
    return bool(callable(device_count) and device_count() > 0)


def standin_torch_neuronx() -> bool:
    """True when the torch_neuronx of this process is the neuron stand-in's (standin)."""
    return bool(getattr(sys.modules.get("torch_neuronx"), "STANDIN", False))


def simulated(settings: ProbeSettings) -> bool:
    """Rows measured by the simulator, or on the stand-in device, are labelled simulated."""
    return settings.backend == "neuron-sim" or standin_torch_neuronx()


def resolve_backend(requested: str) -> tuple[str, str]:
    """Return (backend, explanation). ``auto`` picks the real device when present, else the simulator (never
    the stand-in's torch_neuronx: that takes an explicit ``--backend neuron``)."""
    if requested == "neuron-sim":
        return "neuron-sim", "neuron-sim requested: CPU simulation of the TorchNeuron rules (simulated: true)"
    available = neuron_device_available()
    if requested == "neuron":
        if not available:
            raise BackendUnavailable(
                "backend 'neuron' needs torch_neuronx and a Neuron device (a trn2/trn3 host); neither was found. "
                "Use --backend neuron-sim to simulate the TorchNeuron rules on CPU."
            )
        if standin_torch_neuronx():
            return "neuron", "neuron requested: the neuron stand-in's torch_neuronx, on CPU (simulated: true)"
        return "neuron", "neuron requested: TorchNeuron device found"
    if available and not standin_torch_neuronx():
        return "neuron", "auto: TorchNeuron device found, using backend 'neuron'"
    return (
        "neuron-sim",
        "auto: no TorchNeuron device here (torch_neuronx or device missing), using 'neuron-sim'",
    )


def check_sim_device(name: str) -> None:
    """Fail before any work when ``--sim-device`` names no usable torch device. ``neuron`` is the stand-in's:
    switched on here to check it (each worker switches it on for itself, see ``probe_device.resolve_device``)."""
    import torch

    if name.split(":")[0] == "neuron":
        import standin

        try:
            standin.activate()
        except standin.StandinUnavailable as error:
            raise BackendUnavailable(f"--sim-device {name}: {error}") from None
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError) as error:
        raise BackendUnavailable(f"--sim-device {name!r} is not a torch device ({error})") from None
    if device.type == "cpu":
        return
    module = getattr(torch, device.type, None)
    available = getattr(module, "is_available", None)
    if not callable(available) or not available():
        raise BackendUnavailable(
            f"--sim-device {name}: torch {torch.__version__} sees no {device.type} device here. "
            "Use --sim-device cpu, or run on a machine with that device."
        )
    count = getattr(module, "device_count", lambda: 1)()
    if device.index is not None and device.index >= count:
        raise BackendUnavailable(f"--sim-device {name}: only {count} {device.type} device(s) here")


# Set on a Trainium host, they change what the device compiles and where its NEFF cache lives.
NEURON_ENV_PREFIXES = ("NEURON_", "TORCH_NEURONX_")


def neuron_environment() -> dict[str, str]:
    """The Neuron variables of this run (compile cache, compiler flags, fallback policy), as set. The
    per-worker core range is recorded on each row (``neuron_visible_cores``) instead."""
    return {
        name: value
        for name, value in sorted(os.environ.items())
        if name.startswith(NEURON_ENV_PREFIXES) and name != "NEURON_RT_VISIBLE_CORES"
    }


def run_env(settings: ProbeSettings, task: str | None = None) -> dict:
    """What a row was measured with; a text-to-image row's pipeline is Diffusers' too."""
    import torch
    import transformers

    env = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "harness_version": HARNESS_VERSION,
        "backend": settings.backend,
        "simulated": simulated(settings),
        "settings_id": settings.settings_id(),
        "config": settings.config,
    }
    if task == TEXT_TO_IMAGE:
        env["diffusers"] = importlib.metadata.version("diffusers")
    if settings.backend == "neuron":
        try:
            import torch_neuronx

            env["torch_neuronx"] = getattr(torch_neuronx, "__version__", None)
        except Exception:  # the row still gets written; its worker says why the device was unusable
            env["torch_neuronx"] = None
        env["neuron_env"] = neuron_environment()
    return env
