"""`neuron-migrate try`'s engine: plan the runs of a file, serve its models and data, run, measure, report.

Every command of a try (a launcher's set-up, each run) works in the try's sandbox (`sandbox.py`: the whole
file system copy-on-write, no network, its own process tree, no credentials in its environment), where the
user's files are, with the stand-in `neuron` device switched on for it and its children, Hub access offline,
and the bootstrap (`bootstrap/sitecustomize.py`) first on PYTHONPATH. The try's temporary folder is the one
place written through: the reports, the stand-in datasets, the notebook's cells.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from try_run import data, hub, integrations, launched, metrics, packages, plan, sagemaker, scan
from try_run.device import DeviceUnavailable, device_environment, standin_package
from try_run.kernel import CELL_LINE, FAILED_CELL_MARK
from try_run.output import condensed, last_distinct
from try_run.report import (
    FAILED,
    NOT_RUN,
    RAN,
    RunReport,
    load_process_reports,
    merge_processes,
    upstream_failure,
    where,
)
from try_run.sandbox import NO_NETWORK_ENV, IsolationUnavailable, Sandbox, stop, without_credentials
from usercode import declarations
from usercode.launchers import LAUNCHER_SUFFIXES
from usercode.notebook import cell_python
from usercode.python import python_imports, required_imports

BOOTSTRAP = Path(__file__).with_name("bootstrap")
OUTPUT_TAIL_LINES = 40
# Lines held while a run prints, from which its tail is taken once launcher summaries are condensed.
OUTPUT_HELD_LINES = 2000
ARGPARSE_ERROR = re.compile(r"\S+: error: ")  # argparse's `PROG: error: MESSAGE` before exit 2
REQUIRED_ARGUMENTS = ": error: the following arguments are required: "
EXCEPTION_LINE = re.compile(r"[\w.]*(Error|Exception|Exit): ")
# How a load of something the offline Hub cache does not hold fails (transformers, huggingface_hub).
HUB_MISSES = (
    "couldn't connect to 'https://huggingface.co'",
    "LocalEntryNotFoundError",
    "offline mode",
    "not a valid model identifier",
)

# The AWS clients: an error they raise (a missing credential or region, an endpoint out of reach) is a call that
# reaches AWS, which needs the user's account; a try strips credentials and has no network.
AWS_CLIENTS = frozenset(
    {"boto3", "botocore", "s3transfer", "sagemaker", "aiobotocore", "s3fs", "awswrangler"}
)
NEEDS_AWS = "not run: needs an AWS account"
# Python's ImportError for a name a module does not have.
ABSENT_NAME = re.compile(r"cannot import name '(?P<name>[^']+)' from '(?P<module>[^']+)'")

# How Transformers' integrations say a package they need is not installed (`report_to="tensorboard"`:
# `TensorBoardCallback requires tensorboard to be installed`, `ClearMLCallback requires 'clearml' ...`).
REQUIRED_PACKAGE = re.compile(r"\w+ requires [`']?([A-Za-z][\w-]*)\S* to be installed")
# What Transformers, Diffusers and huggingface_hub raise for a model repository the offline cache lacks (a
# dataset's miss raises other types, and has its own stand-ins).
MODEL_LOAD_ERRORS = frozenset({"OSError", "LocalEntryNotFoundError", "EntryNotFoundError"})


class TryUsageError(Exception):
    """Bad input for `try` as a whole (exit 2): the message is the one line shown."""


@dataclass
class TryOptions:
    steps: int = 3
    timeout_s: float = 600.0
    max_new_tokens: int = 4
    denoising_steps: int = 2  # per Diffusers pipeline call
    # --recompile-limit: Dynamo's recompile_limit in the run (None: Dynamo's own)
    recompile_limit: int | None = None
    models: dict[str, str] = field(default_factory=dict)  # --model ID=MODEL_TYPE
    datasets: dict[str, Path] = field(default_factory=dict)  # --dataset ID=FILE.jsonl
    channels: dict[str, Path] = field(default_factory=dict)  # --channel NAME=DIR: a SageMaker channel's files
    cache_root: Path | None = None
    tree: Path | None = None  # the folder `try DIR` tries: its files are the user's code
    python: str = sys.executable  # the interpreter that runs the user's code (--python)
    isolated: bool = True  # False (--no-isolation): the user's files, network and set-up are real
    install_missing: bool = True  # False (--no-install): no missing module is installed (packages.py)
    show_output: bool = True
    echo: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)


def file_kind(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".py":
        return "script"
    if suffix == ".ipynb":
        return "notebook"
    if suffix in LAUNCHER_SUFFIXES:
        return "launcher"
    try:
        first = path.open("rb").readline()
    except OSError:
        first = b""
    if first.startswith(b"#!") and any(shell in first for shell in (b"bash", b"/sh", b"zsh")):
        return "launcher"
    if first.startswith(b"#!") and b"python" in first:
        return "script"
    raise TryUsageError(f"{path}: not a Python script, shell launcher or notebook (.py, .sh, .ipynb)")


def try_path(path: Path, arguments: list[str], options: TryOptions) -> list[RunReport]:
    """Every run of `path`; raises TryUsageError for input that cannot be tried at all."""
    if not path.exists():
        raise TryUsageError(f"{path}: no such file")
    if not path.is_file():
        raise TryUsageError(f"{path}: not a file (try one script, launcher or notebook at a time)")
    kind = file_kind(path)
    try:
        base_env, device = device_environment(dict(os.environ), options.python)
    except DeviceUnavailable as error:
        raise TryUsageError(str(error)) from error
    if kind == "script":
        problem = _syntax_error(path)
        if problem:
            return [RunReport(f"python {path.name}", NOT_RUN, problem, device=device)]
    named, path = path, path.absolute()
    work = Path(tempfile.mkdtemp(prefix="neuron-migrate-try-"))
    try:
        with _isolation(work, options) as sandbox:
            env = _environment(base_env, work, options)
            trial = _Trial(path, named.parent, kind, sandbox, work, env, device, None, options)
            try:
                the_plan, trial.cells = _plan(kind, path, arguments, env, trial)
            except plan.PlanError as error:
                raise TryUsageError(str(error)) from error
            sources, folders = _code(trial, the_plan)
            installing = time.monotonic()
            if options.install_missing:
                trial.installs = _install_missing(trial, the_plan, sources, folders)
            installing = round(time.monotonic() - installing, 2)
            served_metrics = _serve_metrics(trial, sources)
            runs = []
            for index, launch in enumerate(the_plan.launches, start=1):
                if len(the_plan.launches) > 1:
                    options.echo(f"neuron-migrate try: run {index}/{len(the_plan.launches)}: {launch.label}")
                run = trial.run(launch, index, the_plan.skipped)
                run.isolation = _isolation_note(sandbox)
                run.installs = [install.as_report() for install in trial.installs]
                # the metrics written before the run, then those written when the code loaded them
                named = {metric["name"] for metric in served_metrics}
                run.metrics = [*served_metrics, *(m for m in run.metrics if m["name"] not in named)]
                if trial.installs:
                    run.timings["installing_seconds"] = installing
                runs.append(run)
            return runs
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def _isolation(work: Path, options: TryOptions):
    """The try's sandbox, or None under --no-isolation; a machine that cannot isolate refuses the try."""
    if not options.isolated:
        yield None
        return
    try:
        sandbox = Sandbox(work)
    except IsolationUnavailable as error:
        raise TryUsageError(
            f"{error}; `--no-isolation` runs the try without it (writes, set-up commands and the network "
            "are then real)"
        ) from error
    with sandbox:
        yield sandbox


def _isolation_note(sandbox: Sandbox | None) -> str:
    if sandbox is None:
        return "not isolated"
    if sandbox.read_only:  # mounts overlayfs refused: writes there fail instead of landing in the layer
        return f"isolated (read-only, not copy-on-write: {', '.join(sandbox.read_only)})"
    return "isolated"


def _syntax_error(path: Path) -> str | None:
    try:
        compile(path.read_bytes(), str(path), "exec")
    except SyntaxError as error:
        return f"{path}:{error.lineno}: SyntaxError: {error.msg}; not run"
    except (OSError, ValueError) as error:
        return f"{path}: cannot read it: {error}"
    return None


def _plan(kind: str, path: Path, arguments: list[str], env: dict[str, str], trial: _Trial):
    if kind == "script":
        facts = scan.read_python(path.read_text(encoding="utf-8", errors="replace"), arguments)
        return (
            plan.plan_script(
                path, arguments, facts.multi_process, trial.options.python, facts.grid_processes
            ),
            None,
        )
    isolated, python = trial.sandbox is not None, trial.options.python
    if kind == "launcher":
        record = trial.work / "record"
        return plan.plan_launcher(path, arguments, env, record, trial.set_up, isolated, python), None
    if arguments:
        raise plan.PlanError(f"{path}: a notebook takes no arguments")
    return plan.plan_notebook(path, isolated, python)


def _code(trial: _Trial, the_plan: plan.Plan) -> tuple[list[tuple[str | None, str]], list[Path]]:
    """The Python the try runs, each text with where it is when a launch of the tried file starts it (None: the
    tried file's own code): its scripts and the user's modules they import, a notebook's cells, the scripts that
    those launch (`!torchrun train.py`, `subprocess.run(["python", "eval.py"])`, transitively) and the
    modules these import; and the folders it runs from."""
    sources: list[tuple[str | None, str]] = []
    folders: list[Path] = []
    for launch in the_plan.launches:
        folders += [launch.cwd, *(script.parent for script in launch.scripts if script.is_file())]
        # A launcher's scripts are launched by its line; a script's are the tried file and its modules.
        by = f"{trial.path.name}:{launch.line}" if launch.line is not None else None
        for script in (script for script in launch.scripts if script.is_file()):
            said = f"{os.path.relpath(script, trial.path.parent)}, launched by {by}" if by else None
            imported = plan.local_modules(script, [script.parent, *launch.import_paths])
            sources += [(said, _read(path)) for path in [script, *imported]]
        for script in _launched(launch, trial.cells, trial.path.parent):
            said = script.where(trial.path.parent)
            sources.append((said, script.text))
            if not script.written:
                folders.append(script.path.parent)
                imported = plan.local_modules(script.path, [script.path.parent, *launch.import_paths])
                sources += [(said, _read(module)) for module in imported]
    sources += [(None, cell_python(cell)) for cell in trial.cells or []]
    return sources, folders


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _launched(launch: plan.Launch, cells: list[str] | None, base: Path) -> list[launched.Launched]:
    """The scripts a launch's notebook cells or scripts launch, transitively (launched.py)."""
    scripts = [script for script in launch.scripts if script.is_file()]
    return launched.launched_scripts(
        cells if launch.notebook is not None else None, scripts, launch.cwd, base
    )


def _serve_metrics(trial: _Trial, sources: list[tuple[str | None, str]]) -> list[dict]:
    """The evaluate metrics the code loads, served from the try's own modules cache (metrics.py)."""
    names = metrics.loaded([text for _, text in sources])
    if not names:
        return []
    modules = trial.work / "modules"
    trial.env.update({"HF_MODULES_CACHE": str(modules), "HF_EVALUATE_OFFLINE": "1"})
    return metrics.serve(names, modules)


def _install_missing(
    trial: _Trial, the_plan: plan.Plan, sources: list[tuple[str | None, str]], folders: list[Path]
) -> list[packages.Install]:
    """The distributions of the modules the code imports and the environment lacks (those the project
    declares, else those named for the import), and of the logging integrations its training arguments report
    to (read with each launch's arguments and configuration files), installed into the sandbox's layer
    (packages.py). A module that only scripts the tried file launches import is said with the first of them."""
    imports: set[str] = set()
    required: set[str] = set()
    importers: dict[str, str] = {}  # top-level module -> the launched script that imports it first
    own: set[str] = set()  # the top-level modules the tried file's own code imports
    for launched_at, text in sources:
        names = python_imports(text)
        imports |= names
        required |= required_imports(text)
        tops = packages.top_level_modules(set(names))
        if launched_at is None:
            own |= tops
        for module in tops:
            importers.setdefault(module, launched_at)
    launched_imports = {module: at for module, at in importers.items() if at and module not in own}
    found = []  # the tried file's own install lines first, then dependency files from the nearest folder up
    for entry in the_plan.skipped:
        at = f"cell {entry.cell}" if entry.cell else f"{trial.path.name}:{entry.line}"
        found += declarations.pip_install(
            entry.command, trial.path.parent, f"{at}: {entry.command}", trial.path.parent
        )
    # The project's dependency files: up to `try DIR`'s folder, else the repository's root, else the file's folder.
    root = (trial.options.tree or plan.repository_root(trial.path) or trial.path.parent).absolute()
    for above in dict.fromkeys(above for folder in folders for above in _up_to(folder, root)):
        found += declarations.in_files(above, root)

    def run_in_sandbox(argv: list[str]) -> tuple[int, str]:
        return trial.set_up(argv, trial.path.parent, trial.env, {})

    return packages.install_missing(
        imports,
        required,
        folders,
        found,
        root,
        trial.options.python,
        _packages_cache(trial.options),
        packages.Sandbox(run_in_sandbox, trial.work) if trial.sandbox else None,
        integrations.reported(
            set().union(*(_facts(launch, trial.cells).report_to for launch in the_plan.launches)),
            trial.options.python,
        ),
        launched_imports,
    )


def _packages_cache(options: TryOptions) -> Path:
    """Where the wheels a try installs are kept, beside the tiny-model cache."""
    return (options.cache_root or hub.default_cache_root()).parent / "packages"


def _up_to(folder: Path, root: Path) -> list[Path]:
    """`folder` and the folders above it up to `root` (only `folder` when it is not under `root`)."""
    folders = [folder]
    while folders[-1] != root and root in folders[-1].parents:
        folders.append(folders[-1].parent)
    return folders


def _environment(base: dict[str, str], work: Path, options: TryOptions) -> dict[str, str]:
    cache_root = options.cache_root or hub.default_cache_root()
    env = without_credentials(base)
    if options.isolated:
        env.update(NO_NETWORK_ENV)
    env.update(
        {
            "HF_HUB_CACHE": str(hub.hub_cache_dir(cache_root)),
            "HF_DATASETS_CACHE": str(work / "datasets"),
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "HF_EVALUATE_OFFLINE": "1",  # (evaluate's cache: the metrics' stand-ins, metrics.py)
            "TRANSFORMERS_OFFLINE": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            # `token=True` needs a token to exist, even offline; the stand-ins need none (the user's is removed).
            "HF_TOKEN": "neuron-migrate-try-offline",
            "WANDB_MODE": "disabled",  # (so report_to="wandb" runs offline: integrations.OFFLINE)
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONUNBUFFERED": "1",
            # The bootstrap, and the stand-in's package alone (not the tool's others), for an environment that
            # has nothing of ours installed (--python).
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(BOOTSTRAP), _standin_only(work), base.get("PYTHONPATH", "")])
            ),
            # The environment's own commands first (`python`, `torchrun`, `accelerate` in a shell cell or a
            # script's subprocess), as in an activated virtual environment.
            "PATH": os.pathsep.join(filter(None, [os.path.dirname(options.python), base.get("PATH", "")])),
        }
    )
    return env


def _standin_only(work: Path) -> str | None:
    """A folder holding only a link to the stand-in's package (on PYTHONPATH: torch's autoload entry point is
    installed only in the tool's environment, so the bootstrap switches the stand-in on elsewhere)."""
    package = standin_package()
    if package is None:
        return None
    folder = work / "packages"
    folder.mkdir(exist_ok=True)
    (folder / "standin").symlink_to(package, target_is_directory=True)
    return str(folder)


def _serve(facts: scan.CodeFacts, options: TryOptions, env: dict[str, str], run: RunReport) -> dict[str, str]:
    if not (facts.hub_ids() or facts.datasets or options.models or options.datasets):
        return dict(facts.unresolved_ids)
    with _quiet_libraries():
        return _serve_quietly(facts, options, env, run)


@contextlib.contextmanager
def _quiet_libraries():
    """Writing stand-ins is the try's own work: no progress bars or deprecation warnings from the libraries."""
    import warnings

    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    verbosity = transformers.utils.logging.get_verbosity()
    transformers.utils.logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        transformers.utils.logging.set_verbosity(verbosity)
        transformers.utils.logging.enable_progress_bar()
        datasets.enable_progress_bars()


def _serve_quietly(
    facts: scan.CodeFacts, options: TryOptions, env: dict[str, str], run: RunReport
) -> dict[str, str]:
    """Writes the models and datasets the code asks for; returns the model ids it could not serve (with the
    reason, shown if the run then fails on one). Sets run.status = NOT_RUN when a dataset cannot be served."""
    unserved = dict(facts.unresolved_ids)
    cache = Path(env["HF_HUB_CACHE"])
    for model_id in sorted(facts.hub_ids() | set(options.models)):
        try:
            model_type, source = hub.architecture(model_id, options.models, facts.remote_code)
        except hub.CannotStandIn as error:
            unserved[model_id] = str(error)
            continue
        try:
            stand_in = hub.ensure_model(cache, model_id, model_type, source, facts.token_ids_below)
            run.models.append(stand_in.as_report())
        except Exception as error:  # a tiny model of some architectures cannot be built: say so, run on
            unserved[model_id] = (
                f"model {model_id}: its tiny {model_type} stand-in could not be built ({error})"
            )
    datasets_root = Path(env["HF_DATASETS_CACHE"])
    datasets_root.mkdir(parents=True, exist_ok=True)
    requests = dict(facts.datasets)
    variable_splits = requests.pop("", data.DatasetRequest("")).splits
    for dataset_id in options.datasets:
        requests.setdefault(dataset_id, data.DatasetRequest(dataset_id, columns=set(facts.columns)))
    for request in requests.values():
        request.splits |= variable_splits
        request.columns |= facts.columns
        request.kinds |= facts.column_kinds
        try:
            stand_in = data.stand_in(request, options.datasets.get(request.id))
            data.write_cache(stand_in, datasets_root, facts.rows_selected)
        except data.CannotStandIn as error:
            run.status, run.reason = NOT_RUN, str(error)
            return unserved
        except Exception as error:  # rows of a user's --dataset file the builder cannot read, ...
            run.status, run.reason = (
                NOT_RUN,
                f"dataset {request.id}: its stand-in could not be written ({error})",
            )
            return unserved
        run.datasets.append(stand_in.as_report())
    return unserved


def _python_files(launch: plan.Launch) -> list[Path]:
    """The scripts a launch runs and the user's modules they import (what those load and import runs too)."""
    files = [script for script in launch.scripts if script.is_file()]
    for script in launch.scripts:
        imported = plan.local_modules(script, [script.parent, *launch.import_paths])
        files += [module for module in imported if module not in files]
    return files


def _facts(launch: plan.Launch, cells: list[str] | None) -> scan.CodeFacts:
    facts = scan.CodeFacts()
    arguments = [*scan.config_arguments(launch.arguments, partial(_file_text, launch.cwd)), *launch.arguments]
    for script in _python_files(launch):
        try:
            facts.merge(scan.read_python(script.read_text(encoding="utf-8", errors="replace"), arguments))
        except SyntaxError:
            continue  # the run itself reports it, from the user's own traceback
    if not launch.scripts and launch.notebook is None:  # a command line only: its Hub ids are arguments
        facts.merge(scan.read_python("", launch.arguments))
    if cells is not None:
        for cell in cells:
            facts.merge(_cell_facts(cell))
    for script in _launched(launch, cells, launch.cwd):
        facts.merge(_launched_facts(script))
    return facts


def notebook_facts(cells: list[str], folder: Path) -> scan.CodeFacts:
    """What a notebook's cells load: their Python, the scripts `%%writefile` cells write and the scripts
    (written or in the tree) that `!torchrun train.py ...` lines run from `folder` (or the folder a `%cd` moves
    to), and those these launch, read with their arguments."""
    facts = scan.CodeFacts()
    for cell in cells:
        facts.merge(_cell_facts(cell))
    for script in launched.launched_scripts(cells, [], folder, folder):
        facts.merge(_launched_facts(script))
    return facts


def _launched_facts(script: launched.Launched) -> scan.CodeFacts:
    """A launched script's facts, read with its arguments; the tree's scripts are the user's (`facts.launched`:
    their folders are the user's code in the run's tracebacks)."""
    try:
        facts = scan.read_python(script.text, list(script.arguments))
    except SyntaxError:
        facts = scan.CodeFacts()
    if not script.written:
        facts.launched.add(str(script.path))
    return facts


def _file_text(folder: Path, path: str) -> str | None:
    """The text of the file `path` names from `folder` (None: there is none)."""
    try:
        return (folder / path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _cell_facts(cell: str) -> scan.CodeFacts:
    try:
        return scan.read_python(cell_python(cell))
    except SyntaxError:
        return scan.CodeFacts()


@dataclass
class _Trial:
    """One tried file: where its runs work, with what environment and device."""

    path: Path  # absolute
    named_folder: Path  # its folder as the user named it (reports show the user's paths so)
    kind: str
    sandbox: Sandbox | None  # None: not isolated (--no-isolation)
    work: Path  # the try's temporary folder, written through the sandbox (datasets cache, process reports)
    env: dict[str, str]
    device: str
    cells: list[str] | None  # a notebook's cells as the kernel gets them
    options: TryOptions
    installs: list[packages.Install] = field(default_factory=list)  # missing modules, installed for the run

    def run(self, launch: plan.Launch, index: int, setup: list[plan.Skipped]) -> RunReport:
        run = RunReport(launch.label, device=self.device, skipped=[entry.as_report() for entry in setup])
        facts = _facts(launch, self.cells)
        env = self.env
        if facts.token_ids_below:  # tiny models whose vocabulary holds the token ids the code draws
            cache_root = self.options.cache_root or hub.default_cache_root()
            env = {**env, "HF_HUB_CACHE": str(hub.hub_cache_dir(cache_root, facts.token_ids_below))}
        serving = time.monotonic()
        unserved = _serve(facts, self.options, env, run)
        serving = round(time.monotonic() - serving, 2)
        if run.status == NOT_RUN and run.reason:
            return run
        written = self.work / "saved" / str(index)
        try:
            job_env, job_place, job_folders = self.sagemaker_job(facts, launch, written / "channels", run)
        except data.CannotStandIn as error:
            run.status, run.reason = NOT_RUN, str(error)
            return run
        place = {**self.saved_datasets(facts, launch.cwd, written, run), **job_place}
        if self.sandbox is None:  # no discarded layer: the job's folders and files go under the try's folder
            self.materialise(place, job_folders)
            place, job_folders = {}, []
        env = {**env, **job_env}
        served = [model["id"] for model in run.models]
        view = _hub_view(Path(env["HF_HUB_CACHE"]), served, self.work / "hub" / str(index))
        env = {**env, "HF_HUB_CACHE": str(view)}
        reports = self.work / "reports" / str(index)
        reports.mkdir(parents=True)
        config = {
            "report_dir": str(reports),
            "steps": self.options.steps,
            "max_new_tokens": self.options.max_new_tokens,
            "denoising_steps": self.options.denoising_steps,
            "recompile_limit": self.options.recompile_limit,
            # the one cap: the bootstrap applies it to launchers (a DistributedConfig grid's torchrun included)
            "max_processes": max(plan.MAX_PROCESSES, launch.processes),
            # where a Trainer writes when its own output_dir is absolute or unset: in a whole copy-on-write
            # sandbox, its own (the write is discarded, and code after train() finds what it reads there)
            "output_dir": (
                None
                if self.sandbox is not None and not self.sandbox.read_only
                else str(self.work / "trainer_output")
            ),
            "roots": self.user_roots(launch, facts.launched),
            "notebook": self.kind == "notebook",
            "fewer_processes": launch.processes_chosen,
            # for a Hub dataset the scan did not see, stood in when the code loads it: the columns the code reads
            "datasets": {
                "columns": sorted(facts.columns),
                "kinds": facts.column_kinds,
                "min_rows": facts.rows_selected,
            },
        }
        child_env = {**launch.environment(env), "NEURON_MIGRATE_TRY": json.dumps(config)}
        argv = launch.argv
        if self.cells is not None:
            cells_file = self.work / "cells.json"
            cells_file.write_text(json.dumps(self.cells), encoding="utf-8")
            argv = [*argv, str(cells_file)]
        started = time.monotonic()
        exit_code, tail, timed_out = _execute(
            self.isolate(argv, launch.cwd, place, job_folders), launch.cwd, child_env, self.options
        )
        run.seconds = round(time.monotonic() - started, 2)
        run.exit_code = exit_code
        run.output_tail = "\n".join(tail)
        processes = load_process_reports(reports)
        merge_processes(run, processes, self.cells)
        for process in processes:  # the datasets the code loaded that could not be stood in, with the reason
            unserved |= process.get("unserved_datasets", {})
        run.timings["serving_stand_ins_seconds"] = serving
        root = self.options.tree or plan.repository_root(self.path) or self.path.parent
        _conclude(run, timed_out, unserved, tail, self.options, self.installs, root)
        guessed = [model["id"] for model in run.models if model.get("source") == hub.GUESSED]
        if run.status == FAILED and guessed:  # the failure may be the guess's: the reader must know
            run.reason += (
                f"; {', '.join(guessed)}: served as a tiny model of the architecture its name says (not in the "
                "model-id table); if that is not its config.json's model_type, pass --model ID=MODEL_TYPE"
            )
        _real_size_plans(run)
        return run

    def saved_datasets(
        self, facts: scan.CodeFacts, cwd: Path, written: Path, run: RunReport
    ) -> dict[Path, Path]:
        """Stand-ins for the folders the code reads with `load_from_disk` that the tree does not hold: written
        under `written`, placed at those folders in the run's discarded layer (the tree itself is not written)."""
        from compat_matrix.settings import TINY_VOCAB

        place = {}
        for index, name in enumerate(sorted(facts.saved_datasets)):
            target = cwd / name
            channel = sagemaker.channel_of_path(name) if facts.sagemaker_variables else None
            # (not isolated, only a SageMaker channel's: it lies under the try's folder, not the user's files)
            if (
                target.exists()
                or (self.sandbox is None and channel is None)
                or channel in self.options.channels
            ):
                continue
            folder = written / str(index)
            vocabulary = max(TINY_VOCAB, facts.token_ids_below)
            with _quiet_libraries():  # (no `save_to_disk` progress bar: the stand-ins are the try's own work)
                report = data.saved_dataset(
                    name,
                    folder,
                    facts.columns,
                    facts.column_kinds,
                    vocabulary,
                    facts.saved_splits.get(name, set()),
                    facts.sequence_classifier,
                    facts.rows_selected,
                )
            if channel is not None:
                report["source"] += f"; SageMaker channel {channel}"
            run.datasets.append(report)
            place |= {target / file.relative_to(folder): file for file in folder.rglob("*") if file.is_file()}
        return place

    def sagemaker_job(
        self, facts: scan.CodeFacts, launch: plan.Launch, written: Path, run: RunReport
    ) -> tuple[dict[str, str], dict[Path, Path], list[str]]:
        """For code that reads SageMaker's training environment: the variables a training job would set
        (sagemaker.py), the files of its channels ({path in the sandbox: file}: the user's `--channel NAME=DIR`,
        else a stand-in CSV or JSON file of the columns the code reads where it names one; the folders it loads
        from disk are saved-dataset stand-ins, `saved_datasets`) and the folders a job finds made. Raises
        CannotStandIn for a channel the code needs and the try cannot fill."""
        if not facts.sagemaker_variables:
            return {}, {}, []
        read = {sagemaker.channel(name): required for name, required in facts.sagemaker_variables.items()}
        read.pop(None, None)
        place: dict[Path, Path] = {}
        described = {}
        unset = (
            set()
        )  # channels read with a default that the try cannot fill: left out, as by a job without them
        for name in sorted(set(read) | set(self.options.channels)):
            given = self.options.channels.get(name)
            folder = Path(sagemaker.channel_folder(name))
            if given is not None:
                place |= {folder / f.relative_to(given): f for f in sorted(given.rglob("*")) if f.is_file()}
                described[name] = f"--channel {name}={given}"
                continue
            try:
                described[name] = self.channel_stand_in(name, facts, written / name, place)
            except data.CannotStandIn as error:
                if read[name]:
                    raise data.CannotStandIn(
                        f"not run: SageMaker channel {name} ({sagemaker.CHANNEL_PREFIX}{name.upper()}): {error}; "
                        f"pass --channel {name}=DIR, a folder holding the files the job's channel would"
                    ) from error
                unset.add(name)
                described[name] = f"not set ({error}; the code reads it with a default)"
        channels = [name for name in described if name not in unset]
        root = sagemaker.ROOT if self.sandbox is not None else str(self.work / "opt_ml")
        entry_point = launch.scripts[0].name if launch.scripts else self.path.name
        variables = sagemaker.environment(channels, launch.arguments, entry_point, launch.processes, root)
        run.sagemaker = {
            "read": sorted(facts.sagemaker_variables),
            "channels": described,
            "variables": variables,
        }
        folders = [*sagemaker.FOLDERS.values(), *map(sagemaker.channel_folder, channels)]
        return variables, place, folders

    def channel_stand_in(self, name: str, facts: scan.CodeFacts, written: Path, place: dict) -> str:
        """What stands in for channel `name`: the saved datasets the code loads from it (written by
        `saved_datasets`), and a CSV or JSON file for each file of it the code names (added to `place`);
        raises CannotStandIn where the code reads something else there, or nothing the try can follow."""
        saved = sorted(path for path in facts.saved_datasets if sagemaker.channel_of_path(path) == name)
        files = sorted(
            path
            for path in facts.channel_paths
            if sagemaker.channel_of_path(path) == name
            and Path(path).suffix
            and not any(Path(path).is_relative_to(folder) for folder in saved)
        )
        others = [path for path in files if not path.lower().endswith(data.TABLE_SUFFIXES)]
        if others:
            raise data.CannotStandIn(f"the code reads {', '.join(others)}, which the try has no stand-in for")
        if not saved and not files:
            raise data.CannotStandIn(
                f"the code reads {sagemaker.channel_folder(name)} in a way the try does not follow "
                "(it stands in for datasets loaded with load_from_disk and CSV or JSON files the code names)"
            )
        what = [f"a saved dataset at {path}" for path in saved]
        for path in files:
            stand_in = written / Path(path).relative_to(sagemaker.channel_folder(name))
            columns = data.table_file(stand_in, facts.columns, facts.column_kinds, facts.rows_selected)
            place[Path(path)] = stand_in
            what.append(f"{path} ({', '.join(columns)})")
        return "stand-in: " + "; ".join(what)

    def materialise(self, place: dict[Path, Path], folders: list[str]) -> None:
        """Without the sandbox: the SageMaker folders and channel files, under the try's folder (`opt_ml`, where
        the variables point) rather than at /opt/ml."""
        root = self.work / "opt_ml"

        def under_root(path: Path | str) -> Path | None:
            relative = os.path.relpath(path, sagemaker.ROOT)
            return None if relative.startswith("..") else root / relative

        for folder in folders:
            under_root(folder).mkdir(parents=True, exist_ok=True)
        for target, source in place.items():
            host = under_root(target)
            if host is not None:
                host.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, host)

    def user_roots(self, launch: plan.Launch, launched: set[str]) -> dict[str, str]:
        """The folders of the user's code, as the run sees them -> as the user named them: the tried file's, the
        tree's (the folder `try DIR` tries, or the repository's), those the launch puts on the path and those of
        the scripts a notebook launches (`!torchrun ../scripts/train.py`)."""
        folders = [self.path.parent, *launch.import_paths, self.options.tree, plan.repository_root(self.path)]
        folders += [Path(script).parent for script in launched]
        roots = {}
        for folder in filter(None, folders):
            relative = os.path.relpath(Path(folder).absolute(), self.path.parent)
            roots[os.path.realpath(folder)] = os.path.normpath(self.named_folder / relative)
        return roots

    def isolate(
        self, argv: list[str], cwd: Path, place: dict[Path, Path] | None = None, folders: list[str] = ()
    ) -> list[str]:
        """`argv` as run in the try's sandbox: the tiny-model cache and the wheel cache as they are now (the
        runs before this one served into them, the install fetched into it), overlaid, so the run cannot change
        them either."""
        if self.sandbox is None:
            return argv
        cache_root = self.options.cache_root or hub.default_cache_root()
        fresh = [cache_root, _packages_cache(self.options)]
        return self.sandbox.command(argv, cwd, fresh=fresh, place=place, folders=folders)

    def set_up(
        self, argv: list[str], cwd: Path, env: dict[str, str], place: dict[Path, Path]
    ) -> tuple[int, str]:
        """A launcher's recorder run (plan.RunSetUp), within the try's --timeout."""
        errors = self.work / "set-up.stderr"
        with errors.open("w") as stderr:
            process = subprocess.Popen(
                self.isolate(argv, cwd, place),
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,  # held open (not communicate(), which closes it): the sandbox's lifeline
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )
            try:
                process.wait(timeout=self.options.timeout_s)
            finally:
                stop(process)
        return process.returncode, errors.read_text(errors="replace")


def _hub_view(shared: Path, model_ids: list[str], view: Path) -> Path:
    """A Hub cache holding only the stand-ins this run serves, linked from the shared cache: a model that an
    earlier try served (under `--model`) is not found by a run that does not serve it."""
    view.mkdir(parents=True)
    for model_id in model_ids:
        name = f"models--{model_id.replace('/', '--')}"
        (view / name).symlink_to(shared / name, target_is_directory=True)
    return view


def _execute(argv, cwd, env, options: TryOptions) -> tuple[int, list[str], bool]:
    """Runs ARGV; its exit code, the last lines it printed (torchrun's failure summary in one line:
    `output.condensed`) and whether it timed out. The last error line it printed leads the tail when later
    output pushed it out."""
    held: deque[str] = deque(maxlen=OUTPUT_HELD_LINES)
    last_error = ""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,  # held open: the sandbox ends the run if this process dies
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
        errors="replace",
    )

    def pump():
        nonlocal last_error
        for line in process.stdout:
            line = line.rstrip("\n")
            held.append(line)
            last_error = _error_text(line) or last_error
            if options.show_output:
                options.echo(f"  | {line}")

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    timed_out = False
    try:
        process.wait(timeout=options.timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        stop(process)
    reader.join(timeout=10)
    lines = condensed(list(held))[-OUTPUT_TAIL_LINES:]
    if last_error and not any(last_error in line for line in lines):
        lines.insert(0, last_error)
    return process.returncode, lines, timed_out


def _failed_cell_output(tail: list[str]) -> list[str]:
    """The non-empty lines the notebook cell that failed printed (between the kernel runner's `[cell N/M]` line
    and its failed-cell mark), as far as the tail holds them."""
    marks = [index for index, line in enumerate(tail) if line.startswith(FAILED_CELL_MARK)]
    if not marks:
        return []
    starts = [index for index, line in enumerate(tail[: marks[-1]]) if CELL_LINE.match(line)]
    return [line.strip() for line in tail[(starts[-1] + 1 if starts else 0) : marks[-1]] if line.strip()]


def _error_line(tail: list[str]) -> str:
    """The last error a process of the run printed without a Python traceback the report reads (an argument
    parser's usage error, an exception's last line), rather than the banner torchrun prints when a worker fails."""
    return next((text for text in map(_error_text, reversed(tail)) if text), "")


def _error_text(line: str) -> str:
    """`line` without its output prefix when it is such an error, else ""."""
    text = line.strip().lstrip("|").strip()
    if ARGPARSE_ERROR.match(text) or (EXCEPTION_LINE.match(text) and "ChildFailedError" not in text):
        return text
    return ""


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text)[:300]


def _real_size_plans(run: RunReport) -> None:
    """Beside each causal LM the run loaded as a tiny stand-in, the plan of the model at its real size
    (compat_matrix.planner): whether the real one fits a trn2.48xlarge for what the script did, on how many
    ranks, which the tiny run cannot say."""
    from compat_matrix.planner import plan_in_one_line
    from usercode.model_ids import table_entry

    task = "train" if run.steps else "generate"
    for model in run.models:
        entry = table_entry(model["id"])
        if model.get("loaded") and entry is not None and entry.model_type and entry.task is None:
            started = time.monotonic()
            model["real_size_plan"] = plan_in_one_line(model["id"], None, task)
            run.timings["real_size_plan_seconds"] = round(
                run.timings.get("real_size_plan_seconds", 0) + time.monotonic() - started, 2
            )


def _missing_package(error: dict | None) -> str | None:
    """The module a run stopped without: an import that failed, or a library's own check (Transformers'
    reporting callbacks: `TensorBoardCallback requires tensorboard to be installed`)."""
    if not error:
        return None
    if error["type"] == "ModuleNotFoundError":
        return error["message"].removeprefix("No module named ").strip("'")
    required = (
        REQUIRED_PACKAGE.match(error["message"]) if error["type"] in ("RuntimeError", "ImportError") else None
    )
    return required.group(1) if required else None


def _upstream_note(known: dict) -> str:
    """What a run's reason adds for a failure that is PyTorch's or a library's (`upstream_failures.json`)."""
    return (
        f"; a {known['owner']} bug, not the device's: {known['what']}; it fails on plain CPU too "
        f"({known['reproduced_by']}); avoid it with {known['avoid']}; see {', '.join(known['issues'])}"
    )


def _own_module(name: str, root: Path) -> str | None:
    """Where in the tree `root` the module `name` is (`optimizers/mars_m.py`, a package's folder), nearest the
    top first; None where the tree has none (a package to install)."""
    if name not in packages.repository_modules(root):
        return None
    found = sorted(
        (
            path
            for path in [*root.rglob(f"{name}.py"), *root.rglob(f"{name}/__init__.py")]
            if ".git" not in path.parts
        ),
        key=lambda path: (len(path.parts), str(path)),
    )
    return str(found[0].relative_to(root)) if found else None


def _reaches_aws(error: dict) -> bool:
    """An AWS client's own exception, or one an AWS client raised (not an import of it that failed)."""
    own = (error.get("module") or "").split(".")[0] in AWS_CLIENTS
    raised_in = error.get("library") in AWS_CLIENTS and not error["type"].endswith(
        ("ImportError", "NotFoundError")
    )
    return own or raised_in


def _conclude(
    run: RunReport,
    timed_out: bool,
    unserved: dict[str, str],
    tail: list[str],
    options,
    installs: list[packages.Install] = (),
    root: Path | None = None,
) -> None:
    """`root`: the tree the tried file belongs to (its own modules are not packages to install)."""
    if timed_out:
        run.status, run.reason = FAILED, f"ran over the --timeout of {options.timeout_s:g} s and was stopped"
        return
    if run.exit_code == 0 and run.error is None:
        run.status = RAN
        run.reason = (
            f"stopped after {run.steps} optimizer step(s) (--steps {options.steps})"
            if run.steps >= options.steps
            else "finished"
        )
        return
    run.status = FAILED
    error = run.error
    metric_miss = metrics.hub_miss_reason(error["message"]) if error else None
    if metric_miss:
        run.status, run.reason = NOT_RUN, metric_miss
        return
    missing = _missing_package(error)
    top = missing.split(".")[0] if missing else ""
    own = (
        _own_module(top, root)
        if missing and root is not None and all(install.module != top for install in installs)
        else None
    )
    if own is not None:
        run.reason = (
            f"ModuleNotFoundError: `{missing}` is a module of this tree ({own}), which the import at {where(error)} "
            "does not reach from the folder the command runs in and its path: the script's own import (run it "
            "from that module's folder, or put that folder on PYTHONPATH)"
        )
        return
    if missing:
        run.status = NOT_RUN
        run.reason = f"not run: install {missing} in the environment that runs it ({options.python})"
        tried = next((install for install in installs if install.module == top), None)
        if tried is not None:
            run.reason += f"; {tried.requirement} ({packages.declared(tried.declared_in)}) {tried.outcome}"
        elif top in packages.CANNOT_INSTALL:
            run.reason += f"; {packages.CANNOT_INSTALL[top]}"
        return
    absent = ABSENT_NAME.search(error["message"]) if error and error.get("type") == "ImportError" else None
    installed = absent and next(
        (
            i
            for i in installs
            if i.module == absent["module"].split(".")[0] and i.outcome == packages.INSTALLED
        ),
        None,
    )
    if installed:  # the release the try installed is not the one the code was written for (its path, in the
        # sandbox's view of the environment, is left out: the environment itself does not have it)
        run.reason = (
            f"ImportError: {absent[0]} at {where(error)}; {installed.distributions[0]} was installed for the "
            f"try ({installed.requirement}, {packages.declared(installed.declared_in)}) and has no "
            f"{absent['name']}: the code was written for another release; declare the one it needs"
        )
        return
    if error and _reaches_aws(error):
        run.status = NOT_RUN
        run.reason = (
            f"{NEEDS_AWS}: {error['type']}: {_first_line(error['message'])} at {where(error)} (raised in "
            f"{error['library'] or error['module']}); a try strips AWS credentials and has no network, so a call "
            "that reaches AWS ends here"
        )
        return
    text = " ".join(filter(None, [error and error.get("message"), *tail[-5:]]))
    named = [reason for model_id, reason in unserved.items() if model_id in text]
    hub_miss = any(marker in text for marker in HUB_MISSES)
    if named or (unserved and hub_miss):  # a load the stand-ins could not serve: the script never ran
        run.status, run.reason = NOT_RUN, "; ".join(named or unserved.values())
        return
    if hub_miss and error and error["type"] in MODEL_LOAD_ERRORS:  # an id the code reading did not find
        run.status = NOT_RUN
        run.reason = (
            f"{_first_line(error['message'])}: no stand-in for this id; "
            "pass --model ID=MODEL_TYPE (its config.json's model_type)"
        )
        return
    if error:
        at = ""
        if error.get("file"):
            at = f" at {'cell ' + str(error['cell']) if error.get('cell') else error['file']}:{error.get('line')}"
        run.reason = f"{error['type']}: {error['message']}{at}"
        output = _failed_cell_output(tail)
        if error["type"] == "CalledProcessError" and output:  # a shell cell: what its command said
            run.reason += f"; the command's output ends: {' | '.join(last_distinct(output, 3))[-600:]}"
        if error.get("upstream"):
            run.reason += _upstream_note(error["upstream"])
    else:
        last = _error_line(tail) or next((line.strip() for line in reversed(tail) if line.strip()), "")
        if REQUIRED_ARGUMENTS in last:  # the command line the try was given, not the code, is incomplete
            run.status = NOT_RUN
            run.reason = (
                f"{last[:300]}: the command the try ran lacks them (a script's go after `--`: "
                "neuron-migrate try SCRIPT -- ARGS)"
            )
            return
        run.reason = f"exit code {run.exit_code}" + (f": {last[:300]}" if last else "")
        # A native abort (no Python error): its words are in the output.
        known = upstream_failure("\n".join(tail))
        if known:
            run.reason += _upstream_note(known)
