"""Migrate the dependencies a `pyproject.toml` declares (PEP 621: `[project] dependencies` and each list of
`[project.optional-dependencies]`; Poetry: `[tool.poetry.dependencies]`, each group's and the old
dev-dependencies, one `name = constraint` line each) as a requirements file is (`requirements.py`, one plan from
`installs.plan`; a Poetry constraint is read as its PEP 440 range, `^4.41` as `>=4.41,<5`).

Each list is planned as one install. In each list, the first requirement TorchNeuron replaces becomes the TorchNeuron package set (one string per
requirement, in the list's own quotes and layout), the others go; a requirement left for a person gets a TODO
comment above its line (above the list's key when the list is on one line). Everything outside the edited strings
is kept byte for byte, and the result is read again with `tomllib`: its lists must be exactly the planned ones
and the rest of the document unchanged, or nothing is written. pip reads no index from a `pyproject.toml`: the
finding says where torch-neuronx comes from. A `setup.py`'s `install_requires` / `extras_require` lists of
literal strings are planned and edited the same way (`migrate_setup`).
"""

from __future__ import annotations

import ast
import re
from copy import deepcopy
from dataclasses import dataclass, field

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from packaging.requirements import Requirement

from migrator.rules import Finding
from migrator.shell import installs
from migrator.shell.nm460_installs import PIP_INSTALL, compiler_unpinned
from migrator.shell.nm472_install_conflict import INSTALL_CONFLICT
from migrator.shell.nm473_install_kept import INSTALL_KEPT
from migrator.transform import TODO_PREFIX
from migrator.verify import MigrationError
from usercode.python import ast_nodes

_STRING = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'")
_COMMENT = re.compile(r"#[^\n]*")


@dataclass
class _Entry:
    text: str  # the requirement, as TOML reads it
    start: int  # the string literal's span in the file, quotes included
    end: int
    parsed: installs.Parsed | None
    key: str = ""  # a Poetry table's key (the package name as written)


@dataclass
class _Array:
    path: tuple[str, ...]  # ("project", "dependencies"), ("project", "optional-dependencies", "neuron")
    key: int  # offset of the line that opens it (`dependencies = [`)
    start: int  # offset of its `[`
    entries: list[_Entry] = field(default_factory=list)
    poetry: bool = False  # a Poetry table (`name = "constraint"` per line), not a list of requirement strings

    def one_line(self, content: str) -> bool:
        if self.poetry:
            return False
        return not self.entries or "\n" not in content[self.start : self.entries[-1].end]


def migrate_pyproject(content: str, beside: installs.Importer | None = None) -> tuple[str, list[Finding]]:
    """`beside`: which file of the project's code still imports a legacy module once migrated (see
    `installs.plan`); a package it imports stays."""
    try:
        data = tomllib.loads(content)
    except tomllib.TOMLDecodeError:
        return content, []  # not ours to judge: pip reports it
    arrays = _arrays(content, data) + _poetry_tables(content, data)
    requirements = [entry.parsed for array in arrays for entry in array.entries if entry.parsed is not None]
    if not installs.concerns_torchneuron(requirements):
        return content, []
    edits: list[tuple[int, int, str]] = []  # (start, end, text) in the input
    findings: list[Finding] = []
    expected = deepcopy(data)
    for array in arrays:
        # Each list is an install of its own (an extra, a Poetry group): its markers, its packages. An XLA-era
        # torch-neuronx goes, and the current one comes with the package set.
        current = [e.parsed for e in array.entries if e.parsed is not None and not installs.stale(e.parsed)]
        plan = installs.plan(current, frozenset(), beside)
        kept = _planned_todos(content, array, plan, edits, findings)
        if array.poetry:
            wanted = _replace_poetry(content, _get(data, array.path), array, plan, kept, edits, findings)
        else:
            wanted = _replace(content, array, plan, kept, edits, findings)
        _set(expected, array.path, wanted)
    if not edits:
        return content, findings
    migrated = _applied(content, edits)
    try:
        again = tomllib.loads(migrated)
    except tomllib.TOMLDecodeError as error:
        raise MigrationError(
            f"internal error: the migrated pyproject.toml does not parse ({error})"
        ) from None
    if again != expected:
        raise MigrationError(
            "internal error: the migrated pyproject.toml does not declare the planned dependencies"
        )
    findings.sort(key=lambda f: (f.line, f.column, f.code))
    return migrated, findings


def migrate_setup(content: str, beside: installs.Importer | None = None) -> tuple[str, list[Finding]]:
    """The `install_requires=[...]` and `extras_require={"x": [...]}` lists of literal strings a `setup.py` passes
    to `setup()`, planned and edited as a pyproject.toml's lists; the output is parsed again with `ast` and its
    lists must be the planned ones (a list built in code is left as it is)."""
    try:
        tree = ast.parse(content)
    except SyntaxError:
        return content, []
    arrays = _setup_lists(content, tree)
    edits: list[tuple[int, int, str]] = []
    findings: list[Finding] = []
    expected = {}
    for array in arrays:
        current = [e.parsed for e in array.entries if e.parsed is not None and not installs.stale(e.parsed)]
        if not installs.concerns_torchneuron([e.parsed for e in array.entries if e.parsed is not None]):
            expected[array.path] = [entry.text for entry in array.entries]
            continue
        plan = installs.plan(current, frozenset(), beside)
        kept = _planned_todos(content, array, plan, edits, findings)
        expected[array.path] = _replace(content, array, plan, kept, edits, findings)
    if not edits:
        return content, findings
    migrated = _applied(content, edits)
    try:
        again = {
            array.path: [entry.text for entry in array.entries]
            for array in _setup_lists(migrated, ast.parse(migrated))
        }
    except SyntaxError as error:
        raise MigrationError(f"internal error: the migrated setup.py does not parse ({error})") from None
    if again != expected:
        raise MigrationError(
            "internal error: the migrated setup.py does not declare the planned dependencies"
        )
    findings.sort(key=lambda f: (f.line, f.column, f.code))
    return migrated, findings


def _setup_lists(content: str, tree: ast.Module) -> list[_Array]:
    """The dependency lists of the `setup(...)` calls: `install_requires=`, each `extras_require=` entry."""
    offsets = [0]
    for line in content.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))

    def offset(line: int, column: int) -> int:  # ast columns count UTF-8 bytes
        text = content[offsets[line - 1] : offsets[line]]
        return offsets[line - 1] + len(text.encode()[:column].decode(errors="replace"))

    def array(path: tuple[str, ...], node: ast.expr) -> _Array | None:
        if not isinstance(node, ast.List) or not all(
            isinstance(item, ast.Constant) and isinstance(item.value, str) for item in node.elts
        ):
            return None
        found = _Array(path, offset(node.lineno, 0), offset(node.lineno, node.col_offset))
        for item in node.elts:
            start, end = offset(item.lineno, item.col_offset), offset(item.end_lineno, item.end_col_offset)
            if not _STRING.fullmatch(content[start:end]):
                return None  # implicit concatenation, a prefix: not a plain literal to edit in place
            found.entries.append(_Entry(item.value, start, end, installs.parse(item.value)))
        return found

    arrays = []
    for call in ast_nodes(tree):
        if not isinstance(call, ast.Call) or not (
            (isinstance(call.func, ast.Name) and call.func.id == "setup")
            or (isinstance(call.func, ast.Attribute) and call.func.attr == "setup")
        ):
            continue
        for keyword in call.keywords:
            if keyword.arg == "install_requires":
                arrays.append(array(("install_requires",), keyword.value))
            elif keyword.arg == "extras_require" and isinstance(keyword.value, ast.Dict):
                for key, value in zip(keyword.value.keys, keyword.value.values, strict=True):
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        arrays.append(array(("extras_require", key.value), value))
    return [found for found in arrays if found is not None]


def _applied(content: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, text in sorted(edits, reverse=True):
        content = content[:start] + text + content[end:]
    return content


def _planned_todos(
    content: str, array: _Array, plan: installs.Plan, edits: list, findings: list[Finding]
) -> set[int]:
    """A TODO on each requirement the plan keeps although it is legacy, or finds in conflict; the indexes of the
    entries it keeps."""
    kept = set()
    for index, entry in enumerate(array.entries):
        for rule, reasons in ((INSTALL_KEPT, plan.kept), (INSTALL_CONFLICT, plan.conflicts)):
            for why in (why for owner, why in reasons if owner is entry.parsed):
                kept.add(index)
                message = f"`{entry.text}` left as it is: {why}"
                findings.append(Finding(rule, _line(content, entry.start), 1, message, False))
                at = array.key if array.one_line(content) else _line_start(content, entry.start)
                indent = re.match(r"[ \t]*", content[at:]).group(0)
                comment = f"{TODO_PREFIX} {rule.code} {message}"
                if comment not in _comments_above(content, at):
                    edits.append((at, at, f"{indent}{comment}\n"))
    return kept


def _replace(
    content: str, array: _Array, plan: installs.Plan, kept: set[int], edits: list, findings: list[Finding]
) -> list[str]:
    """The edits that replace the list's legacy requirements; the list as it must read afterwards."""
    replaced = _replaced(array, plan, kept)
    wanted = [entry.text for entry in array.entries]
    for index, entry in enumerate(array.entries):
        unpinned = installs.unpinned_compiler(entry.parsed) if entry.parsed is not None else None
        if unpinned and index not in replaced:
            quote = content[entry.start]
            edits.append((entry.start, entry.end, f"{quote}{unpinned}{quote}"))
            findings.append(
                Finding(PIP_INSTALL, _line(content, entry.start), 1, compiler_unpinned(entry.text), True)
            )
            wanted[index] = unpinned
    if not replaced:
        return wanted
    first = array.entries[replaced[0]]
    quote = content[first.start]
    separator = (
        ", " if array.one_line(content) else ",\n" + content[_line_start(content, first.start) : first.start]
    )
    edits.append((first.start, first.end, separator.join(f"{quote}{text}{quote}" for text in plan.added)))
    for index in replaced[1:]:
        edits.append(_removal(content, array.entries[index]))
    message = (
        f"Replaced with the TorchNeuron package set ({', '.join(plan.added)}); torch-neuronx comes from the Neuron "
        f"pip repository, and pip reads no index from a package's declared dependencies: install with "
        f"`pip install --extra-index-url {installs.NEURON_INDEX} .`"
    )
    findings.append(Finding(PIP_INSTALL, _line(content, first.start), 1, message, True))
    at = replaced[0]
    return [
        *wanted[:at],
        *plan.added,
        *(text for i, text in enumerate(wanted) if i > at and i not in replaced),
    ]


def _replaced(array: _Array, plan: installs.Plan, kept: set[int]) -> list[int]:
    """The entries of a list that TorchNeuron replaces (an XLA-era torch-neuronx included)."""
    return [
        index
        for index, entry in enumerate(array.entries)
        if entry.parsed is not None
        and index not in kept
        and (
            installs.stale(entry.parsed) or (installs.replaced(entry.parsed) and not plan.keeps(entry.parsed))
        )
    ]


def _replace_poetry(
    content: str, table: dict, array: _Array, plan: installs.Plan, kept: set[int], edits: list, findings: list
) -> dict:
    """A Poetry table's edits: the first replaced line becomes one line per package of the set (`name = "*"`),
    the other replaced lines go; the table as it must read afterwards."""
    replaced = _replaced(array, plan, kept)
    if not replaced:
        return table
    first = array.entries[replaced[0]]
    indent = content[_line_start(content, first.start) : first.start]
    lines = [_poetry_line(text) for text in plan.added]
    edits.append((first.start, first.end, f"\n{indent}".join(lines)))
    for index in replaced[1:]:
        edits.append(_removal(content, array.entries[index]))
    message = (
        f"Replaced with the TorchNeuron package set ({', '.join(plan.added)}); torch-neuronx comes from the Neuron "
        f"pip repository: add it as a source, `poetry source add --priority=supplemental neuron "
        f"{installs.NEURON_INDEX}`"
    )
    findings.append(Finding(PIP_INSTALL, _line(content, first.start), 1, message, True))
    names = {array.entries[index].key for index in replaced}
    wanted = {key: value for key, value in table.items() if key not in names}
    wanted.update(tomllib.loads("\n".join(lines)))
    return wanted


def _poetry_line(requirement: str) -> str:
    """`transformers>=5.23` as a Poetry dependency line: `transformers = ">=5.23"` (a marker in an inline table)."""
    parsed = Requirement(requirement)
    version = str(parsed.specifier) or "*"
    if parsed.marker is None:
        return f'{parsed.name} = "{version}"'
    return f"{parsed.name} = {{ version = \"{version}\", markers = '{parsed.marker}' }}"  # packaging writes "x86_64"


def _poetry_tables(content: str, data: dict) -> list[_Array]:
    """Poetry's dependency tables (`[tool.poetry.dependencies]`, each group's, the old dev-dependencies), their
    one-line entries located in the text; a table written another way is left as it is."""
    poetry = data.get("tool", {}).get("poetry", {})
    wanted = [("dependencies",), ("dev-dependencies",)]
    wanted += [("group", group, "dependencies") for group in poetry.get("group", {})]
    tables = []
    for keys in wanted:
        path = ("tool", "poetry", *keys)
        try:
            table = _get(data, path)
        except KeyError:
            continue
        array = _locate_table(content, ".".join(path), path, table)
        if array is not None:
            tables.append(array)
    return tables


_POETRY_LINE = re.compile(r"(?m)^[ \t]*([A-Za-z0-9][\w.-]*)[ \t]*=[ \t]*(\"[^\"\n]*\"|'[^'\n]*'|\{[^\n}]*\})")


def _locate_table(content: str, header: str, path: tuple[str, ...], table: dict) -> _Array | None:
    found = re.search(rf"(?m)^[ \t]*\[[ \t]*{re.escape(header)}[ \t]*\][ \t]*(?:#.*)?$", content)
    if found is None:
        return None
    following = re.search(r"(?m)^[ \t]*\[", content[found.end() :])
    end = found.end() + following.start() if following else len(content)
    array = _Array(path, found.start(), found.end(), poetry=True)
    for line in _POETRY_LINE.finditer(content, found.end(), end):
        name = line.group(1)
        if name not in table or name == "python":
            continue
        requirement = _poetry_requirement(name, table[name])
        parsed = installs.parse(requirement) if requirement is not None else None
        written = content[line.start(1) : line.end(2)]  # what a TODO quotes
        array.entries.append(_Entry(written, line.start(1), line.end(2), parsed, name))
    return array if {entry.key for entry in array.entries} == set(table) - {"python"} else None


def _poetry_requirement(name: str, value) -> str | None:
    """A Poetry dependency as a PEP 508 requirement, for the plan: `^4.41` is `>=4.41,<5`."""
    if isinstance(value, dict):
        extras = f"[{','.join(value.get('extras', []))}]" if value.get("extras") else ""
        version = value.get("version", "*")
        marker = f"; {value['markers']}" if value.get("markers") else ""
    elif isinstance(value, str):
        extras, version, marker = "", value, ""
    else:
        return None
    return f"{name}{extras}{_poetry_specifier(version)}{marker}"


def _poetry_specifier(constraint: str) -> str:
    constraint = constraint.strip()
    if constraint in ("*", ""):
        return ""
    caret = re.fullmatch(r"\^(\d+)(?:\.(\d+))?(?:\.\d+)*", constraint)
    if caret:
        major, minor = int(caret[1]), int(caret[2] or 0)
        upper = f"{major + 1}" if major else f"0.{minor + 1}"
        return f">={constraint[1:]},<{upper}"
    tilde = re.fullmatch(r"~(\d+)(?:\.(\d+))?(?:\.\d+)*", constraint)
    if tilde:
        major, minor = int(tilde[1]), tilde[2]
        upper = f"{major}.{int(minor) + 1}" if minor is not None else f"{major + 1}"
        return f">={constraint[1:]},<{upper}"
    if re.fullmatch(r"\d[\w.]*", constraint):
        return f"=={constraint}"
    return constraint


def _removal(content: str, entry: _Entry) -> tuple[int, int, str]:
    """The edit that removes an entry and its comma: its whole line when it stands alone on it."""
    after = re.match(r"[ \t]*,?[ \t]*", content[entry.end :]).end()
    line_start = _line_start(content, entry.start)
    line_end = content.find("\n", entry.end)
    if not content[line_start : entry.start].strip() and not content[entry.end + after : line_end].strip():
        return line_start, line_end + 1, ""
    if "," not in content[entry.end : entry.end + after]:  # the last of the list: the comma before it goes
        before = re.search(r",[ \t]*$", content[: entry.start])
        return (before.start() if before else entry.start), entry.end, ""
    return entry.start, entry.end + after, ""


def _arrays(content: str, data: dict) -> list[_Array]:
    """The dependency lists of the document, located in its text (a list written another way, inline in a table,
    is not: it stays as it is)."""
    project = data.get("project", {})
    wanted = []
    if isinstance(project.get("dependencies"), list):
        wanted.append((("project", "dependencies"), "project", "dependencies"))
    for name, value in (project.get("optional-dependencies") or {}).items():
        if isinstance(value, list):
            wanted.append((("project", "optional-dependencies", name), "project.optional-dependencies", name))
    arrays = []
    for path, table, key in wanted:
        array = _locate(content, table, key, path)
        if array is not None and [entry.text for entry in array.entries] == _get(data, path):
            arrays.append(array)
    return arrays


def _locate(content: str, table: str, key: str, path: tuple[str, ...]) -> _Array | None:
    header = re.search(rf"(?m)^[ \t]*\[[ \t]*{re.escape(table)}[ \t]*\][ \t]*(?:#.*)?$", content)
    if header is None:
        return None
    following = re.search(r"(?m)^[ \t]*\[", content[header.end() :])
    end = header.end() + following.start() if following else len(content)
    quoted = re.escape(key) if re.fullmatch(r"[\w-]+", key) else re.escape(f'"{key}"')
    opening = re.compile(rf"(?m)^[ \t]*(?:{quoted}|\"{re.escape(key)}\")[ \t]*=[ \t]*\[").search(
        content, header.end(), end
    )
    if opening is None:
        return None
    array = _Array(path, opening.start(), opening.end() - 1)
    position = opening.end()
    while position < len(content):
        blank = re.compile(r"[\s,]+|#[^\n]*").match(content, position)
        if blank:
            position = blank.end()
            continue
        if content[position] == "]":
            return array
        string = _STRING.match(content, position)
        if string is None:
            return None  # not a list of plain strings
        text = tomllib.loads(f"v = {string.group(0)}")["v"]
        array.entries.append(_Entry(text, string.start(), string.end(), installs.parse(text)))
        position = string.end()
    return None


def _get(data: dict, path: tuple[str, ...]):
    for key in path:
        data = data[key]
    return data


def _set(data: dict, path: tuple[str, ...], value: list[str]) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


def _line(content: str, offset: int) -> int:
    return content.count("\n", 0, offset) + 1


def _line_start(content: str, offset: int) -> int:
    return content.rfind("\n", 0, offset) + 1


def _comments_above(content: str, at: int) -> set[str]:
    lines = content[:at].split("\n")[:-1]
    above = set()
    while lines and lines[-1].lstrip().startswith("#"):
        above.add(lines.pop().strip())
    return above
