"""Run the module-level code of migrated fixture scripts, as `import` would, with the installed stack.

    python tests/migrator/run_fixture_outputs.py OUT.json SCRIPT...

Each script runs in this one process (one torch/transformers import for all) with `runpy` under the name
`__fixture__`, so its `if __name__ == "__main__":` part does not: what runs is what importing it runs (imports,
definitions, module-level statements). The only fakes are the device's, until the stand-in `neuron` device
exists: a `torch_neuronx` package whose import does what TorchNeuron's registration does without a device
behind it (PyTorch's PrivateUse1 backend renamed "neuron", so `torch.device("neuron", i)` parses; a
`torch.neuron` device module; a "neuron" process-group backend, gloo on the host). It is imported first, as
PyTorch's backend autoload imports TorchNeuron's. Scripts run in a one-process torchrun world.

Outcomes, written to OUT.json as {script: [outcome, detail]}: "ran"; "needs data" (an `OSError`: the Hub is
offline, a file is absent: the script stopped at its data, not at the codemod's code); "needs launch"
(`DistributedConfig` rejects sizes computed from a one-process WORLD_SIZE: torchrun must start more); "needs
device" (a tensor op on "neuron", which the fake cannot run); "failed".
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
from contextlib import redirect_stdout
from io import StringIO

# The device fake: what `import torch_neuronx` registers, with no device behind it.
FAKED_MODULES = frozenset({"torch_neuronx"})
_FAKE_TORCH_NEURONX = """\
import types

import torch
import torch.distributed as dist

torch.utils.rename_privateuse1_backend("neuron")
_module = types.ModuleType("torch.neuron")
_module.is_available = lambda: True
_module.device_count = lambda: 1
_module.current_device = lambda: 0
_module.set_device = lambda device: None
_module.synchronize = lambda device=None: None
_module.is_bf16_supported = lambda: True
_module.manual_seed = _module.manual_seed_all = lambda seed: None
torch._register_device_module("neuron", _module)
dist.Backend.register_backend("neuron", lambda store, rank, size, timeout: dist.ProcessGroupGloo(store, rank, size, timeout), devices=["cpu"])
"""
_LAUNCH_CHECK = os.path.join("transformers", "distributed", "configuration_utils.py")


def _fake_neuron_device(directory: str) -> None:
    package = os.path.join(directory, "torch_neuronx")
    os.makedirs(package, exist_ok=True)
    with open(os.path.join(package, "__init__.py"), "w") as handle:
        handle.write(_FAKE_TORCH_NEURONX)
    sys.path.insert(0, directory)
    import torch_neuronx  # noqa: F401


def _run(path: str) -> list[str]:
    sys.argv = [path]
    sys.path.insert(0, os.path.dirname(path))
    try:
        with redirect_stdout(StringIO()):
            runpy.run_path(path, run_name="__fixture__")
    except SystemExit as exit_:
        return ["failed", f"SystemExit({exit_.code})"]
    except OSError as error:
        return [
            "needs data",
            f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}",
        ]
    except BaseException as error:  # noqa: BLE001 - any other failure is the script's
        where = traceback.extract_tb(error.__traceback__)
        if isinstance(error, ValueError) and where[-1].filename.endswith(_LAUNCH_CHECK):
            return ["needs launch", f"{type(error).__name__}: {error}"[:300]]
        if isinstance(error, NotImplementedError) and "from the 'neuron' backend" in str(error):
            return ["needs device", str(error).splitlines()[0][:200]]
        line = next((frame.lineno for frame in reversed(where) if frame.filename == path), None)
        return ["failed", f"line {line}: {type(error).__name__}: {error}"[:300]]
    finally:
        sys.path.remove(os.path.dirname(path))
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    return ["ran", ""]


def main(out: str, scripts: list[str]) -> None:
    _fake_neuron_device(os.path.join(os.path.dirname(os.path.abspath(out)), "device"))
    results = {script: _run(script) for script in scripts}
    with open(out, "w") as handle:
        json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
