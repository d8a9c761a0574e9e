"""The shell commands of a notebook's Python cells (`!cmd`, `%pip`, `%env`, ...) migrated as one script, in the
order the cells run, and put back as the magics they were."""

from __future__ import annotations

import re

from migrator.rules import Finding
from migrator.transform import TODO_PREFIX
from migrator.verify import MigrationError
from usercode.cells import SHELL_MAGICS, ShellLine
from usercode.shell import problems

_SHELL_MARKER = "# __neuron_migrate_command_{}__"
_SHELL_MARKER_RE = re.compile(r"^# __neuron_migrate_command_(\d+)__\n", re.MULTILINE)


def migrate_shell_lines(lines: list[ShellLine], migrate_shell, findings: list[Finding]) -> None:
    """Migrate the notebook's shell commands as one script, in the order the cells run.

    One script, so that a pre-compilation run (`!neuron_parallel_compile torchrun ...`) is recognised
    when the same launch follows in a later cell. Each command still runs in a shell of its own
    (`inline`). A command tree-sitter cannot parse is left out, so it cannot disturb the others.
    """
    lines = [line for line in lines if problems(line.command.encode()) == 0]
    if not lines:
        return
    joined = "".join(f"{_SHELL_MARKER.format(n)}\n{line.command}\n" for n, line in enumerate(lines))
    try:
        migrated, shell_findings = migrate_shell(joined, inline=True)
    except MigrationError:
        if len(lines) > 1:  # one command the rewriter cannot handle must not hold the others back
            for line in lines:
                migrate_shell_lines([line], migrate_shell, findings)
        return
    markers = [joined.count("\n", 0, m.start()) + 1 for m in _SHELL_MARKER_RE.finditer(joined)]
    texts = dict(_split_shell(migrated))
    for number, line in enumerate(lines):
        first, end = markers[number], markers[number + 1] if number + 1 < len(markers) else None
        own = [f for f in shell_findings if f.line > first and (end is None or f.line < end)]
        own = [_shell_finding(f, line, f.line - first) for f in own]
        _rebuild(line, texts.get(number, ""), own, findings)


def _split_shell(migrated: str) -> list[tuple[int, str]]:
    parts = _SHELL_MARKER_RE.split(migrated)
    return [
        (int(parts[i]), parts[i + 1][:-1] if parts[i + 1].endswith("\n") else parts[i + 1])
        for i in range(1, len(parts), 2)
    ]


def _rebuild(line: ShellLine, migrated: str, own: list[Finding], findings: list[Finding]) -> None:
    """Put the migrated command back as its magic (TODO comments above it); None in the cell: removed."""
    shell_prefix, magic_prefix = SHELL_MAGICS[line.magic]
    if migrated == line.command:
        findings += own
        return
    cell = line.cell
    above = set()  # TODOs already above the command: a rerun must not add them again
    for previous in reversed(cell.lines[: line.span.first]):
        if not previous.lstrip().startswith(TODO_PREFIX):
            break
        above.add(previous.strip())
    out, command_lines = [], migrated.splitlines(keepends=True)
    while command_lines and command_lines[0].lstrip().startswith("#"):
        comment = command_lines.pop(0).strip()
        if comment not in above:
            out.append(f"{line.indent}{comment}\n")
    remainder = "".join(command_lines).rstrip("\n")
    if remainder and not remainder.startswith(shell_prefix):
        return  # the rewrite changed what the magic runs in a way it cannot say: keep the original
    findings += own
    if remainder:
        out.append(f"{line.indent}{magic_prefix}{remainder[len(shell_prefix) :]}{line.ending}")
    cell.magics[line.slot] = "".join(out) or None


def _shell_finding(finding: Finding, line: ShellLine, line_in_command: int) -> Finding:
    column = finding.column + line.span.column + line.columns if line_in_command == 1 else finding.column
    shift = line.span.first + line_in_command - finding.line
    others = {other: other + shift for other in finding.also}
    return finding.moved(others, line=finding.line + shift, column=column, cell=line.cell.number)
