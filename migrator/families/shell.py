"""Shell launchers (NM4xx, shell part): line-based, since shell is not Python.

`rewrite_shell(text) -> (new_text, findings)`; lines are numbered from 1 in `text`.
"""

from __future__ import annotations

import re

from migrator.rules import Finding, Severity, define

PARALLEL_COMPILE = define(
    "NM450",
    Severity.INFO,
    "`neuron_parallel_compile` prefix on a launcher line",
    "Removed: TorchNeuron compiles just in time and caches graphs; there is no separate pre-compilation run.",
)

_PARALLEL_COMPILE_PREFIX = re.compile(r"^(\s*)neuron_parallel_compile\s+")


def rewrite_shell(text: str) -> tuple[str, list[Finding]]:
    lines = text.splitlines(keepends=True)
    findings: list[Finding] = []
    out = []
    for number, line in enumerate(lines, start=1):
        match = _PARALLEL_COMPILE_PREFIX.match(line)
        if match:
            findings.append(
                Finding(PARALLEL_COMPILE, number, match.end(1) + 1, PARALLEL_COMPILE.action, True)
            )
            line = match[1] + line[match.end() :]
        out.append(line)
    return "".join(out), findings
