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

from migrator.rules import Finding
from migrator.shell import installs
from migrator.shell.nm460_installs import INSTALL_CONFLICT, INSTALL_KEPT, PIP_INSTALL, compiler_unpinned
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
    parsed: dict[int, installs.Parsed] = {}
    for number, (line, _) in logical.items():
        text = _requirement_text(line)
        requirement = installs.parse(text) if text is not None else None
        if requirement is not None:
            parsed[number] = requirement
    if not installs.concerns_torchneuron(list(parsed.values())):
        return content, []
    stale = {n for n, p in parsed.items() if installs.stale(p)}
    current = {n: p for n, p in parsed.items() if n not in stale}
    plan = installs.plan(list(current.values()), imported, beside)
    # pip checks every requirement's hashes once one has `--hash`: a replacement without hashes would not install.
    hashed = any(_HASH.search(line) for line, _ in logical.values())
    findings: list[Finding] = []
    todos: dict[int, list[str]] = {}

    def todo(rule, number: int, why: str) -> None:
        message = f"`{_requirement_text(logical[number][0])}` left as it is: {why}"
        findings.append(Finding(rule, number + 1, 1, message, False))
        todos.setdefault(number, []).append(f"{TODO_PREFIX} {rule.code} {message}")

    for number, requirement in current.items():
        for rule, reasons in ((INSTALL_KEPT, plan.kept), (INSTALL_CONFLICT, plan.conflicts)):
            for why in (why for owner, why in reasons if owner is requirement):
                todo(rule, number, why)
    legacy = [n for n, p in current.items() if installs.replaced(p) and not plan.keeps(p)]
    # An XLA-era torch-neuronx alone is replaced too (removed without a replacement, torch-neuronx would go).
    replaced = sorted({*legacy, *stale})
    if hashed:
        for number in replaced:
            todo(INSTALL_KEPT, number, _HASHED)
        replaced = []
    removed = {line for number in replaced[1:] for line in logical[number][1]}
    # Where torch-neuronx comes from, unless a line that stays names it (a replaced line may hold it as an option).
    gone = {line for number in replaced for line in logical[number][1]}
    has_index = any(installs.NEURON_INDEX in line for n, line in enumerate(lines) if n not in gone)
    # The compiler of the XLA-era release would hold pip to that release's torch-neuronx.
    unpinned = {
        number: text
        for number, requirement in current.items()
        if replaced and len(logical[number][1]) == 1 and (text := installs.unpinned_compiler(requirement))
    }
    out: list[str] = []
    for number, line in enumerate(lines):
        out += [
            f"{text}{newline}" for text in todos.get(number, []) if text not in _comments_above(lines, number)
        ]
        if number in unpinned:
            requirement = _requirement_text(line)
            findings.append(Finding(PIP_INSTALL, number + 1, 1, compiler_unpinned(requirement), True))
            out.append(line.replace(requirement, unpinned[number], 1))
        elif replaced and number == replaced[0]:
            findings.append(Finding(PIP_INSTALL, number + 1, 1, PIP_INSTALL.action, True))
            if not has_index:
                out.append(f"--extra-index-url {installs.NEURON_INDEX}{newline}")
            out += [f"{text}{newline}" for text in plan.added]
        elif number not in removed and not (replaced and number in logical[replaced[0]][1]):
            out.append(line)
    migrated = "".join(out)
    if _unparsed(migrated) > _unparsed(content):
        raise MigrationError("internal error: the migrated requirements file has a line pip could not read")
    findings.sort(key=lambda f: (f.line, f.column, f.code))
    return migrated, findings


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
