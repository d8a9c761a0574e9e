"""Finding and reading user files: their kinds, the tree walk, encoding, BOM and newlines (the migrator writes them: `migrator/writes.py`; a Snapshot is a file as read, so a write can refuse an edit made since)."""

from __future__ import annotations

import codecs
import errno
import fnmatch
import io
import os
import re
import stat
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


@dataclass(frozen=True)
class Snapshot:
    """A file as it was read: its bytes and what identifies that version of it."""

    data: bytes
    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def read(cls, path: Path) -> Snapshot:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            data = handle.read()
        return cls(data, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)

    def same_version(self, info: os.stat_result) -> bool:
        return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns) == (
            self.device,
            self.inode,
            self.size,
            self.mtime_ns,
        )

    def still_current(self, path: Path) -> bool:
        """Whether `path` is still this version: same file, size and mtime, and the same bytes (an edit within
        the file system's mtime resolution that keeps the size is caught by the bytes)."""
        try:
            with open(path, "rb") as handle:
                if not self.same_version(os.fstat(handle.fileno())):
                    return False
                return handle.read() == self.data
        except OSError:
            return False


class UsageError(Exception):
    """A problem with what the user asked for (bad path, unsupported file)."""


@dataclass(frozen=True)
class SourceFile:
    path: Path  # where it is read from
    relative: Path  # its place under the input root, for --output-dir mirroring
    kind: str  # python | notebook | shell | requirements | pyproject; folder or other with a `problem`
    problem: str | None = None  # why it cannot be read (a symbolic link loop, an unreadable folder...)


SUPPORTED = ".py, .ipynb, .sh, .bash, .sbatch, .slurm, requirements*.txt, pyproject.toml, or a script starting with a #!/bin/bash-like line"


def file_kind(path: Path) -> str | None:
    if is_requirements(path.name):
        return "requirements"
    if path.name == "pyproject.toml":  # the dependencies it declares
        return "pyproject"
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


def discover(
    paths: Iterable[Path], exclude: Iterable[str] = (), skip_unsupported: bool = False
) -> list[SourceFile]:
    """Expand files and directories (recursively) into the files to migrate, in a stable order.

    What cannot be read (a folder without permission, a symbolic link loop or a dangling link, a FIFO) is a
    SourceFile with its `problem`, reported as an error, never skipped in silence. A named file of another kind
    is a UsageError, or left out with `skip_unsupported` (pre-commit passes files by their type)."""
    exclude = tuple(exclude)
    found: dict[str, SourceFile] = {}
    for root in paths:
        if not os.path.lexists(root):
            raise UsageError(f"{root}: no such file or directory")
        if not root.is_dir():
            problem = _unreadable(root)
            kind = named_file_kind(root) if problem is None else file_kind(root) or "other"
            if kind is None:
                if skip_unsupported:
                    continue
                raise UsageError(f"{root}: unsupported file type (expected {SUPPORTED})")
            found.setdefault(os.path.realpath(root), SourceFile(root, Path(root.name), kind, problem))
            continue
        for source in _walk(root, exclude):
            found.setdefault(os.path.realpath(source.path), source)
    return sorted(found.values(), key=lambda source: str(source.path))


def _walk(root: Path, exclude: tuple[str, ...]) -> Iterator[SourceFile]:
    folders: list[OSError] = []  # what os.walk could not list (its own root included)
    for directory, subdirs, files in os.walk(root, onerror=folders.append):
        here = Path(directory)
        subdirs[:] = sorted(
            name for name in subdirs if name not in SKIP_DIRS and not _excluded(here / name, root, exclude)
        )
        for name in sorted(files):
            path = here / name
            kind = file_kind(path)
            if kind and not _excluded(path, root, exclude):
                yield SourceFile(path, path.relative_to(root), kind, _unreadable(path))
    for error in folders:
        path = Path(error.filename)
        relative = path.relative_to(root) if path != root else Path(".")
        yield SourceFile(path, relative, "folder", f"cannot read this folder: {error.strerror}")


def _unreadable(path: Path) -> str | None:
    """Why a file found or named cannot be migrated, before reading it; None for a regular file."""
    try:
        info = os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "cannot read: a loop of symbolic links"
        if os.path.islink(path):
            return f"cannot read: a dangling symbolic link (to {os.readlink(path)})"
        return f"cannot read: {error.strerror}"
    if not stat.S_ISREG(info.st_mode):
        return "cannot read: not a regular file"
    return None


def _excluded(path: Path, root: Path, patterns: tuple[str, ...]) -> bool:
    relative = path.relative_to(root).as_posix()
    return any(fnmatch.fnmatch(relative, p) or fnmatch.fnmatch(path.name, p) for p in patterns)


@dataclass(frozen=True)
class Text:
    """Decoded file content plus what is needed to write it back byte-identical outside the edits."""

    content: str  # newlines as in the file, except a CR-only file's, which read as "\n" (see `read_text`)
    encoding: str
    bom: bool
    snapshot: Snapshot | None = None  # the file as read: a write is refused if it changed since
    carriage_returns: bool = False  # a CR-only file (classic Mac OS): "\n" goes back to "\r"

    def encode(self, content: str) -> bytes:
        if self.carriage_returns:
            content = content.replace("\n", "\r")
        data = content.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data


def read_text(path: Path, kind: str) -> Text:
    """The file's text. Python: its PEP 263 encoding; a CR-only file reads with "\n" line ends (libcst does not
    round-trip "\r" alone; Python reads it as a line end). Shell scripts are bytes to bash: one that is not
    UTF-8 is read as Latin-1, a byte per character, so that every byte is written back as it was."""
    snapshot = Snapshot.read(path)
    data = snapshot.data
    bom = data.startswith(codecs.BOM_UTF8)
    if bom:
        data = data[len(codecs.BOM_UTF8) :]
    encoding = "utf-8"
    if kind == "python":  # PEP 263 coding cookie
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        encoding = "utf-8" if encoding == "utf-8-sig" else encoding
    try:
        content = data.decode(encoding)
    except UnicodeDecodeError:
        if kind != "shell":
            raise
        encoding, content = "latin-1", data.decode("latin-1")
    carriage_returns = kind == "python" and "\r" in content and "\n" not in content
    if carriage_returns:
        content = content.replace("\r", "\n")
    return Text(content, encoding, bom, snapshot, carriage_returns)
