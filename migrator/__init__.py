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
    writing anything; progress on standard error as `neuron-migrate` shows it."""
    from migrator.engine import DEFAULT_TIMEOUT_S, Job, Mode, run
    from migrator.progress import Progress
    from usercode.sources import discover

    jobs = [
        Job(source, Mode.CHECK, display=str(source.path))
        for source in discover([Path(p) for p in paths], exclude)
    ]
    progress = Progress(jobs, DEFAULT_TIMEOUT_S, verb="reading")
    try:
        return run(jobs, on_done=progress.done, on_tick=progress.tick)
    finally:
        progress.close()
