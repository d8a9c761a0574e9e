"""NM312, decided by the walk of `nm301_sync_and_metrics.py`: one look at each statement call of the lazy
graph removes a sync (NM301) or a metrics report."""

from __future__ import annotations

from migrator.rules import Example, Rule, Severity

METRICS_REPORT = Rule(
    "NM312",
    Severity.INFO,
    "`met.metrics_report()` / `met.short_metrics_report()` prints XLA compile/execution counters",
    "Removed; recompilations show with `TORCH_LOGS=recompiles`.",
    examples=(
        Example(
            before="""\
import torch_xla.debug.metrics as met

print(met.short_metrics_report())
""",
            after="""\

""",
        ),
    ),
)
RULES = (METRICS_REPORT,)
HANDLER = None  # decided in `nm301_sync_and_metrics.py`
