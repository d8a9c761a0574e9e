"""The stand-in's C++ backend (``csrc/``): compiled once per source, torch version and Python ABI with PyTorch's own
extension builder, then loaded from the cache.

Laid out as PyTorch's out-of-tree backend example (openreg) lays out its own: ``csrc/runtime/`` (the devices, the
allocators, the generators, the device guard with its streams and events, the PrivateUse1 hooks), ``csrc/aten/``
(the kernels and the boxed fallback that runs every other op's CPU kernel) and ``csrc/bindings.cpp`` (what Python
calls). ``python -m standin.native`` builds it ahead
(set-up does), so the first stand-in process does not wait a minute or more for the compiler."""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import re
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

from standin.unavailable import StandinUnavailable

CSRC = Path(__file__).with_name("csrc")
NAME = "neuron_standin"
UNIT = "backend.cpp"  # the one file compiled: it includes every other .cpp (why: its first lines)
VERSION_LINE = re.compile(r"^__version__ = ['\"]([^'\"]+)['\"]", re.MULTILINE)  # torch/version.py's


def source_files() -> list[Path]:
    """Every source and header of the backend, in a fixed order."""
    return sorted(path for path in CSRC.rglob("*") if path.suffix in (".cpp", ".h"))


def torch_version() -> str:
    """``torch.__version__``, read from ``torch/version.py`` where this process has not imported torch: the
    import takes seconds, and a try's own process only checks and builds for the torch its child imports."""
    if "torch" not in sys.modules:
        spec = importlib.util.find_spec("torch")
        for folder in (spec.submodule_search_locations or []) if spec is not None else []:
            try:
                found = VERSION_LINE.search((Path(folder) / "version.py").read_text(encoding="utf-8"))
            except OSError:
                continue
            if found:
                return found.group(1)
    import torch

    return str(torch.__version__)


def build_directory() -> Path:
    """The cache folder of this build: its key changes with any source or header (its path and its text), with
    the torch version and with the Python ABI (a build for one Python's headers does not load in another)."""
    digest = hashlib.sha256(
        torch_version().encode() + b"\0" + sysconfig.get_config_var("EXT_SUFFIX").encode()
    )
    for path in source_files():
        digest.update(path.relative_to(CSRC).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    key = digest.hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "neuron-migrate" / f"standin-{key}"


@functools.cache
def load() -> ModuleType:
    """The compiled backend; importing it registers the PrivateUse1 kernels (only the stand-in calls this)."""
    import torch  # noqa: F401  (first: the library links against torch's own, which its import loads)

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
    print(
        f"neuron stand-in: compiling its backend once (half a minute or more) into {directory}",
        file=sys.stderr,
    )
    try:
        return build(
            name=NAME,
            sources=[str(CSRC / UNIT)],
            extra_include_paths=[str(CSRC)],
            extra_cflags=["-O2"],
            build_directory=str(directory),
        )
    except (RuntimeError, OSError) as error:  # no compiler, or it failed: PyTorch's builder says which
        raise StandinUnavailable(
            f"could not compile the stand-in's C++ backend ({CSRC}) with this machine's C++ compiler "
            f"(the stand-in needs g++ or another compiler PyTorch's extension builder finds): "
            f"{str(error).splitlines()[0] if str(error) else type(error).__name__}"
        ) from None


if __name__ == "__main__":
    load()
    print(build_directory())
