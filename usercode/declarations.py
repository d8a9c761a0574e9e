"""The distributions a project declares it needs: its dependency files (`requirements*.txt` with their `-r`
includes, `pyproject.toml`'s PEP 621 and Poetry lists, `setup.py`'s literal `install_requires` /
`extras_require`) and the `pip install` commands of its launchers and notebooks. Only named requirements count
(a URL, a path or `-e` is not a declaration a registry can serve). Read, never run."""

from __future__ import annotations

import ast
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from usercode.sources import is_requirements

# pip options that take a value as the next word (the value is not a requirement).
PIP_VALUE_OPTIONS = frozenset(
    {
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
    }
    | {"-t", "--target", "--prefix", "--root", "--platform", "--python-version", "--implementation", "--abi"}
    | {"--src", "--upgrade-strategy", "--trusted-host", "--cache-dir", "--log", "-e", "--editable"}
    | {"--progress-bar", "--python"}
)
_SHELL_OPERATORS = ("|", "&", ";", ">", "<", "2>", "1>")


@dataclass(frozen=True)
class Declaration:
    requirement: str  # as declared: "evaluate==0.3.0"
    name: str  # canonical distribution name: "evaluate"
    source: str  # where: "examples/requirements.txt:2", "pyproject.toml", "cell 1: %pip install ..."


def in_files(folder: Path, shown_from: Path) -> list[Declaration]:
    """The declarations of the dependency files in `folder` (not below it); sources shown relative to
    `shown_from`."""
    found: list[Declaration] = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return found
    for name in names:
        path = folder / name
        if not path.is_file():
            continue
        if is_requirements(name):
            found += requirements_file(path, shown_from)
        elif name == "pyproject.toml":
            found += _pyproject(path, shown_from)
        elif name == "setup.py":
            found += _setup_py(path, shown_from)
    return list(dict.fromkeys(found))  # files that include each other declare the same lines


def requirements_file(path: Path, shown_from: Path, seen: frozenset[Path] = frozenset()) -> list[Declaration]:
    """A requirements file's named requirements, its `-r` includes followed (once each)."""
    if path.resolve() in seen:
        return []
    seen = seen | {path.resolve()}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    shown = _shown(path, shown_from)
    found: list[Declaration] = []
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split("#", 1)[0].split() if not line.lstrip().startswith("#") else []
        if words[:1] in (["-r"], ["--requirement"]) and len(words) > 1:
            found += requirements_file(path.parent / words[1], shown_from, seen)
        elif words and words[0].startswith(("-r", "--requirement=")):
            include = words[0].removeprefix("--requirement=").removeprefix("-r")
            found += requirements_file(path.parent / include, shown_from, seen)
        elif words and not words[0].startswith("-"):
            found += _named([words[0]], f"{shown}:{number}")
    return found


def pip_install(command: str, cwd: Path, shown: str, shown_from: Path) -> list[Declaration]:
    """The requirements a `pip install ...` command line names (`python -m pip`, `%pip`, `pip3.11`; `-r FILE`
    read from `cwd`); none for another command."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return []
    end = next((i for i, w in enumerate(words) if w.startswith(_SHELL_OPERATORS)), len(words))
    words = words[:end]
    index = next(
        (i for i, w in enumerate(words[:-1]) if _is_pip(words, i) and words[i + 1] == "install"), None
    )
    if index is None:
        return []
    found: list[Declaration] = []
    rest = iter(words[index + 2 :])
    for word in rest:
        if word in ("-r", "--requirement"):
            found += requirements_file(cwd / next(rest, ""), shown_from)
        elif word in PIP_VALUE_OPTIONS:
            next(rest, None)
        elif not word.startswith("-"):
            found += _named([word], shown)
    return found


def _is_pip(words: list[str], index: int) -> bool:
    """`pip`, `pip3.11`, `python -m pip`, `uv pip`: the word `pip` itself."""
    name = os.path.basename(words[index])
    return name in ("pip", "pip3") or name.startswith("pip3.")


def _named(texts: list[str], source: str) -> list[Declaration]:
    found = []
    for text in texts:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.url is None:
            found.append(Declaration(text, canonicalize_name(requirement.name), source))
    return found


def _pyproject(path: Path, shown_from: Path) -> list[Declaration]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return []
    shown = _shown(path, shown_from)
    project = data.get("project", {})
    lists = [project.get("dependencies", []), *project.get("optional-dependencies", {}).values()]
    found = [d for texts in lists if isinstance(texts, list) for d in _named(texts, shown)]
    poetry = data.get("tool", {}).get("poetry", {})
    tables = [poetry.get("dependencies", {}), poetry.get("dev-dependencies", {})]
    tables += [group.get("dependencies", {}) for group in poetry.get("group", {}).values()]
    # A Poetry constraint (`^4.41`) is not PEP 440: the name is the declaration.
    found += [d for table in tables for d in _named([n for n in table if n != "python"], shown)]
    return found


def _setup_py(path: Path, shown_from: Path) -> list[Declaration]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    shown = _shown(path, shown_from)
    found: list[Declaration] = []
    for keyword in _setup_keywords(text):
        if keyword.arg == "install_requires":
            found += _named(_strings(keyword.value), shown)
        elif keyword.arg == "extras_require" and isinstance(keyword.value, ast.Dict):
            for value in keyword.value.values:
                found += _named(_strings(value), shown)
    return found


def setup_requires(text: str) -> list[str]:
    """The literal `setup_requires` of a setup.py's text: what running it needs besides setuptools."""
    return [
        r
        for keyword in _setup_keywords(text)
        if keyword.arg == "setup_requires"
        for r in _strings(keyword.value)
    ]


def _setup_keywords(text: str) -> list[ast.keyword]:
    """The keywords of a setup.py's `setup(...)` calls."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    return [
        keyword
        for call in ast.walk(tree)
        if isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", "")) == "setup"
        for keyword in call.keywords
    ]


def _strings(node: ast.expr) -> list[str]:
    if not isinstance(node, (ast.List, ast.Tuple)):
        return []
    return [
        item.value for item in node.elts if isinstance(item, ast.Constant) and isinstance(item.value, str)
    ]


def _shown(path: Path, shown_from: Path) -> str:
    try:
        return path.relative_to(shown_from).as_posix()
    except ValueError:
        return str(path)
