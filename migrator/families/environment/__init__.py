"""Environment (NM400-NM449, Python side): variables, async weight loading, dynamic shapes.

- XLA/NxD-only variables set through `os.environ` are removed; the ones whose TorchNeuron replacement is
  unverified get a TODO (`nm400_variables.py`, tables in `variables.py`, shared with the shell family).
- Tests of `NEURON_EXTRACT_GRAPHS_ONLY` / `NEURON_PARALLEL_COMPILE` (only ever set by
  `neuron_parallel_compile`, which TorchNeuron does not have) are folded to their value when unset
  (`nm402_precompile.py`).
- `HF_DEACTIVATE_ASYNC_LOAD=1` is set once after the imports of a migrated file that loads weights (C9,
  `nm404_async_load.py`).
- `torch.compile` gets `dynamic=False` and loses `mode=` values the neuron backend ignores (C4, C6,
  `nm405_compile.py`).
"""

# The shell family reads the variable tables from here.
from migrator.families.environment.variables import MANUAL_VARIABLES, PRECOMPILE_VARIABLES, dropped_reason

__all__ = ["MANUAL_VARIABLES", "PRECOMPILE_VARIABLES", "dropped_reason"]
