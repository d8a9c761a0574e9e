"""The TorchNeuron stand-in: PyTorch's ``neuron`` device on CPU, for machines without a Trainium.

Switched on per process by ``NEURON_STANDIN=1`` (read by :func:`autoload`, which torch calls on ``import torch``
through its device-backend autoload entry point, as it loads torch_neuronx on a trn2) or by :func:`activate`.
Importing this package never switches it on. :func:`activation_env` gives the environment that switches it on for
a process and every process it starts (torchrun workers, notebook kernels, the harness's workers).

What it provides and what it cannot show: docs/reference/standin.md.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from standin.after_import import after_import
from standin.unavailable import StandinUnavailable

SWITCH = "NEURON_STANDIN"
# Holds the stand-in ``torch_neuronx`` package: importable only where this directory is on the path.
SITE_DIR = Path(__file__).with_name("site")
# The stand-in's C++ backend is compiled against the installed torch and registers through PyTorch's PrivateUse1
# C++ interfaces (hooks, device guard, allocator, dispatch stubs), which change between releases: it is tested
# with these releases, the ones pyproject.toml allows (torch>=2.13,<2.15).
SUPPORTED_TORCH = ((2, 13), (2, 14))
# A stand-in run never reaches the Hub or the network.
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

_active = False


def is_active() -> bool:
    """True once this process has the stand-in ``neuron`` device."""
    return _active


def activation_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (default: ``os.environ``) that switches the stand-in on for a process and all its
    children: the switch, the stand-in's ``torch_neuronx`` on ``PYTHONPATH``, the Hub offline."""
    result = dict(os.environ if env is None else env)
    result[SWITCH] = "1"
    kept = [p for p in result.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(SITE_DIR)]
    result["PYTHONPATH"] = os.pathsep.join([str(SITE_DIR), *kept])
    result.update(OFFLINE)
    result.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)  # "0" would turn the switch off
    return result


def check_supported() -> None:
    """Raise StandinUnavailable, with what to do, where the stand-in cannot run."""
    from standin.native import torch_version

    installed = torch_version()
    version = tuple(int(part) for part in installed.split("+")[0].split(".")[:2])
    if version not in SUPPORTED_TORCH:
        supported = ", ".join(f"{major}.{minor}" for major, minor in SUPPORTED_TORCH)
        raise StandinUnavailable(
            f"the neuron stand-in supports torch {supported}; this is torch {installed}. Install the "
            "pinned torch (bash scripts/setup.sh), or unset NEURON_STANDIN."
        )
    if _active:
        return
    spec = importlib.util.find_spec("torch_neuronx") if "torch_neuronx" not in sys.modules else None
    module = sys.modules.get("torch_neuronx")
    origin = spec.origin if spec is not None else getattr(module, "__file__", None)
    if origin is not None and not Path(origin).resolve().is_relative_to(SITE_DIR.resolve()):
        raise StandinUnavailable(
            f"a real torch_neuronx is installed ({origin}): this host runs TorchNeuron itself, so the stand-in "
            "stays off. Unset NEURON_STANDIN and use the neuron device."
        )
    torch = sys.modules.get("torch")  # a process that has not imported torch has registered no backend
    backend = torch._C._get_privateuse1_backend_name() if torch is not None else "privateuseone"
    if backend != "privateuseone":
        raise StandinUnavailable(
            f"PyTorch's PrivateUse1 backend is already registered as {backend!r}; the stand-in cannot register "
            "'neuron' in the same process."
        )


def activate() -> None:
    """Switch the stand-in on in this process (idempotent): the ``neuron`` device, ``torch.neuron``, the
    ``neuron`` Dynamo and process-group backends, and ``import torch_neuronx``."""
    global _active
    if _active:
        return
    import torch  # first: its backends autoload, and the check is of this process's PrivateUse1 backend

    check_supported()
    if str(SITE_DIR) not in sys.path:
        sys.path.insert(0, str(SITE_DIR))
    from standin import autocast, distributed, dynamo, kernels, runtime, sharing

    runtime.register()
    kernels.register()
    sharing.register()
    autocast.register()
    dynamo.run_rng_state_ops_on_the_device()
    # Dynamo, when it is imported: 1.3 s of imports that a process that never compiles (a launcher, an eager
    # script) need not pay
    after_import("torch._dynamo", lambda _: dynamo.register())
    distributed.register()
    # Backward runs on the thread that calls it, as on CPU: no hand-off to an autograd thread per device (the
    # engine starts one per device of a backend, as for CUDA), so a stand-in backward costs what a CPU one does.
    torch._C._set_multithreading_enabled(False)
    _active = True


def autoload() -> None:
    """torch's device-backend autoload entry point: does nothing unless ``NEURON_STANDIN=1``. A stand-in that
    was asked for but cannot run ends the process with one message and exit code 2."""
    if os.environ.get(SWITCH) != "1":
        return
    try:
        activate()
    except StandinUnavailable as error:
        print(f"neuron stand-in: {error}", file=sys.stderr)
        raise SystemExit(2) from None
