"""The one place `try` and `bench` decide which device a run gets: a real `neuron` device where a real
torch-neuronx sees one (a trn1/trn2/trn3 host), else the stand-in `neuron` device when this checkout has it
(`standin`), otherwise the CPU, labelled as such in every report."""

from __future__ import annotations

import importlib.util

STANDIN_DEVICE = "neuron (stand-in on CPU)"
CPU_DEVICE = "cpu (no neuron stand-in in this installation)"


class DeviceUnavailable(Exception):
    """No device can be given here (unsupported torch, a torch-neuronx that sees no device)."""


def real_neuron_device() -> str | None:
    """The label of this host's real neuron device ("neuron (torch-neuronx 2.14.0)"), None where there is no
    torch-neuronx; raises DeviceUnavailable where one is installed but sees no device."""
    if importlib.util.find_spec("torch_neuronx") is None:
        return None
    from compat_matrix.environment import neuron_device_available, standin_torch_neuronx

    if neuron_device_available():
        if standin_torch_neuronx():  # this process already has the stand-in's (NEURON_STANDIN=1)
            return None
        from importlib.metadata import PackageNotFoundError, version

        try:
            return f"neuron (torch-neuronx {version('torch-neuronx')})"
        except PackageNotFoundError:
            return "neuron (torch-neuronx)"
    raise DeviceUnavailable(
        "torch-neuronx is installed but sees no neuron device (check `neuron-ls` and NEURON_RT_VISIBLE_CORES); "
        "the stand-in stays off on a host with a real torch-neuronx"
    )


def device_environment(env: dict[str, str]) -> tuple[dict[str, str], str]:
    """A copy of `env` with the device switched on for a process and its children, and the device label: a
    real neuron device needs nothing switched on (torch-neuronx registers it at `import torch`)."""
    real = real_neuron_device()
    if real is not None:
        return dict(env), real
    try:
        import standin
    except ImportError:
        return dict(env), CPU_DEVICE
    try:
        standin.check_supported()
        return standin.activation_env(env), STANDIN_DEVICE
    except standin.StandinUnavailable as error:
        raise DeviceUnavailable(f"the neuron stand-in cannot run here: {error}") from error
