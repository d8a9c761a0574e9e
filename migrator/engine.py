"""Migrate files: pick the rewriter by file kind, verify the result, write it safely."""

from __future__ import annotations

import difflib
import gc
import os
import re
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from pathlib import Path

import libcst as cst

from migrator import exported_loads, ipynb, notebook
from migrator.families.inference.tables import COMPILED_HUB_REPO
from migrator.families.leftovers.marking import mark_python, mark_shell
from migrator.families.training.stack_markers import stack_marked
from migrator.registry import PYTHON_HANDLERS, PYTHON_RULES, RULES
from migrator.rules import Finding
from migrator.shell.pyproject import migrate_pyproject as rewrite_pyproject
from migrator.shell.pyproject import migrate_setup as rewrite_setup
from migrator.shell.requirements import migrate_requirements as rewrite_requirements
from migrator.shell.rewrite import rewrite_shell
from migrator.shell.scripts import script_parser
from migrator.still_imported import first_importer
from migrator.transform import migrate_module
from migrator.verify import MigrationError, python_tree, syntax_error_message, verify_python, verify_shell
from migrator.workers import DEFAULT_TIMEOUT_S, Supervisor
from migrator.writes import replace_file
from usercode.sources import SourceFile, Text, read_text

# Cheap pre-filter (TorchFix's idea): a file that mentions none of these has no optimum-neuron/XLA
# content, is never parsed and never rewritten (a script that already targets TorchNeuron included).
# Module names match at a word start: `is_torch_xla_available()` alone is nothing to migrate.
# Plain substring tests come first: they run at memory speed, a regex alternation does not.
# Targets TorchNeuron cannot run on (NM502): an inf2 SageMaker notebook names no module.
PLATFORM_HINTS = ("inf1.", "inf2.", "trn1", "ml_inf", "HF_NUM_CORES", "NEURONCORE_GROUP_SIZES")
PYTHON_HINTS = ("optimum", "xla", "XLA_", "neuron", "NEURON_", *PLATFORM_HINTS)
PYTHON_MARKERS = re.compile(
    r"optimum\.(?:neuron|exporters\.neuron)|from optimum import neuron|\btorch_xla|\btorch_neuronx?"
    r"|\bneuronx_distributed|\btransformers[-_]neuronx|\bXLA_\w|\bNEURON_\w|[\"']xla[\"']"
    # inf1's torch-neuron (TorchNeuron's own `torch.neuron` device module, which needs no import, is not one)
    r"|\btorch\.neuron\.(?:trace|DataParallel|analyze_model|experimental)\b|\bimport torch\.neuron\b"
)
# What only the leftovers family reports (pre-compile and export commands, platforms, TODOs an earlier run
# left) marks a file too, tested behind substrings of its own so that the common case stays one regex.
LEFTOVER_HINTS = (
    "neuron_parallel_compile",
    "neuron_multi_node",
    "neuronperf",
    "optimum-",
    "neuronx",
    "neuron-migrate",
    "torch-neuron",
    "neuron-cc",
    "aws-neuron/",
    *PLATFORM_HINTS,
)
LEFTOVER_MARKERS = re.compile(
    r"\bneuron_parallel_compile\b|\bneuron_multi_node\b|\boptimum-(?:cli|neuron)\b|\bHF_NUM_CORES\b"
    r"|\b(?:ml\.)?(?:inf1|inf2|trn1n?)\.\w*large\b|\b(?:huggingface|pytorch)-[\w.:-]*neuronx\b|\bneuronx-tgi\b"
    r"|\btorch-neuron\b|\bneuron-cc\b|\bneuronperf\b|\blibneuronxla\b|\bml_(?:inf[12]|trn1)\b|\bNEURONCORE_GROUP_SIZES\b"
    r"|# TODO\(neuron-migrate\)|(?<![\w./-])" + COMPILED_HUB_REPO
)
# Shell launchers are cheap to scan line by line; optimum-neuron training flags alone mark one too (a
# `--tensor_parallel_size` the migrated script may no longer accept).
SHELL_HINTS = (
    "optimum",
    "neuron",
    "xla",
    "XLA_",
    "NEURON_",
    "--zero_1",
    "_parallel_size",
    "deepspeed",
    "--config_file",
    *PLATFORM_HINTS,
)
REQUIREMENTS_HINTS = ("neuron", "xla")  # lowercased text: optimum-neuron, torch-xla, libneuronxla...


class Mode(str, Enum):
    WRITE = "write"  # rewrite in place
    CHECK = "check"  # write nothing
    DIFF = "diff"  # write nothing, produce a unified diff
    OUTPUT = "output"  # write migrated copies under an output directory


@dataclass
class FileResult:
    path: str
    changed: bool = False
    error: str | None = None
    findings: list[Finding] = field(default_factory=list)
    diff: str = ""

    @property
    def manual(self) -> list[Finding]:
        return [finding for finding in self.findings if not finding.fixed]

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "changed": self.changed,
            "error": self.error,
            "findings": [finding.to_dict() for finding in self.findings],
        }


def _marked(content: str) -> bool:
    if any(hint in content for hint in PYTHON_HINTS) and (
        PYTHON_MARKERS.search(content)
        or (any(hint in content for hint in LEFTOVER_HINTS) and LEFTOVER_MARKERS.search(content) is not None)
    ):
        return True
    # What the target stack removed marks a file with no optimum-neuron or XLA code too.
    return stack_marked(content)


@contextmanager
def _cycle_collection_paused():
    """Python's cyclic garbage collector off while one file is migrated: libcst builds and drops tens of
    thousands of small nodes per file (freed by reference counting: a node holds no reference to its parent),
    and each collection those allocations trigger scans every young object again: 12 % of the fixture scripts'
    migration time (CPU time, `benchmarks/migrator_speed.py`'s files). The few cycles a migration leaves (its
    context and handlers) are collected once the file is done."""
    if not gc.isenabled():  # already paused by an enclosing migration (a notebook's cells, a heredoc)
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def migrate_python(
    content: str, scan: bool = True, notebook: bool = False, directory: Path | None = None
) -> tuple[str, list[Finding]]:
    """`scan=False`: without the leftover scan (a heredoc body, which the scan of its script covers);
    `notebook`: the code is a notebook's Python cells, which run in one kernel process; `directory`: the file's
    folder, whose shell scripts may export the models it loads (`exported_loads`)."""
    if not _marked(content):
        return content, []
    with _cycle_collection_paused():
        return _migrate_marked_python(content, scan, notebook, directory)


def _migrate_marked_python(
    content: str, scan: bool, notebook: bool, directory: Path | None = None
) -> tuple[str, list[Finding]]:
    tree = python_tree(content)  # Python's parser first: what it refuses never reaches libcst's native parser
    loaded, exported = content, []
    found = exported_loads.beside(directory) if directory is not None and "from_pretrained" in content else {}
    if found:  # (the classes are read only then: most folders export nothing)
        loaded, exported = exported_loads.load_exports(
            content, found, exported_loads.neuron_classes([content])
        )
        tree = python_tree(loaded) if exported else tree
    try:
        result = migrate_module(loaded, PYTHON_HANDLERS, RULES, notebook, tree)
    except cst.ParserSyntaxError as error:
        raise MigrationError(syntax_error_message(error)) from None
    # After every rewrite, before verification: what legacy code is left gets a TODO and a finding.
    code, findings = result.code, result.findings
    if exported:  # (the loads' lines are the input's: only the folder's literal was replaced)
        placed = [exported_loads.finding(place.export, place.line, place.column) for place in exported]
        findings = exported_loads.columns_back(findings, exported)
        findings = sorted(findings + placed, key=lambda f: (f.line, f.column, f.code))
    if scan:
        code, findings = mark_python(content, code, findings, PYTHON_RULES)
    if code != content:
        verify_python(content, code)
    return code, findings


def migrate_shell(
    content: str,
    inline: bool = False,
    directory: Path | None = None,
    imported: frozenset[str] = frozenset(),
    written: dict[str, str] | None = None,
    python_cells: tuple[tuple[int, str], ...] = (),
    root: Path | None = None,
    following: frozenset[tuple[str, ...]] = frozenset(),
) -> tuple[str, list[Finding]]:
    """`inline`: notebook command lines; `directory`: where the file is; `imported`, `written`, `python_cells`:
    modules the notebook still imports, scripts it writes, its Python cells; `root`: the top of the tree being
    migrated; `following`: launches of a notebook's later cells (see `rewrite_shell`). A script's installs
    serve the code of its folder; a notebook's, the notebook (`imported`)."""
    if not any(hint in content for hint in SHELL_HINTS):
        return content, []
    code_beside = None if inline or directory is None else partial(first_importer, directory, _migrated)
    exported = () if inline or directory is None or "optimum-cli" not in content else _loads_beside(directory)
    migrated, findings = rewrite_shell(
        content,
        partial(migrate_python, scan=False),
        inline,
        directory,
        imported,
        written,
        python_cells=python_cells,
        root=root,
        beside=code_beside,
        following=following,
        python_beside=exported,
    )
    migrated, findings = mark_shell(content, migrated, findings)
    if migrated != content:
        verify_shell(content, migrated)
    return migrated, findings


def _loads_beside(directory: Path) -> tuple[tuple[str, str], ...]:
    """The Python files of `directory` (name, code) as they load models once the loads of the folders the shell
    scripts there export are rewritten (`exported_loads`): what an export there must stay for (NM452)."""
    exports = exported_loads.beside(directory)
    found = []
    for path, code in exported_loads.folder_texts(directory, "*.py", "from_pretrained"):
        if exports:
            code = exported_loads.load_exports(code, exports, exported_loads.neuron_classes([code]))[0]
        found.append((path.name, code))
    return tuple(found)


def migrate_requirements(content: str, directory: Path | None = None) -> tuple[str, list[Finding]]:
    """`directory`: where the file is; a legacy package stays while the code of that folder imports it."""
    if not any(hint in content.lower() for hint in REQUIREMENTS_HINTS):
        return content, []
    return rewrite_requirements(
        content, beside=None if directory is None else partial(first_importer, directory, _migrated)
    )


def migrate_pyproject(content: str, directory: Path | None = None) -> tuple[str, list[Finding]]:
    """The dependencies a `pyproject.toml` declares, as a requirements file's (`directory`: the same)."""
    if not any(hint in content.lower() for hint in REQUIREMENTS_HINTS):
        return content, []
    return rewrite_pyproject(
        content, beside=None if directory is None else partial(first_importer, directory, _migrated)
    )


def migrate_setup_py(content: str, directory: Path | None = None) -> tuple[str, list[Finding]]:
    """A `setup.py`: the dependency lists it passes to `setup()` (as a pyproject.toml's), then its code as any
    Python file's, and the leftover scan last (what the dependency edit replaced is no leftover)."""
    code, findings = content, []
    if any(hint in content.lower() for hint in REQUIREMENTS_HINTS):
        beside = None if directory is None else partial(first_importer, directory, _migrated)
        code, findings = rewrite_setup(content, beside=beside)
    migrated, rewritten = migrate_python(code, scan=False)
    migrated, findings = mark_python(content, migrated, findings + rewritten, PYTHON_RULES)
    if migrated != content:
        verify_python(content, migrated)
    return migrated, findings


def migrate_notebook(content: str) -> tuple[str, list[Finding]]:
    return notebook.migrate_notebook(content, migrate_python, migrate_shell, _parser_of(None, None))


def _parser_of(directory: Path | None, root: Path | None):
    """The argument parser of a script a launch in `directory` runs, read from the script as migrated."""
    return partial(script_parser, directory=directory, root=root, migrate=partial(_migrated, "python"))


def _migrated(kind: str, content: str) -> str:
    """`content` migrated, or as it is when it cannot be: what code beside an install imports once migrated."""
    try:
        return REWRITERS[kind](content)[0]
    except Exception:  # a file that cannot be migrated keeps its imports (a rule's bug included)
        return content


REWRITERS: dict[str, Callable[[str], tuple[str, list[Finding]]]] = {
    "python": migrate_python,
    "shell": migrate_shell,
    "notebook": migrate_notebook,
    "requirements": migrate_requirements,
    "pyproject": migrate_pyproject,
}


def rewriter(
    kind: str, directory: Path | None, root: Path | None = None, name: str = ""
) -> Callable[[str], tuple[str, list[Finding]]]:
    """The rewriter of a file of `kind` in `directory`, under `root` (the top of the tree being migrated):
    launchers there read the scripts they launch, installs keep what the code beside them still imports; a
    `setup.py` (`name`) is code and the dependencies it declares."""
    if kind == "python" and name == "setup.py":
        return partial(migrate_setup_py, directory=directory)
    if kind == "python" and directory is not None:
        return partial(migrate_python, directory=directory)
    if directory is None:
        return REWRITERS[kind]
    if kind in ("requirements", "pyproject"):
        return partial(REWRITERS[kind], directory=directory)
    shell = partial(migrate_shell, directory=directory, root=root)
    if kind == "shell":
        return shell
    return partial(
        notebook.migrate_notebook,
        migrate_python=migrate_python,
        migrate_shell=shell,
        parser_of=_parser_of(directory, root),
        directory=directory,
    )


@dataclass(frozen=True)
class Job:
    source: SourceFile
    mode: Mode
    output_dir: Path | None = None
    display: str = ""


def output_conflicts(jobs: list[Job], report: Path | None = None) -> str | None:
    """Why the outputs of `jobs` (migrated copies under --output-dir) and the report cannot be written: an output
    path that is an input (by name, symbolic link or hard link), or two inputs written to one output. Checked
    before anything is written; None when nothing conflicts."""
    inputs: dict[object, Path] = {}
    for job in jobs:
        inputs[os.path.realpath(job.source.path)] = job.source.path
        identity = _identity(job.source.path)
        if identity is not None:
            inputs[identity] = job.source.path
    outputs: dict[str, Path] = {}
    targets = [
        (job.output_dir / job.source.relative, job.source.path) for job in jobs if job.mode is Mode.OUTPUT
    ]
    if report is not None:
        targets.append((report, None))
    for target, source in targets:
        key = os.path.realpath(target)
        clash = inputs.get(key) or inputs.get(_identity(target))
        if clash is not None:
            what = "the report" if source is None else f"the migrated copy of {source}"
            return f"{what} would be written to {target}, which is the input {clash}; nothing was written"
        if key in outputs:
            first = outputs[key]
            return (
                f"{first} and {source or 'the report'} would both be written to {target}; nothing was written "
                "(give their common folder instead, or migrate them separately)"
            )
        outputs[key] = source
    return None


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


def process(job: Job) -> FileResult:
    """Migrate one file according to the mode. Never raises for a problem with the file itself."""
    source = job.source
    result = FileResult(job.display or str(source.path))
    if source.problem:
        result.error = source.problem
        return result
    try:
        text = read_text(source.path, source.kind)
    except (OSError, UnicodeDecodeError, SyntaxError) as error:
        result.error = f"cannot read: {error}"
        return result
    try:
        root = source.path.parents[len(source.relative.parts) - 1]
        migrate = rewriter(source.kind, source.path.parent, root, source.path.name)
        migrated, result.findings = migrate(text.content)
    except MigrationError as error:
        result.error = str(error)
        return result
    except Exception as error:  # a bug in a rule must not stop the other files
        result.error = f"internal error while migrating: {type(error).__name__}: {error}; file left untouched"
        return result
    result.changed = migrated != text.content
    try:
        _emit(job, text, migrated, result)
    except (OSError, UnicodeEncodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        result.error = f"cannot write: {reason}"
        if job.mode in (Mode.WRITE, Mode.OUTPUT):
            result.changed = False  # nothing was written
    return result


def _emit(job: Job, text: Text, migrated: str, result: FileResult) -> None:
    source = job.source
    if job.mode is Mode.DIFF and result.changed and source.kind == "notebook":
        result.diff = ipynb.cell_diff(text.content, migrated, result.path)
    elif job.mode is Mode.DIFF and result.changed:
        result.diff = "".join(
            difflib.unified_diff(
                text.content.splitlines(keepends=True),
                migrated.splitlines(keepends=True),
                fromfile=f"a/{result.path.lstrip('/')}",
                tofile=f"b/{result.path.lstrip('/')}",
            )
        )
    elif job.mode is Mode.WRITE and result.changed:
        replace_file(source.path, text.encode(migrated), read=text.snapshot)
    elif job.mode is Mode.OUTPUT:
        # An output path is never an input (the command line checks; `output_conflicts`); a link there is
        # replaced, never written through.
        target = job.output_dir / source.relative
        data = text.encode(migrated) if result.changed else text.snapshot.data
        replace_file(target, data, like=source.path, follow_symlinks=False)
        if not result.changed:  # an untouched copy keeps its time, as `cp -p` would
            info = os.stat(source.path)
            os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) during a run: the files done so far, in job order (each written whole or not at
    all; the files in progress when it came were left as they were, or written whole). A KeyboardInterrupt, so
    that a caller that does not look at the files done (the checklist) stops as on Ctrl-C."""

    def __init__(self, done: list[FileResult], total: int) -> None:
        super().__init__(f"interrupted after {len(done)} of {total} files")
        self.done, self.total = done, total


def run(
    jobs: list[Job],
    workers: int = 1,
    on_done: Callable[[FileResult], None] | None = None,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    on_tick: Callable[[list[tuple[Job, float]]], None] | None = None,
) -> list[FileResult]:
    """Process jobs in `workers` watched processes (`workers.Supervisor`); results come back in job order.

    A file whose process crashes or runs past `timeout` seconds is an error result; the others go on.
    `on_tick` hears every half second which files are in progress and for how long. Raises Interrupted."""
    if not jobs:
        return []
    supervisor = Supervisor(
        partial(_process_index, jobs),
        partial(_failed, jobs),
        timeout,
        on_done=None if on_done is None else lambda _index, result: on_done(result),
        on_tick=None if on_tick is None else lambda running: on_tick([(jobs[i], s) for i, s in running]),
    )
    try:
        return supervisor.run(len(jobs), _batches(jobs, workers), max(1, workers))
    except KeyboardInterrupt:
        raise Interrupted([r for r in supervisor.results if r is not None], len(jobs)) from None


def _process_index(jobs: list[Job], index: int) -> FileResult:
    return process(jobs[index])


def _failed(jobs: list[Job], index: int, message: str) -> FileResult:
    job = jobs[index]
    return FileResult(job.display or str(job.source.path), error=message)


_BATCH_FILES = 8


def _batches(jobs: list[Job], workers: int) -> list[list[int]]:
    """Job indices grouped for the workers, largest files first.

    A few large files dominate the cost: they go first and alone, so no worker is left finishing one
    while the other idles. Small files go in batches (one inter-process round trip per file would cost
    more than the work of most, which the pre-filter skips), of at most `_BATCH_FILES`: small scripts
    that do need migrating cost far more than their size says, and must not all land in one batch.
    """
    sizes = [_size(job) for job in jobs]
    target = max(1, sum(sizes) // (workers * 32))
    batches: list[list[int]] = []
    current: list[int] = []
    weight = 0
    for index in sorted(range(len(jobs)), key=lambda i: -sizes[i]):
        current.append(index)
        weight += sizes[index]
        if weight >= target or len(current) >= _BATCH_FILES:
            batches.append(current)
            current, weight = [], 0
    if current:
        batches.append(current)
    return batches


def _size(job: Job) -> int:
    try:
        return job.source.path.stat().st_size
    except OSError:  # reported by `process`
        return 0
