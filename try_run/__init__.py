"""`neuron-migrate try`: run a migrated script, launcher or notebook for a few steps on the stand-in `neuron`
device with tiny models and local data, and report what a trn2 would recompile (see docs/using/try.md).

Public surface: `try_path`, `TryOptions`, `TryUsageError`, `RunReport` and `report.text_lines`/`summary`.
"""

from try_run.report import RunReport
from try_run.runner import TryOptions, TryUsageError, try_path

__all__ = ["RunReport", "TryOptions", "TryUsageError", "try_path"]
