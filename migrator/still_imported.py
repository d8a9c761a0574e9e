"""What the code beside an install still imports once migrated: the legacy packages it needs stay (NM473).

Files are migrated one at a time, so a requirements file (or a launcher's `pip install`) would drop
optimum-neuron while the `train.py` it installs for still imports `optimum.neuron` after its own migration (a
symbol the codemod could only mark with a TODO). The code an install serves is the Python files and notebooks
of its folder and subfolders. They are read as text, until one answers the question (does any file still import
`optimum.neuron`?); only those that import a legacy module (read with Python's `ast`) are migrated, in memory, and
only when they could add a module not yet known to stay. Results are cached per file and per folder, so a run over
a big tree reads each file at most once per process for all its installs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from migrator.shell.installs import REPLACED
from usercode.python import python_imports
from usercode.sources import SKIP_DIRS, read_text

# Bytes a file must contain to import a legacy module (`from optimum import neuron` included).
_ROOTS = tuple(sorted({module.split(".")[0] for module in REPLACED.values()}))
_ROOT_BYTES = tuple(root.encode() for root in _ROOTS)
_KINDS = {".py": "python", ".ipynb": "notebook"}

Migrate = Callable[[str, str], str]  # (kind, text) -> the migrated text (the text itself when it cannot be)

# path -> (its stamp, the legacy modules it imports, those it still imports once migrated: None until asked)
_file_cache: dict[Path, tuple[tuple[int, int], frozenset[str], frozenset[str] | None]] = {}


class _Folder:
    """A folder read as far as the questions asked so far needed: its files are walked in order, once."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.files = _code_files(directory)
        self.found: dict[str, str] = {}  # module -> the first file that still imports it once migrated

    def first_importer(self, module: str, migrate: Migrate) -> str | None:
        while module not in self.found:
            path = next(self.files, None)
            if path is None:
                return None
            for name in sorted(_still_imported(path, self.found.keys(), migrate)):
                self.found.setdefault(name, path.relative_to(self.directory).as_posix())
        return self.found[module]


_folders: dict[Path, _Folder] = {}


def first_importer(directory: Path, migrate: Migrate, module: str) -> str | None:
    """The first file under `directory` (a path relative to it) that imports `module` (a legacy package's module,
    `optimum.neuron`: a value of `installs.REPLACED`) once migrated; None when none does. Files are read only
    until one does."""
    folder = _folders.setdefault(directory.resolve(), _Folder(directory))
    return folder.first_importer(module, migrate)


def _code_files(directory: Path):
    """Python files and notebooks under `directory`, in a stable order; no virtual environments, caches,
    build outputs or hidden folders."""
    for folder, subdirs, files in os.walk(directory):
        if "pyvenv.cfg" in files:  # a virtual environment, whatever its name
            subdirs[:] = []
            continue
        subdirs[:] = sorted(name for name in subdirs if name not in SKIP_DIRS and not name.startswith("."))
        for name in sorted(files):
            if os.path.splitext(name)[1] in _KINDS:
                yield Path(folder, name)


def _still_imported(path: Path, known, migrate: Migrate) -> frozenset[str]:
    """The legacy modules `path` imports once migrated; migrated only when it imports one not in `known`."""
    kind = _KINDS[path.suffix]
    try:
        stat = path.stat()
    except OSError:
        return frozenset()
    stamp = (stat.st_mtime_ns, stat.st_size)
    cached = _file_cache.get(path)
    if cached is None or cached[0] != stamp:
        try:
            with path.open("rb") as handle:
                data = handle.read()
            before = frozenset()
            if any(root in data for root in _ROOT_BYTES):
                before = _legacy(_imports(kind, read_text(path, kind).content))
        except (OSError, UnicodeDecodeError, SyntaxError):
            before = frozenset()
        cached = (stamp, before, None if before else frozenset())
        _file_cache[path] = cached
    _, before, after = cached
    if after is None and not before <= set(known):
        try:
            text = read_text(path, kind).content
        except (OSError, UnicodeDecodeError, SyntaxError):
            return frozenset()
        after = _legacy(_imports(kind, migrate(kind, text)))
        _file_cache[path] = (stamp, before, after)
    return after or frozenset()


def _imports(kind: str, text: str) -> frozenset[str]:
    if kind == "python":
        return python_imports(text)
    try:
        cells = json.loads(text).get("cells", [])
    except (json.JSONDecodeError, AttributeError):
        return frozenset()
    from IPython.core.inputtransformer2 import TransformerManager  # ~70 ms to load: notebooks only

    manager = TransformerManager()
    imports: set[str] = set()
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        try:
            python = manager.transform_cell("".join(source) if isinstance(source, list) else source)
        except Exception:  # IPython's transforms raise several kinds on input they cannot read
            continue
        imports |= python_imports(python)
    return frozenset(imports)


def _legacy(imports: frozenset[str]) -> frozenset[str]:
    """The legacy packages' modules among `imports` (`optimum.neuron` for `optimum.neuron.models.training`)."""
    return frozenset(
        module
        for module in REPLACED.values()
        if any(n == module or n.startswith(module + ".") for n in imports)
    )
