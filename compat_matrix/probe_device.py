"""The device a probe runs on: the real neuron device, the stand-in's, or the simulator on CPU; its compile
backend, the ops it ran through the CPU fallback, and the decode path Transformers takes on a device."""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch._dynamo

from compat_matrix.settings import ProbeSettings
from standin import sim_backend


class DeviceUnavailable(RuntimeError):
    """The worker cannot use the device the settings name."""


def on_standin(settings: ProbeSettings) -> bool:
    """The simulator on the neuron stand-in device (``--sim-device neuron``)."""
    return settings.backend == "neuron-sim" and settings.sim_device.split(":")[0] == "neuron"


def compile_backend(settings: ProbeSettings) -> str:
    """``neuron`` on a neuron device (the real one, or the stand-in's, which applies the neuron-sim rules)."""
    return "neuron" if settings.backend == "neuron" or on_standin(settings) else sim_backend.BACKEND_NAME


def resolve_device(settings: ProbeSettings) -> torch.device:
    """The device the compiled probes run on; raises DeviceUnavailable (inside the probe's error handling)."""
    if settings.backend == "neuron":
        try:
            import torch_neuronx  # noqa: F401  (registers the neuron device and the "neuron" dynamo backend)
        except Exception as error:
            raise DeviceUnavailable(f"cannot import torch_neuronx in the worker: {error}") from error
        count = getattr(getattr(torch, "neuron", None), "device_count", lambda: 0)()
        if not count:
            raise DeviceUnavailable("torch_neuronx is imported but the worker sees no Neuron device")
        return torch.device("neuron")
    if on_standin(settings):
        # Switched on here, after the fork: a worker server that ran a backward with it on would leave its
        # forked workers unable to run autograd (its device threads).
        import standin

        try:
            standin.activate()
        except standin.StandinUnavailable as error:
            raise DeviceUnavailable(f"--sim-device {settings.sim_device}: {error}") from error
    device = torch.device(settings.sim_device)
    if device.type != "cpu":
        module = getattr(torch, device.type, None)
        if module is None or not module.is_available():
            raise DeviceUnavailable(f"--sim-device {settings.sim_device}: no such device in this worker")
    return device


def device_fallback_ops(settings: ProbeSettings) -> list[str]:
    """Ops the device ran through TorchNeuron's CPU fallback: on the neuron backend what torch_neuronx tracked
    (``get_fallback_ops()``, op names), else what the simulator recorded."""
    if settings.backend != "neuron":
        return sorted(sim_backend.STATE.cpu_fallbacks)
    import torch_neuronx

    tracked = getattr(torch_neuronx, "get_fallback_ops", None)
    if not callable(tracked):
        return sorted(sim_backend.STATE.cpu_fallbacks)
    return sorted({str(op) for op in tracked()})


@contextmanager
def device_decode_path(model: torch.nn.Module, device: torch.device):
    """On a non-CPU device Transformers decodes MoE layers with ``batched_mm`` instead of ``grouped_mm``
    (``_optimize_model_for_decode``); the simulator on CPU takes the device's path too."""
    if device.type != "cpu" or not hasattr(model, "get_experts_implementation"):
        yield
        return
    original = model.get_experts_implementation()
    switched = {key: "batched_mm" if value == "grouped_mm" else value for key, value in original.items()}

    @contextmanager
    def as_on_a_device():
        model.set_experts_implementation(switched)
        try:
            yield
        finally:
            model.set_experts_implementation(original)

    if switched != original:
        model._optimize_model_for_decode = as_on_a_device
    try:
        yield
    finally:
        model.__dict__.pop("_optimize_model_for_decode", None)
