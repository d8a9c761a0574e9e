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
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from try_run import data, hub, plan, scan
from try_run.device import DeviceUnavailable, device_environment, standin_package
from try_run.report import FAILED, NOT_RUN, RAN, RunReport, load_process_reports, merge_processes
from try_run.sandbox import NO_NETWORK_ENV, IsolationUnavailable, Sandbox, stop, without_credentials
from usercode.launchers import LAUNCHER_SUFFIXES
from usercode.notebook import cell_python, written_script

BOOTSTRAP = Path(__file__).with_name("bootstrap")
OUTPUT_TAIL_LINES = 40
# How a load of something the offline Hub cache does not hold fails (transformers, huggingface_hub).
HUB_MISSES = (
    "couldn't connect to 'https://huggingface.co'",
    "LocalEntryNotFoundError",
    "offline mode",
    "not a valid model identifier",
)

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
    models: dict[str, str] = field(default_factory=dict)  # --model ID=MODEL_TYPE
    datasets: dict[str, Path] = field(default_factory=dict)  # --dataset ID=FILE.jsonl
    cache_root: Path | None = None
    python: str = sys.executable  # the interpreter that runs the user's code (--python)
    isolated: bool = True  # False (--no-isolation): the user's files, network and set-up are real
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
            runs = []
            for index, launch in enumerate(the_plan.launches, start=1):
                if len(the_plan.launches) > 1:
                    options.echo(f"neuron-migrate try: run {index}/{len(the_plan.launches)}: {launch.label}")
                run = trial.run(launch, index, the_plan.skipped)
                run.isolation = _isolation_note(sandbox)
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
        return plan.plan_script(path, arguments, facts.multi_process, trial.options.python), None
    isolated, python = trial.sandbox is not None, trial.options.python
    if kind == "launcher":
        record = trial.work / "record"
        return plan.plan_launcher(path, arguments, env, record, trial.set_up, isolated, python), None
    if arguments:
        raise plan.PlanError(f"{path}: a notebook takes no arguments")
    return plan.plan_notebook(path, isolated, python)


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
            "TRANSFORMERS_OFFLINE": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            # `token=True` needs a token to exist, even offline; the stand-ins need none (the user's is removed).
            "HF_TOKEN": "neuron-migrate-try-offline",
            "WANDB_MODE": "disabled",
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
    if not (facts.model_ids or facts.datasets or options.models or options.datasets):
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
    for model_id in sorted(facts.model_ids | set(options.models)):
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
        try:
            stand_in = data.stand_in(request, options.datasets.get(request.id))
            data.write_cache(stand_in, datasets_root)
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


def _facts(launch: plan.Launch, cells: list[str] | None) -> scan.CodeFacts:
    facts = scan.CodeFacts()
    sources = [(script, None) for script in launch.scripts if script.is_file()]
    for script, _ in sources:
        try:
            facts.merge(
                scan.read_python(script.read_text(encoding="utf-8", errors="replace"), launch.arguments)
            )
        except SyntaxError:
            continue  # the run itself reports it, from the user's own traceback
    if not launch.scripts and launch.notebook is None:  # a command line only: its Hub ids are arguments
        facts.merge(scan.read_python("", launch.arguments))
    if cells is not None:
        facts.merge(notebook_facts(cells, launch.cwd))
    return facts


def notebook_facts(cells: list[str], folder: Path) -> scan.CodeFacts:
    """What a notebook's cells load: their Python, the scripts `%%writefile` cells write and the scripts
    (written or already in `folder`) that `!torchrun train.py ...` lines run, read with their arguments."""
    facts = scan.CodeFacts()
    written = dict(map(written_script, cells))
    for cell in cells:
        facts.merge(_cell_facts(cell))
        for _, command in plan.notebook_shell_lines(cell):
            facts.merge(_scripts_of(command, folder, written))
    return facts


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
            "max_processes": plan.MAX_PROCESSES,  # the one cap: the bootstrap applies it to launchers
            "output_dir": str(self.work / "trainer_output"),
            "roots": {os.path.realpath(self.path.parent): str(self.named_folder)},
            "notebook": self.kind == "notebook",
            "fewer_processes": launch.processes_chosen,
        }
        child_env = {**env, **launch.env, "NEURON_MIGRATE_TRY": json.dumps(config)}
        argv = launch.argv
        if self.cells is not None:
            cells_file = self.work / "cells.json"
            cells_file.write_text(json.dumps(self.cells), encoding="utf-8")
            argv = [*argv, str(cells_file)]
        started = time.monotonic()
        exit_code, tail, timed_out = _execute(
            self.isolate(argv, launch.cwd), launch.cwd, child_env, self.options
        )
        run.seconds = round(time.monotonic() - started, 2)
        run.exit_code = exit_code
        run.output_tail = "\n".join(tail)
        merge_processes(run, load_process_reports(reports), self.cells)
        run.timings["serving_stand_ins_seconds"] = serving
        _conclude(run, timed_out, unserved, tail, self.options)
        return run

    def isolate(self, argv: list[str], cwd: Path, place: dict[Path, Path] | None = None) -> list[str]:
        """`argv` as run in the try's sandbox: the tiny-model cache as it is now (the runs before this one
        served into it), overlaid, so the run cannot change it either."""
        if self.sandbox is None:
            return argv
        cache_root = self.options.cache_root or hub.default_cache_root()
        return self.sandbox.command(argv, cwd, fresh=[cache_root], place=place)

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


def _scripts_of(command: str, sandbox: Path, written: dict[str | None, str]) -> scan.CodeFacts:
    """A notebook's `!torchrun train.py ...` line: the script's facts, read with its arguments (the script
    as a `%%writefile` cell writes it, or as it is in the notebook's folder)."""
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        return scan.CodeFacts()
    script = next((word for word in words if word.endswith(".py")), None)
    if script is None or not (script in written or (sandbox / script).is_file()):
        return scan.CodeFacts()
    arguments = words[words.index(script) + 1 :]
    source = written.get(script) or (sandbox / script).read_text(encoding="utf-8", errors="replace")
    try:
        return scan.read_python(source, arguments)
    except SyntaxError:
        return scan.CodeFacts()


def _execute(argv, cwd, env, options: TryOptions) -> tuple[int, list[str], bool]:
    tail: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)
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
        for line in process.stdout:
            line = line.rstrip("\n")
            tail.append(line)
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
    return process.returncode, list(tail), timed_out


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text)[:300]


def _conclude(run: RunReport, timed_out: bool, unserved: dict[str, str], tail: list[str], options) -> None:
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
    if error and error.get("type") == "ModuleNotFoundError":
        missing = error["message"].removeprefix("No module named ").strip("'")
        run.status = NOT_RUN
        run.reason = f"not run: install {missing} in the environment that runs it ({options.python})"
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
    else:
        last = next((line.strip() for line in reversed(tail) if line.strip()), "")
        run.reason = f"exit code {run.exit_code}" + (f": {last[:300]}" if last else "")
