"""The one place `try` and `bench` decide which device a run gets: a real `neuron` device where a real
torch-neuronx sees one (a trn1/trn2/trn3 host), else the stand-in `neuron` device when this checkout has it
(`standin`), otherwise the CPU, labelled as such in every report."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

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


def device_environment(env: dict[str, str], python: str = sys.executable) -> tuple[dict[str, str], str]:
    """A copy of `env` with the device switched on for a process and its children, and the device label: a
    real neuron device (where this interpreter's torch-neuronx sees one) needs nothing switched on, since
    torch-neuronx registers it at `import torch`. `python`: the interpreter that runs the user's code, whose
    torch the stand-in's backend is built for."""
    real = real_neuron_device() if python == sys.executable else None
    if real is not None:
        return dict(env), real
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


def host_device(python: str = sys.executable) -> str:
    """The device `python` gives a script at its real size (bench): a real neuron device, else CUDA, else the
    CPU. Another interpreter is asked in a process of its own, with its own torch."""
    if python != sys.executable:
        tool_root = str(Path(__file__).resolve().parents[1])
        asked = subprocess.run(
            [python, "-c", "from try_run.device import host_device; print(host_device())"],
            env={**os.environ, "PYTHONPATH": tool_root},
            capture_output=True,
            text=True,
        )
        if asked.returncode != 0:
            last = (asked.stderr.strip().splitlines() or [f"exit {asked.returncode}"])[-1]
            raise DeviceUnavailable(f"{python} cannot tell its device: {last}")
        return asked.stdout.strip().splitlines()[-1]
    real = real_neuron_device()
    if real is not None:
        return real
    import torch

    if torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name()})"
    return "cpu"


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


if __name__ == "__main__":  # host_device() asked by another interpreter
    print(host_device())
