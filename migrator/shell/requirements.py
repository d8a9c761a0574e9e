"""Migrate a requirements file (`requirements*.txt`), line by line as pip reads it.

Each requirement line is parsed with `packaging` (see `installs.py`); comments, blank lines and option lines
(`-r other.txt`, which is migrated as a file of its own when it is in the tree, `--extra-index-url ...`,
`-e ...`) are kept. The first replaced line becomes the TorchNeuron package set, one requirement per line with
its marker, preceded by the Neuron pip repository's `--extra-index-url` when the file lacks it; the other
replaced lines go. Lines left for a person get a TODO comment above them. Every requirement line of the output
must parse again, or nothing is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from migrator.rules import Finding
from migrator.shell import installs
from migrator.shell.nm460_installs import PIP_INSTALL, compiler_unpinned
from migrator.shell.nm472_install_conflict import INSTALL_CONFLICT
from migrator.shell.nm473_install_kept import INSTALL_KEPT
from migrator.transform import TODO_PREFIX
from migrator.verify import MigrationError

_OPTION = re.compile(r"\s*-")
_EDITABLE = re.compile(r"\s*(?:-e|--editable)(?:\s+|=)(\S+)")
_COMMENT = re.compile(r"(^|\s)#.*$")
_LINE_OPTIONS = re.compile(r"\s+-.*$")
_COMMENT_LINE = re.compile(r"\s*#")
_HASH = re.compile(r"(?:^|\s)--hash[=\s]")
_HASHED = (
    "the file is in pip's hash-checking mode (`--hash`), where a requirement without hashes does not install; "
    "regenerate it with hashes (`pip-compile --generate-hashes`) from requirements with the TorchNeuron set"
)


def _requirement_text(line: str) -> str | None:
    """The requirement a line holds, without its comment or its options; None for comments, blanks and
    option lines."""
    text = _COMMENT.sub("", line).strip()
    editable = _EDITABLE.fullmatch(text)
    if editable:  # `-e git+...optimum-neuron`: an install of that package
        return editable[1]
    if not text or _OPTION.match(text) or text.endswith("\\"):
        return None  # a continuation at the end of the file
    # pip ends the requirement at the first word that starts with `-` (`pkg --hash=...`, `pkg --extra-index-url
    # URL`): the rest are options of that line.
    return _LINE_OPTIONS.sub("", text)


def migrate_requirements(
    content: str,
    imported: frozenset[str] = frozenset(),
    beside: installs.Importer | None = None,
) -> tuple[str, list[Finding]]:
    """`imported`: modules the code that this file installs for still imports (a notebook's cells and the
    scripts it writes), whose packages stay; `beside`: the same for the code of the file's folder, asked only
    when a legacy package would go (see `installs.plan`)."""
    newline = "\r\n" if "\r\n" in content else "\n"
    lines = content.splitlines(keepends=True)
    logical = _logical_lines(lines)  # first physical line -> the requirement line pip reads, and its lines
    parsed = _parsed_requirements(logical)
    if not installs.concerns_torchneuron(list(parsed.values())):
        return content, []
    stale = {n for n, p in parsed.items() if installs.stale(p)}
    current = {n: p for n, p in parsed.items() if n not in stale}
    plan = installs.plan(list(current.values()), imported, beside)
    todos = _Todos(logical)
    _add_plan_todos(todos, current, plan)
    legacy = [n for n, p in current.items() if installs.replaced(p) and not plan.keeps(p)]
    # An XLA-era torch-neuronx alone is replaced too (removed without a replacement, torch-neuronx would go).
    replaced = sorted({*legacy, *stale})
    # pip checks every requirement's hashes once one has `--hash`: a replacement without hashes would not install.
    if any(_HASH.search(line) for line, _ in logical.values()):
        for number in replaced:
            todos.add(INSTALL_KEPT, number, _HASHED)
        replaced = []
    replacement = _Replacement.of(lines, logical, current, replaced, plan.added, newline)
    migrated = "".join(_rewritten_lines(lines, replacement, todos, newline))
    if _unparsed(migrated) > _unparsed(content):
        raise MigrationError("internal error: the migrated requirements file has a line pip could not read")
    findings = todos.findings
    findings.sort(key=lambda f: (f.line, f.column, f.code))
    return migrated, findings


def _add_plan_todos(todos: _Todos, current: dict[int, installs.Parsed], plan: installs.Plan) -> None:
    """A TODO on each requirement the plan keeps although it is legacy, or finds in conflict."""
    for number, requirement in current.items():
        for rule, reasons in ((INSTALL_KEPT, plan.kept), (INSTALL_CONFLICT, plan.conflicts)):
            for why in (why for owner, why in reasons if owner is requirement):
                todos.add(rule, number, why)


def _parsed_requirements(logical: dict[int, tuple[str, range]]) -> dict[int, installs.Parsed]:
    """The requirements pip reads, by their first physical line."""
    parsed: dict[int, installs.Parsed] = {}
    for number, (line, _) in logical.items():
        text = _requirement_text(line)
        requirement = installs.parse(text) if text is not None else None
        if requirement is not None:
            parsed[number] = requirement
    return parsed


class _Todos:
    """The findings on a requirements file, and the TODO comments that go above the lines left for a person."""

    def __init__(self, logical: dict[int, tuple[str, range]]) -> None:
        self.logical = logical
        self.findings: list[Finding] = []
        self.comments: dict[int, list[str]] = {}

    def add(self, rule, number: int, why: str) -> None:
        message = f"`{_requirement_text(self.logical[number][0])}` left as it is: {why}"
        self.findings.append(Finding(rule, number + 1, 1, message, False))
        self.comments.setdefault(number, []).append(f"{TODO_PREFIX} {rule.code} {message}")

    def above(self, lines: list[str], number: int, newline: str) -> list[str]:
        """The TODO lines to write above line `number`, less those already there."""
        wanted = self.comments.get(number, [])
        there = _comments_above(lines, number) if wanted else set()
        return [f"{text}{newline}" for text in wanted if text not in there]


@dataclass
class _Replacement:
    """The lines of a requirements file that change: the first replaced requirement becomes the TorchNeuron
    package set, the other replaced ones go, and the XLA-era compiler loses its pin."""

    first: int | None  # the line that becomes the package set
    package_set: list[str]  # its lines, after the Neuron pip repository's `--extra-index-url` when needed
    dropped: set[int]  # every physical line of a replaced requirement
    unpinned: dict[int, str]  # a compiler requirement's line -> the requirement without its pin

    @classmethod
    def of(
        cls,
        lines: list[str],
        logical: dict[int, tuple[str, range]],
        current: dict[int, installs.Parsed],
        replaced: list[int],
        added: list[str],
        newline: str,
    ) -> _Replacement:
        if not replaced:
            return cls(None, [], set(), {})
        dropped = {line for number in replaced for line in logical[number][1]}
        # Where torch-neuronx comes from, unless a line that stays names it (a replaced line may hold it as an
        # option).
        has_index = any(installs.NEURON_INDEX in line for n, line in enumerate(lines) if n not in dropped)
        index = [] if has_index else [f"--extra-index-url {installs.NEURON_INDEX}{newline}"]
        # The compiler of the XLA-era release would hold pip to that release's torch-neuronx.
        unpinned = {
            number: text
            for number, requirement in current.items()
            if len(logical[number][1]) == 1 and (text := installs.unpinned_compiler(requirement))
        }
        package_set = [*index, *(f"{text}{newline}" for text in added)]
        return cls(replaced[0], package_set, dropped, unpinned)


def _rewritten_lines(lines: list[str], replacement: _Replacement, todos: _Todos, newline: str) -> list[str]:
    """The file's lines with the replacement made and the TODO comments added (its findings go to `todos`)."""
    out: list[str] = []
    for number, line in enumerate(lines):
        out += todos.above(lines, number, newline)
        if number in replacement.unpinned:
            requirement = _requirement_text(line)
            todos.findings.append(Finding(PIP_INSTALL, number + 1, 1, compiler_unpinned(requirement), True))
            out.append(line.replace(requirement, replacement.unpinned[number], 1))
        elif number == replacement.first:
            todos.findings.append(Finding(PIP_INSTALL, number + 1, 1, PIP_INSTALL.action, True))
            out += replacement.package_set
        elif number not in replacement.dropped:
            out.append(line)
    return out


def _logical_lines(lines: list[str]) -> dict[int, tuple[str, range]]:
    """The lines pip reads, by their first physical line: a line ending with `\\` (not a comment line) is
    joined with the next, as pip's `join_lines` does (`pkg==1.0 \\` then `--hash=sha256:...` lines)."""
    logical: dict[int, tuple[str, range]] = {}
    start, parts = 0, []
    for number, line in enumerate(lines):
        text = line.rstrip("\r\n")
        if text.endswith("\\") and not _COMMENT_LINE.match(text) and number < len(lines) - 1:
            parts.append(text[:-1])
            continue
        logical[start] = ("".join(parts) + text, range(start, number + 1))
        start, parts = number + 1, []
    return logical


def _comments_above(lines: list[str], number: int) -> set[str]:
    """The comment lines right above line `number` (a TODO already there is not added again)."""
    above = set()
    while number > 0 and lines[number - 1].lstrip().startswith("#"):
        number -= 1
        above.add(lines[number].strip())
    return above


def _unparsed(content: str) -> int:
    texts = (
        _requirement_text(line) for line, _ in _logical_lines(content.splitlines(keepends=True)).values()
    )
    return sum(1 for text in texts if text is not None and installs.parse(text) is None)
