"""The one place `try` decides which device a run gets: the stand-in `neuron` device when this checkout has
it (`standin`), otherwise the CPU, labelled as such in every report."""

from __future__ import annotations

import subprocess
import sys

STANDIN_DEVICE = "neuron (stand-in on CPU)"
CPU_DEVICE = "cpu (no neuron stand-in in this installation)"


class DeviceUnavailable(Exception):
    """The stand-in cannot be switched on here (unsupported torch, a real torch_neuronx installed)."""


def device_environment(env: dict[str, str]) -> tuple[dict[str, str], str]:
    """A copy of `env` with the stand-in switched on for a process and its children, and the device label."""
    try:
        import standin
        import standin.native
    except ImportError:
        return dict(env), CPU_DEVICE
    try:
        standin.check_supported()
        _built(standin.native)
        return standin.activation_env(env), STANDIN_DEVICE
    except standin.StandinUnavailable as error:
        raise DeviceUnavailable(f"the neuron stand-in cannot run here: {error}") from error


def _built(native) -> None:
    """Compile the stand-in's backend before the sandbox: built inside, it would be discarded with the run."""
    if (native.build_directory() / f"{native.NAME}.so").exists():
        return
    result = subprocess.run([sys.executable, "-m", "standin.native"], capture_output=True, text=True)
    if result.returncode != 0:
        raise DeviceUnavailable(
            (result.stderr.strip().splitlines() or ["its backend could not be built"])[-1]
        )
