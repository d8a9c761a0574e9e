"""The one place `try` decides which device a run gets: the stand-in `neuron` device when this checkout has
it (`standin`), otherwise the CPU, labelled as such in every report."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

STANDIN_DEVICE = "neuron (stand-in on CPU)"
CPU_DEVICE = "cpu (no neuron stand-in in this installation)"


class DeviceUnavailable(Exception):
    """The stand-in cannot be switched on here (unsupported torch, a real torch_neuronx installed)."""


def device_environment(env: dict[str, str], python: str = sys.executable) -> tuple[dict[str, str], str]:
    """A copy of `env` with the stand-in switched on for a process and its children, and the device label.
    `python`: the interpreter that runs the user's code, whose torch the stand-in's backend is built for."""
    try:
        import standin
        import standin.native
    except ImportError:
        return dict(env), CPU_DEVICE
    try:
        if python == sys.executable:
            standin.check_supported()
            _built(standin.native)
        else:
            _check_in(python, env)
        return standin.activation_env(env), STANDIN_DEVICE
    except standin.StandinUnavailable as error:
        raise DeviceUnavailable(f"the neuron stand-in cannot run here: {error}") from error


def standin_package() -> Path | None:
    spec = importlib.util.find_spec("standin")
    return Path(spec.origin).parent if spec is not None and spec.origin else None


def _built(native) -> None:
    """Compile the stand-in's backend before the sandbox: built inside, it would be discarded with the run."""
    if (native.build_directory() / f"{native.NAME}.so").exists():
        return
    _check_in(sys.executable, dict(os.environ))


def _check_in(python: str, env: dict[str, str]) -> None:
    """Check that the stand-in can run with `python`'s torch and build its backend for it (outside the sandbox)."""
    check = "import standin, standin.native; standin.check_supported(); standin.native.load()"
    result = subprocess.run(
        [python, "-c", check],
        env={**env, "PYTHONPATH": str(standin_package().parent)},
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or [f"{python} exited {result.returncode}"])[-1]
        raise DeviceUnavailable(f"the neuron stand-in cannot run with {python}: {last}")
