"""Reading and writing user files without ever corrupting them: encoding, BOM, newlines, atomic writes."""

from __future__ import annotations

import codecs
import fnmatch
import io
import os
import re
import tempfile
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

SUFFIXES = {
    ".py": "python",
    ".ipynb": "notebook",
    ".sh": "shell",
    ".bash": "shell",
    ".sbatch": "shell",  # Slurm batch scripts
    ".slurm": "shell",
}
# pip requirements files: requirements.txt, requirements-dev.txt, dev_requirements.txt...
_REQUIREMENTS = re.compile(r"(?:.*[-_.])?requirements(?:[-_.].*)?\.txt", re.IGNORECASE)
_SHELL_SHEBANG = re.compile(rb"#![ \t]*\S*(?:/|env[ \t]+)(?:ba|z|da)?sh\b")
SKIP_DIRS = {
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    "build",
    "dist",
    "site-packages",
    "node_modules",
    "__pycache__",
}


class UsageError(Exception):
    """A problem with what the user asked for (bad path, unsupported file)."""


@dataclass(frozen=True)
class SourceFile:
    path: Path  # where it is read from
    relative: Path  # its place under the input root, for --output-dir mirroring
    kind: str  # python | notebook | shell | requirements


def file_kind(path: Path) -> str | None:
    if is_requirements(path.name):
        return "requirements"
    return SUFFIXES.get(path.suffix.lower())


def is_requirements(name: str) -> bool:
    return _REQUIREMENTS.fullmatch(name) is not None


def named_file_kind(path: Path) -> str | None:
    """The kind of a file named on the command line: by suffix, else a shell script by its `#!` line."""
    kind = file_kind(path)
    if kind is None and not path.suffix:
        try:
            with path.open("rb") as handle:
                kind = "shell" if _SHELL_SHEBANG.match(handle.readline()) else None
        except OSError:
            return None
    return kind


def discover(paths: Iterable[Path], exclude: Iterable[str] = ()) -> list[SourceFile]:
    """Expand files and directories (recursively) into the files to migrate, in a stable order."""
    exclude = tuple(exclude)
    found: dict[Path, SourceFile] = {}
    for root in paths:
        if not root.exists():
            raise UsageError(f"{root}: no such file or directory")
        if root.is_file():
            kind = named_file_kind(root)
            if kind is None:
                raise UsageError(
                    f"{root}: unsupported file type (expected .py, .ipynb, .sh, .bash, .sbatch, .slurm, "
                    "requirements*.txt, or a script starting with a #!/bin/bash-like line)"
                )
            found.setdefault(root.resolve(), SourceFile(root, Path(root.name), kind))
            continue
        for path in _walk(root, exclude):
            found.setdefault(path.resolve(), SourceFile(path, path.relative_to(root), file_kind(path)))
    return sorted(found.values(), key=lambda source: str(source.path))


def _walk(root: Path, exclude: tuple[str, ...]) -> Iterator[Path]:
    for directory, subdirs, files in os.walk(root):
        here = Path(directory)
        subdirs[:] = sorted(
            name for name in subdirs if name not in SKIP_DIRS and not _excluded(here / name, root, exclude)
        )
        for name in sorted(files):
            path = here / name
            if file_kind(path) and not _excluded(path, root, exclude):
                yield path


def _excluded(path: Path, root: Path, patterns: tuple[str, ...]) -> bool:
    relative = path.relative_to(root).as_posix()
    return any(fnmatch.fnmatch(relative, p) or fnmatch.fnmatch(path.name, p) for p in patterns)


@dataclass(frozen=True)
class Text:
    """Decoded file content plus what is needed to write it back byte-identical outside the edits."""

    content: str  # newlines exactly as in the file
    encoding: str
    bom: bool

    def encode(self, content: str) -> bytes:
        data = content.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data


def read_text(path: Path, kind: str) -> Text:
    data = path.read_bytes()
    bom = data.startswith(codecs.BOM_UTF8)
    if bom:
        data = data[len(codecs.BOM_UTF8) :]
    encoding = "utf-8"
    if kind == "python":  # PEP 263 coding cookie
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        encoding = "utf-8" if encoding == "utf-8-sig" else encoding
    return Text(data.decode(encoding), encoding, bom)


def write_atomic(path: Path, data: bytes, like: Path | None = None) -> None:
    """Write via a temporary file in the same directory and rename it over the target.

    A crash mid-write leaves the old file intact. Permission bits are copied from `like` (the input).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        source = like if like is not None and like.exists() else path
        if source.exists():
            os.chmod(tmp, source.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
