"""The stand-in's C++ backend (backend.cpp): compiled once per source and torch version with PyTorch's own
extension builder, then loaded from the cache. ``python -m standin.native`` builds it ahead
(set-up does), so the first stand-in process does not wait about 20 seconds for the compiler."""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from standin.unavailable import StandinUnavailable

SOURCE = Path(__file__).with_name("backend.cpp")
NAME = "neuron_standin"


def build_directory() -> Path:
    import torch

    key = hashlib.sha256(SOURCE.read_bytes() + torch.__version__.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "neuron-migrate" / f"standin-{key}"


@functools.cache
def load() -> ModuleType:
    """The compiled backend; importing it registers the PrivateUse1 kernels (only the stand-in calls this)."""
    directory = build_directory()
    library = directory / f"{NAME}.so"
    if library.exists() and not (directory / "lock").exists():  # (PyTorch's builder holds the lock)
        spec = importlib.util.spec_from_file_location(
            NAME, library, loader=importlib.machinery.ExtensionFileLoader(NAME, str(library))
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    from torch.utils.cpp_extension import load as build

    try:
        import ninja
    except ImportError:
        raise StandinUnavailable(
            "the stand-in's C++ backend is built with ninja, which is not installed: pip install ninja "
            "(bash scripts/setup.sh installs it)"
        ) from None
    directory.mkdir(parents=True, exist_ok=True)
    # PyTorch's builder runs `ninja` from PATH; the venv's may not be on it.
    os.environ["PATH"] = os.pathsep.join([ninja.BIN_DIR, os.environ.get("PATH", "")])
    print(f"neuron stand-in: compiling its backend once (about 20 s) into {directory}", file=sys.stderr)
    try:
        return build(name=NAME, sources=[str(SOURCE)], extra_cflags=["-O2"], build_directory=str(directory))
    except (RuntimeError, OSError) as error:  # no compiler, or it failed: PyTorch's builder says which
        raise StandinUnavailable(
            f"could not compile the stand-in's C++ backend ({SOURCE.name}) with this machine's C++ compiler "
            f"(the stand-in needs g++ or another compiler PyTorch's extension builder finds): "
            f"{str(error).splitlines()[0] if str(error) else type(error).__name__}"
        ) from None


if __name__ == "__main__":
    load()
    print(build_directory())
