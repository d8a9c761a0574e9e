"""neuron-migrate: rewrite optimum-neuron and PyTorch/XLA scripts into plain Transformers/TRL/PEFT on
TorchNeuron's "neuron" device, and report precisely what could not be rewritten."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from migrator.version import __version__

if TYPE_CHECKING:
    from migrator.engine import FileResult

__all__ = ["__version__", "analyze_paths"]


def analyze_paths(paths: list[Path], exclude: tuple[str, ...] = ()) -> list[FileResult]:
    """Each file's findings (its typed `Finding`s, their rules from `migrator.registry`), computed without
    writing anything."""
    from migrator.engine import analyze
    from migrator.sources import discover

    return analyze(discover([Path(p) for p in paths], exclude))
