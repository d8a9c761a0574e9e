"""neuron-migrate: rewrite optimum-neuron and PyTorch/XLA scripts into plain Transformers/TRL/PEFT on
TorchNeuron's "neuron" device, and report precisely what could not be rewritten."""

from __future__ import annotations

from pathlib import Path

from migrator.version import __version__

__all__ = ["__version__", "analyze_paths"]


def analyze_paths(paths: list[Path], exclude: tuple[str, ...] = ()) -> dict:
    """The `--format json` report for `paths`, computed without writing anything."""
    from migrator.engine import analyze
    from migrator.report import json_report
    from migrator.sources import discover

    return json_report(analyze(discover([Path(p) for p in paths], exclude)))
