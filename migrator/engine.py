"""Migrate files: pick the rewriter by file kind, verify the result, write it safely."""

from __future__ import annotations

import difflib
import re
import shutil
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from pathlib import Path

import libcst as cst

from migrator import notebook
from migrator.beside import importer
from migrator.families.inference.tables import COMPILED_HUB_REPO
from migrator.families.leftovers.scan import scan_python, scan_shell
from migrator.registry import PYTHON_HANDLERS
from migrator.rules import Finding
from migrator.shell.requirements import migrate_requirements as rewrite_requirements
from migrator.shell.rewrite import rewrite_shell
from migrator.sources import SourceFile, Text, read_text, write_atomic
from migrator.transform import migrate_module
from migrator.verify import MigrationError, syntax_error_message, verify_python, verify_shell

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
    r"|\btorch-neuron\b|\bneuron-cc\b|\bml_(?:inf[12]|trn1)\b|\bNEURONCORE_GROUP_SIZES\b"
    r"|# TODO\(neuron-migrate\)|(?<![\w./-])" + COMPILED_HUB_REPO
)
# Shell launchers are cheap to scan line by line; optimum-neuron training flags alone mark one too.
SHELL_HINTS = ("optimum", "neuron", "xla", "XLA_", "NEURON_", "--zero_1", *PLATFORM_HINTS)
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
    if not any(hint in content for hint in PYTHON_HINTS):
        return False
    if PYTHON_MARKERS.search(content):
        return True
    return any(hint in content for hint in LEFTOVER_HINTS) and LEFTOVER_MARKERS.search(content) is not None


def migrate_python(content: str, scan: bool = True, notebook: bool = False) -> tuple[str, list[Finding]]:
    """`scan=False`: without the leftover scan (a heredoc body, which the scan of its script covers);
    `notebook`: the code is a notebook's Python cells, which run in one kernel process."""
    if not _marked(content):
        return content, []
    try:
        result = migrate_module(content, PYTHON_HANDLERS, notebook)
    except cst.ParserSyntaxError as error:
        raise MigrationError(syntax_error_message(content, error)) from None
    # After every rewrite, before verification: what legacy code is left gets a TODO and a finding.
    code, findings = result.code, result.findings
    if scan:
        code, findings = scan_python(content, code, findings)
    if code != content:
        verify_python(code)
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
    code_beside = None if inline or directory is None else partial(importer, directory, _migrated)
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
    )
    migrated, findings = scan_shell(content, migrated, findings)
    if migrated != content:
        verify_shell(content, migrated)
    return migrated, findings


def migrate_requirements(content: str, directory: Path | None = None) -> tuple[str, list[Finding]]:
    """`directory`: where the file is; a legacy package stays while the code of that folder imports it."""
    if not any(hint in content.lower() for hint in REQUIREMENTS_HINTS):
        return content, []
    return rewrite_requirements(
        content, beside=None if directory is None else partial(importer, directory, _migrated)
    )


def migrate_notebook(content: str) -> tuple[str, list[Finding]]:
    return notebook.migrate_notebook(content, migrate_python, migrate_shell)


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
}


def rewriter(
    kind: str, directory: Path | None, root: Path | None = None
) -> Callable[[str], tuple[str, list[Finding]]]:
    """The rewriter of a file of `kind` in `directory`, under `root` (the top of the tree being migrated):
    launchers there read the scripts they launch, installs keep what the code beside them still imports."""
    if directory is None or kind == "python":
        return REWRITERS[kind]
    if kind == "requirements":
        return partial(migrate_requirements, directory=directory)
    shell = partial(migrate_shell, directory=directory, root=root)
    if kind == "shell":
        return shell
    return partial(notebook.migrate_notebook, migrate_python=migrate_python, migrate_shell=shell)


@dataclass(frozen=True)
class Job:
    source: SourceFile
    mode: Mode
    output_dir: Path | None = None
    display: str = ""


def process(job: Job) -> FileResult:
    """Migrate one file according to the mode. Never raises for a problem with the file itself."""
    source = job.source
    result = FileResult(job.display or str(source.path))
    try:
        text = read_text(source.path, source.kind)
    except (OSError, UnicodeDecodeError, SyntaxError) as error:
        result.error = f"cannot read: {error}"
        return result
    try:
        root = source.path.parents[len(source.relative.parts) - 1]
        migrated, result.findings = rewriter(source.kind, source.path.parent, root)(text.content)
    except MigrationError as error:
        result.error = str(error)
        return result
    except Exception as error:  # a bug in a rule must not stop the other files
        result.error = f"internal error while migrating: {type(error).__name__}: {error}; file left untouched"
        return result
    result.changed = migrated != text.content
    try:
        _emit(job, text, migrated, result)
    except OSError as error:
        result.error = f"cannot write: {error}"
    return result


def _emit(job: Job, text: Text, migrated: str, result: FileResult) -> None:
    source = job.source
    if job.mode is Mode.DIFF and result.changed and source.kind == "notebook":
        result.diff = notebook.cell_diff(text.content, migrated, result.path)
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
        write_atomic(source.path, text.encode(migrated), like=source.path)
    elif job.mode is Mode.OUTPUT:
        target = job.output_dir / source.relative
        if result.changed:
            write_atomic(target, text.encode(migrated), like=source.path)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source.path, target)


def run(
    jobs: list[Job], workers: int = 1, on_done: Callable[[FileResult], None] | None = None
) -> list[FileResult]:
    """Process jobs, in parallel when asked; results come back in job order."""
    if workers <= 1 or len(jobs) < 2:
        results = []
        for job in jobs:
            results.append(process(job))
            if on_done:
                on_done(results[-1])
        return results
    results: list[FileResult | None] = [None] * len(jobs)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        batches = {
            pool.submit(_process_batch, [jobs[i] for i in batch]): batch for batch in _batches(jobs, workers)
        }
        for future in as_completed(batches):
            for index, result in zip(batches[future], future.result(), strict=True):
                results[index] = result
                if on_done:
                    on_done(result)
    return results


def _process_batch(jobs: list[Job]) -> list[FileResult]:
    return [process(job) for job in jobs]


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


def analyze(sources: Iterable[SourceFile]) -> list[FileResult]:
    return run([Job(source, Mode.CHECK) for source in sources])
