"""What a run is doing, on standard error, while it runs.

On a terminal: one line redrawn in place, the files done and, for each file that has taken over a second, its
name, size and time so far (a 20 MB file shows it is being worked on). Elsewhere (a CI log): a line at the
start of a long run, and one for each file that takes over `SLOW_S`. `-q` shows nothing.
"""

from __future__ import annotations

import os
import shutil
import sys

import click

MANY_FILES = 20  # a run of fewer files is over before a progress line helps
SHOWN_AFTER_S = 1.0  # a file in progress is named once it has taken this long
SLOW_S = 10.0  # in a log, a file that takes this long gets a line of its own


class Progress:
    def __init__(
        self, jobs, timeout: float, enabled: bool = True, stream=None, verb: str = "migrating"
    ) -> None:
        self.stream, self.verb = stream or sys.stderr, verb
        self.total, self.finished = len(jobs), 0
        self.enabled, self.timeout = enabled, timeout
        self.terminal = enabled and _is_terminal(self.stream)
        self.noted: set[int] = set()
        self.drawn = False
        if enabled and not self.terminal and self.total >= MANY_FILES:
            click.echo(f"{verb} {self.total} files", file=self.stream)

    def done(self, _result) -> None:
        self.finished += 1
        if self.terminal:
            self._draw([])

    def tick(self, running) -> None:
        """`running`: (job, seconds so far) of each file in progress."""
        if not self.enabled:
            return
        slow = [(job, seconds) for job, seconds in running if seconds >= SHOWN_AFTER_S]
        if self.terminal:
            self._draw(slow)
            return
        for job, seconds in slow:
            if seconds >= SLOW_S and id(job) not in self.noted:
                self.noted.add(id(job))
                limit = f"; the time limit is {self.timeout:g} s" if self.timeout else ""
                click.echo(
                    f"neuron-migrate: still {self.verb} {job.display} ({_size(job)}) after {seconds:.0f} s{limit}",
                    file=self.stream,
                )

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()

    def _draw(self, slow) -> None:
        if self.total < MANY_FILES and not slow and not self.drawn:
            return
        text = f"{self.verb}: {self.finished}/{self.total} files"
        text += "".join(f"; {job.display} ({_size(job)}) {seconds:.0f} s" for job, seconds in slow)
        width = shutil.get_terminal_size().columns - 1
        self.stream.write("\r\033[K" + (text if len(text) <= width else text[: width - 1] + "…"))
        self.stream.flush()
        self.drawn = True


def _size(job) -> str:
    try:
        size = os.stat(job.source.path).st_size
    except OSError:
        return "size unknown"
    if size < 1000:
        return f"{size} bytes"
    return f"{size / 1e3:.1f} kB" if size < 1e6 else f"{size / 1e6:.1f} MB"


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
