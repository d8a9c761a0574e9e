"""A run's output as a try's report keeps it: the last lines the user's own processes printed.

torchrun ends a failed run with its own traceback (`ChildFailedError`) and a summary of each worker's exit,
about 35 lines that would fill the report's tail and hide what the workers printed before they failed (an
argument parser's `error:` line, a message before `sys.exit(1)`). `condensed` keeps the workers' lines and
puts torchrun's summary in one line: which script failed, the rank that failed first and its exit code.
"""

from __future__ import annotations

import re

# torchrun's own log lines (glog format: `W1206 08:08:34.036000 56 torch/distributed/run.py:874] ...`).
_LAUNCHER_LOG = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ \S*torch/distributed/(?:run\.py|elastic/|launcher/)")
# c10d's warning in each process of a run in the sandbox, whose network namespace has no host name to resolve.
_SANDBOX_HOSTNAME = re.compile(
    r"^\[W\d{4} [\d:.]+ socket\.cpp:\d+\] \[c10d\] The hostname of the client socket"
)
_CHILD_FAILED = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"
_BORDER = re.compile(r"^=+$")
_RANK = re.compile(r"^\s*rank\s*: (\d+)")
_EXIT = re.compile(r"^\s*exitcode\s*: (-?\d+) \(pid: \d+\)\s*(?:\((\w+)\))?")
_RANK_PREFIX = re.compile(r"^\[rank\d+\]: ?")  # torchrun's prefix on a worker's traceback lines


def condensed(lines: list[str]) -> list[str]:
    """`lines` without torchrun's log lines and the sandbox's host-name warnings, each failure summary of
    torchrun in one line."""
    kept: list[str] = []
    position = 0
    while position < len(lines):
        line = lines[position]
        if line.startswith(_CHILD_FAILED):
            end, summary = _summary(lines, position + 1)
            while kept and (kept[-1].startswith(("Traceback", " ")) or not kept[-1].strip()):
                kept.pop()  # torchrun's own traceback, above its exception line
            kept.append(summary)
            position = end
            continue
        if not _LAUNCHER_LOG.match(line) and not _SANDBOX_HOSTNAME.match(line):
            kept.append(line)
        position += 1
    return kept


def _summary(lines: list[str], start: int) -> tuple[int, str]:
    """(the index after torchrun's summary block that starts at `start`, the block in one line)."""
    borders = [index for index in range(start, len(lines)) if _BORDER.match(lines[index].strip())][:2]
    end = borders[1] + 1 if len(borders) == 2 else len(lines)
    block = lines[start:end]
    title = next((line.strip() for line in block if line.strip().endswith(" FAILED")), "a worker FAILED")
    root = next((index for index, line in enumerate(block) if line.startswith("Root Cause")), None)
    rank = code = signal = None
    for line in block[root or 0 :]:
        rank = rank or (_RANK.match(line) and _RANK.match(line).group(1))
        exit_match = _EXIT.match(line)
        if exit_match and code is None:
            code, signal = exit_match.group(1), exit_match.group(2)
    first = f": rank {rank} failed first, exit code {code}" if rank is not None and code is not None else ""
    return end, f"torchrun: {title}{first}{f' ({signal})' if signal else ''}"


def last_distinct(lines: list[str], count: int) -> list[str]:
    """The last `count` different lines, in order, without torchrun's `[rankN]:` prefix: each rank of a launch
    prints the same error."""
    picked: list[str] = []
    for line in reversed(lines):
        line = _RANK_PREFIX.sub("", line)
        if line not in picked:
            picked.insert(0, line)
            if len(picked) == count:
                break
    return picked
