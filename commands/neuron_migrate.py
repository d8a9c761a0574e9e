"""`neuron-migrate [OPTIONS] PATH...`, `neuron-migrate try PATH`, `neuron-migrate bench PATH` and
`neuron-migrate checklist PATH...`."""

from __future__ import annotations

import json
import os
import signal
import sys
from contextlib import contextmanager, suppress
from pathlib import Path

import click

from migrator.progress import Progress
from migrator.version import __version__
from migrator.workers import DEFAULT_TIMEOUT_S
from migrator.writes import replace_file

EXIT_OK, EXIT_MANUAL, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED, EXIT_STDOUT_CLOSED, EXIT_TERMINATED = 130, 141, 143  # 128 + SIGINT, SIGPIPE, SIGTERM


class _DefaultToMigrate(click.Group):
    """`neuron-migrate PATH...` runs `migrate`; `neuron-migrate checklist ...` the subcommand.

    A path that happens to be called `checklist` can still be migrated as `neuron-migrate migrate checklist`.
    """

    def parse_args(self, ctx, args):
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")):
            args = ["migrate", *args]
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        """Ctrl-C exits 130 and a closed standard output 141 wherever they come (click's own handling exits 1,
        the code for manual work left)."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("\ninterrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            _silence_stdout()
            sys.exit(EXIT_STDOUT_CLOSED)


@click.group(cls=_DefaultToMigrate, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="neuron-migrate")
def main() -> None:
    """Rewrite optimum-neuron and PyTorch/XLA scripts into plain Transformers/TRL/PEFT on TorchNeuron.

    \b
    neuron-migrate [OPTIONS] PATH...        migrate files in place (see `neuron-migrate migrate --help`)
    neuron-migrate try PATH [-- ARGS...]    run a migrated file (or every entry point of a folder) for a few
                                            steps on the stand-in device
    neuron-migrate bench PATH [-- ARGS...]  measure a script at its real size on this host's device
    neuron-migrate checklist PATH...        write a pre-migration checklist
    """


def _complete_paths(ctx, param, incomplete):
    """Shell completion of `neuron-migrate PATH...`: files, and the subcommands where the first path goes."""
    from click.shell_completion import CompletionItem

    commands = (
        [] if ctx.params.get("paths") else [name for name in main.commands if name.startswith(incomplete)]
    )
    return [CompletionItem(name) for name in commands] + [CompletionItem(incomplete, type="file")]


@main.command("migrate")
@click.argument(
    "paths", nargs=-1, required=True, type=click.Path(path_type=Path), shell_complete=_complete_paths
)
@click.option("--diff", "show_diff", is_flag=True, help="Print unified diffs; write nothing.")
@click.option(
    "--check", is_flag=True, help="Write nothing; exit 1 if anything would change or needs manual work."
)
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write the migrated tree here: migrated files and every other file of the input folders (links out "
    "of them left out); inputs stay untouched.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json", "sarif"]), default="text", show_default=True
)
@click.option(
    "--report", "report_file", type=click.Path(dir_okay=False, path_type=Path), help="Write the report here."
)
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip files or directories matching GLOB.")
@click.option(
    "-j", "--jobs", type=click.IntRange(min=0), default=1, show_default=True, help="Processes (0: all CPUs)."
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="Time one file may take; past it the file is an error and is left untouched (0: no limit).",
)
@click.option(
    "--skip-unsupported",
    is_flag=True,
    help="Leave out named files of kinds neuron-migrate does not read, instead of refusing them (pre-commit).",
)
@click.option("-q", "--quiet", is_flag=True, help="Only the summary line (and manual items) in text mode.")
def migrate(
    paths, show_diff, check, output_dir, fmt, report_file, exclude, jobs, timeout, skip_unsupported, quiet
):
    """Migrate PATH... (.py, .ipynb, .sh, requirements*.txt, pyproject.toml files or directories, searched recursively) in place."""
    from migrator.engine import Interrupted, Job, Mode, output_conflicts, run
    from migrator.report import render, summary_line, text_lines
    from usercode.sources import UsageError, discover

    if sum([show_diff, check, output_dir is not None]) > 1:
        _usage_error("--diff, --check and --output-dir exclude each other")
    try:
        sources = discover(paths, exclude, skip_unsupported)
    except UsageError as error:
        _usage_error(str(error))
    if output_dir is not None:
        _check_output_dir(output_dir, paths)
    mode = Mode.DIFF if show_diff else Mode.CHECK if check else Mode.OUTPUT if output_dir else Mode.WRITE
    jobs_list = [Job(source, mode, output_dir, display=str(source.path)) for source in sources]
    conflict = output_conflicts(jobs_list, report_file)
    if conflict:
        _usage_error(conflict)
    tree = _planned_tree(output_dir, paths, exclude, sources) if output_dir is not None else None
    workers = min(jobs or os.cpu_count() or 1, max(1, len(jobs_list)))

    progress = Progress(jobs_list, timeout, enabled=not quiet)
    interrupted = None
    with _stopped_by_sigterm():
        try:
            results = run(
                jobs_list, workers, progress.done, timeout or None, progress.tick if not quiet else None
            )
        except Interrupted as stop:
            results, interrupted = stop.done, stop
        finally:
            progress.close()

    copied, copy_error = (
        _write_tree(tree, output_dir) if tree is not None and interrupted is None else ("", None)
    )
    verb = {Mode.WRITE: "rewritten", Mode.OUTPUT: "migrated copies written"}.get(mode, "would change")
    line = summary_line(results, verb) + copied
    interrupted_line = f"interrupted: {len(results)} of {len(jobs_list)} files done; {line}"
    try:
        total = interrupted.total if interrupted is not None else None
        report = render(results, fmt, fixed_in_place=mode is Mode.WRITE, total=total)
        report_error = None
        if report_file is not None:
            try:
                replace_file(report_file, report.encode())
            except OSError as error:  # said after the findings and the summary, which are still printed
                report_error = f"cannot write report {report_file}: {error.strerror or error}"
        with _stdout_closed_exits():
            for result in results:
                if result.diff:
                    click.echo(result.diff, nl=False)
            if report_file is None and fmt != "text":
                click.echo(report, nl=False)
            if fmt == "text" and not show_diff:
                for finding_line in text_lines(results, show_fixed=not quiet):
                    click.echo(finding_line)
        if interrupted is not None:
            click.echo(interrupted_line, err=True)
            if report_error:
                click.echo(f"neuron-migrate: error: {report_error}", err=True)
            sys.exit(EXIT_TERMINATED if _terminated else EXIT_INTERRUPTED)
        click.echo(line, err=True)
    except KeyboardInterrupt:
        # Ctrl-C while the findings print: every file is done already (written whole or left as it was).
        click.echo(f"\n{interrupted_line}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if mode in (Mode.CHECK, Mode.DIFF) and not any(result.changed for result in results):
        click.echo("no files were modified", err=True)
    if report_error or copy_error:
        _usage_error(report_error or copy_error)

    if any(result.error for result in results):
        sys.exit(EXIT_USAGE)
    manual = any(result.manual for result in results)
    if manual or (mode is Mode.CHECK and any(result.changed for result in results)):
        sys.exit(EXIT_MANUAL)
    sys.exit(EXIT_OK)


def _planned_tree(output_dir: Path, paths, exclude, sources):
    """The rest of the input folders to copy under --output-dir; a usage error when a copy would land on an
    input or on a migrated file."""
    from migrator import copies

    tree = copies.plan(list(paths), tuple(exclude), sources)
    taken = {os.path.realpath(output_dir / source.relative) for source in sources}
    conflict = copies.conflicts(tree, output_dir, list(paths), taken)
    if conflict:
        _usage_error(conflict)
    return tree


def _write_tree(tree, output_dir: Path) -> tuple[str, str | None]:
    """(the summary's words, an error): links out of the tree are named, then the copies written."""
    from migrator import copies

    for link, pointed in tree.links_out:
        click.echo(f"not copied: {link} (a link out of the tree, to {pointed})", err=True)
    try:
        copies.write(tree, output_dir)
    except OSError as error:
        return "", f"cannot copy the rest of the tree into {output_dir}: {error}"
    return f"; {len(tree.copies)} other files copied; migrated tree in {output_dir}", None


def _check_output_dir(output_dir: Path, inputs) -> None:
    target = output_dir.resolve()
    for path in inputs:
        root = Path(path).resolve()
        if target == root or (root.is_dir() and root in target.parents):
            _usage_error(f"--output-dir {output_dir} must not be inside the input {path}")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        _usage_error(f"cannot create --output-dir {output_dir}: {error}")
    if not os.access(target, os.W_OK):
        _usage_error(f"--output-dir {output_dir} is not writable")


def _usage_error(message: str) -> None:
    click.echo(f"neuron-migrate: error: {message}", err=True)
    sys.exit(EXIT_USAGE)


_terminated = False


@contextmanager
def _stopped_by_sigterm():
    """SIGTERM (a CI job cancelled, `timeout`) stops a run as Ctrl-C does: workers stopped, summary written."""

    def stop(signum, frame):
        global _terminated
        _terminated = True
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _stdout_closed_exits():
    """`neuron-migrate --diff . | head`: once the reader is gone, stop printing and exit 141 (128 + SIGPIPE,
    what a shell reports for a program killed by it), without a traceback."""
    try:
        yield
    except BrokenPipeError:
        _silence_stdout()
        sys.exit(EXIT_STDOUT_CLOSED)


def _silence_stdout() -> None:
    """Python flushes stdout again at exit: once its reader is gone, point it at /dev/null so that cannot fail."""
    with suppress(OSError, ValueError):  # ValueError: not a real file (a test runner's capture)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


@main.command("checklist")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="checklist.md or checklist.html (by suffix); standard output when omitted.",
)
@click.option(
    "--results",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A neuron-compat results.jsonl (default: the bundled reference run).",
)
@click.option("--online", is_flag=True, help="Look up unknown model ids on the Hugging Face Hub.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip files or directories matching GLOB.")
@click.option(
    "--try-report",
    "try_reports",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A `neuron-migrate try --format json --report` file: each tried script shows what ran.",
)
@click.option(
    "--bench-report",
    "bench_reports",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A `neuron-migrate bench --report` file: each benched script shows what it measured.",
)
def checklist(paths, output, results, online, exclude, try_reports, bench_reports):
    """Write a pre-migration checklist for the scripts, notebooks and launchers in PATH..."""
    try:
        from reports.checklist import write_checklist
    except ModuleNotFoundError as error:  # the base install is the migrator's (no pandas, no jinja2)
        _usage_error(
            f"`neuron-migrate checklist` needs {error.name}, which the reports extra installs: "
            "pip install 'neuron-migrate[reports]'"
        )

    sys.exit(
        write_checklist(
            list(paths),
            output=output,
            results=results,
            online=online,
            exclude=exclude,
            try_reports=[*try_reports, *bench_reports],
        )
    )


# The options try and bench share.
_run_format_option = click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
_run_report_option = click.option(
    "--report",
    "report_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the JSON report here.",
)
_python_option = click.option(
    "--python",
    "python",
    type=click.Path(exists=True, dir_okay=False),
    help="The interpreter that runs the code (default: the active virtual environment's, else this tool's).",
)


@main.command("try", context_settings={"ignore_unknown_options": False})
@click.argument("path", type=click.Path(path_type=Path))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--steps", type=click.IntRange(min=1), default=3, show_default=True, help="Optimizer steps per run."
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=1),
    default=600,
    show_default=True,
    help="Seconds per run.",
)
@click.option(
    "--recompile-limit",
    type=click.IntRange(min=1),
    help="Dynamo's recompile_limit in the run (default: Dynamo's, 8): a frame compiled this many times runs "
    "eagerly after that, and the report says where.",
)
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="ID=MODEL_TYPE",
    help="Architecture of a Hub id the table does not know.",
)
@click.option(
    "--dataset", "datasets", multiple=True, metavar="ID=FILE.jsonl", help="Rows to serve for a Hub dataset."
)
@click.option(
    "--channel",
    "channels",
    multiple=True,
    metavar="NAME=DIR",
    help="A SageMaker entry point: the files of its input channel NAME (SM_CHANNEL_NAME), instead of a stand-in.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="A folder: entry points tried at once.",
)
@click.option(
    "--entry-points",
    "entry_table",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A folder: try these rows (JSON or CSV: path, arguments) instead of the entry points found.",
)
@_run_format_option
@_run_report_option
@click.option(
    "-q", "--quiet", is_flag=True, help="Do not show the runs' own output (or a folder's progress)."
)
@_python_option
@click.option(
    "--no-isolation",
    is_flag=True,
    help="Run without the sandbox (docs/reference/safety.md): the script's writes, set-up commands and network are real.",
)
@click.option(
    "--no-install",
    is_flag=True,
    help="Install nothing: a module the environment lacks is reported, even when the project declares it.",
)
def try_(
    path,
    args,
    steps,
    timeout_s,
    recompile_limit,
    models,
    datasets,
    channels,
    jobs,
    entry_table,
    fmt,
    report_file,
    quiet,
    python,
    no_isolation,
    no_install,
):
    """Run PATH (a migrated .py, shell launcher or notebook) for a few steps on the stand-in neuron device,
    with tiny models and local data, and report steps, loss and what a trn2 would recompile.

    \b
    Arguments for the script go after `--`:
        neuron-migrate try train.py -- --lr 1e-4
    A folder: its entry points (launchers, notebooks, scripts that no launcher runs and no file imports),
    each tried as above, -j at a time, into one table:
        neuron-migrate try migrated/ -j 2 --format json --report tries.json
    """
    from try_run import TryOptions, TryUsageError, try_path
    from try_run.report import RAN, summary, text_lines

    options = TryOptions(
        steps=steps,
        timeout_s=timeout_s,
        recompile_limit=recompile_limit,
        models=_pairs(models, "--model", "ID=MODEL_TYPE"),
        datasets={key: Path(value) for key, value in _pairs(datasets, "--dataset", "ID=FILE.jsonl").items()},
        channels={
            key.lower(): Path(value).absolute()
            for key, value in _pairs(channels, "--channel", "NAME=DIR").items()
        },
        show_output=not quiet and fmt == "text",
        isolated=not no_isolation,
        install_missing=not no_install,
        python=str(Path(python).absolute()) if python else _active_python(),
    )
    for dataset_id, file in options.datasets.items():
        if not file.is_file():
            _usage_error(f"--dataset {dataset_id}={file}: no such file")
    for name, folder in options.channels.items():
        if not folder.is_dir():
            _usage_error(f"--channel {name}={folder}: no such folder")
    if path.is_dir():
        if args:
            _usage_error(f"{path} is a folder: give each entry point's arguments in --entry-points")
        _try_folder(path, entry_table, options, jobs, fmt, report_file, quiet)
        return
    if entry_table is not None:
        _usage_error("--entry-points lists the entry points of a folder; PATH is a file")
    if report_file is not None and report_file.resolve() == path.resolve():
        _usage_error(f"--report {report_file} is the file being tried; name another file")
    try:
        with _stopped_by_sigterm():
            runs = try_path(path, list(args), options)
    except TryUsageError as error:
        _usage_error(str(error))
    except KeyboardInterrupt:
        click.echo("neuron-migrate try: stopped; the run and every process it started were ended", err=True)
        sys.exit(EXIT_TERMINATED if _terminated else EXIT_INTERRUPTED)
    document = {"path": str(path), "steps": steps, "runs": [run.as_dict() for run in runs]}
    _write_try_report(document, report_file, fmt)
    if fmt == "text":
        for line in text_lines(runs):
            click.echo(line)
    click.echo(summary(runs), err=True)
    sys.exit(EXIT_OK if all(run.status == RAN for run in runs) else EXIT_MANUAL)


def _try_folder(root: Path, entry_table, options, jobs: int, fmt: str, report_file, quiet: bool) -> None:
    from try_run import entry_points, tree

    try:
        if entry_table is not None:
            entries, not_entries = entry_points.read_table(entry_table, root), {}
        else:
            found = entry_points.find(root)
            entries, not_entries = found.entries, found.not_entries
    except entry_points.EntryPointsError as error:
        _usage_error(str(error))
    if not entries:
        _usage_error(f"{root}: no entry point found (a launcher, a notebook or a script with a main)")
    if not quiet:
        click.echo(f"neuron-migrate try: {len(entries)} entry points in {root}, {jobs} at a time", err=True)

    def done(result, finished: int) -> None:
        if not quiet:
            click.echo(
                f"[{finished}/{len(entries)}] {result.status:8} {result.entry.path.as_posix()} "
                f"({result.seconds:.0f} s)",
                err=True,
            )

    with _stopped_by_sigterm():
        results = tree.try_tree(root, entries, options, jobs, done)
    document = {
        "path": str(root),
        "steps": options.steps,
        "entry_points": [result.as_dict() for result in results],
        "not_entry_points": not_entries,
    }
    _write_try_report(document, report_file, fmt)
    if fmt == "text":
        for line in tree.text_lines(results):
            click.echo(line)
    click.echo(tree.summary(results), err=True)
    sys.exit(EXIT_OK if all(result.status == "ran" for result in results) else EXIT_MANUAL)


def _write_try_report(document: dict, report_file, fmt: str) -> None:
    text = json.dumps(document, indent=2)
    if report_file is not None:
        try:
            report_file.parent.mkdir(parents=True, exist_ok=True)
            report_file.write_text(text + "\n", encoding="utf-8")
        except OSError as error:
            _usage_error(f"cannot write report {report_file}: {error}")
    if fmt == "json" and report_file is None:
        click.echo(text)


@main.command("bench")
@click.argument("path", type=click.Path(path_type=Path))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Steps or requests left out first.",
)
@click.option(
    "--steps", type=click.IntRange(min=1), default=10, show_default=True, help="Optimizer steps measured."
)
@click.option(
    "--requests", type=click.IntRange(min=1), default=5, show_default=True, help="generate() calls measured."
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=1),
    default=1800,
    show_default=True,
    help="Seconds per run.",
)
@click.option(
    "--instance",
    help="Price the run with this row of the instance price table (trn1.32xlarge, p5.48xlarge, ...).",
)
@click.option(
    "--price-per-hour",
    type=click.FloatRange(min=0, min_open=True),
    help="USD per instance hour (overrides --instance).",
)
@click.option(
    "--baseline", metavar="CMD", help="The command the script replaces, measured the same way and compared."
)
@click.option(
    "--baseline-report",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A `neuron-migrate bench --report` file from another host (the run on a GPU, on trn1) to compare with.",
)
@click.option(
    "--page",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --baseline: the side-by-side page (.md or .html).",
)
@click.option(
    "--standin", is_flag=True, help="Run on the stand-in neuron device (CPU), for tests of the tool."
)
@_run_format_option
@_run_report_option
@click.option("-q", "--quiet", is_flag=True, help="Do not show the run's own output.")
@_python_option
def bench(
    path,
    args,
    warmup,
    steps,
    requests,
    timeout_s,
    instance,
    price_per_hour,
    baseline,
    baseline_report,
    page,
    standin,
    fmt,
    report_file,
    quiet,
    python,
):
    """Run PATH (a script, shell launcher or notebook) at its real size with its own models and data on the
    device this host has (neuron, cuda or cpu), and report compile time, steady-state step time, samples and
    tokens per second, generation latency, peak memory and cost per million tokens.

    \b
    Arguments for the script go after `--`:
        neuron-migrate bench train.py --steps 20 -- --bf16
    """
    from try_run.bench import BenchOptions, bench_path, text_lines
    from try_run.runner import TryUsageError

    options = BenchOptions(
        warmup=warmup,
        steps=steps,
        requests=requests,
        timeout_s=timeout_s,
        standin=standin,
        price_per_hour=price_per_hour,
        instance=instance,
        show_output=not quiet and fmt == "text",
        python=str(Path(python).absolute()) if python else _active_python(),
    )
    if baseline is not None and baseline_report is not None:
        _usage_error("--baseline and --baseline-report: give one")
    if page is not None and baseline is None and baseline_report is None:
        _usage_error("--page needs --baseline CMD or --baseline-report FILE")
    earlier = None
    if baseline_report is not None:
        try:
            earlier = json.loads(baseline_report.read_text(encoding="utf-8"))["results"][0]
        except (OSError, ValueError, KeyError, IndexError, TypeError) as error:
            _usage_error(f"--baseline-report {baseline_report}: not a neuron-migrate bench report ({error})")
    try:
        results = [bench_path(path, list(args), options)]
        if baseline is not None:
            from try_run.bench import bench_command

            results.append(bench_command(baseline, options))
    except TryUsageError as error:
        _usage_error(str(error))
    document = {"path": str(path), "results": [result.as_dict() for result in results]}
    if earlier is not None:
        document["results"].append(earlier)
    if len(document["results"]) == 2:
        from reports.bench import comparison, write_page

        document["comparison"] = comparison(document["results"][0], document["results"][1])
        if page is not None:
            try:
                write_page(document, page)
            except OSError as error:
                _usage_error(f"cannot write page {page}: {error}")
    _write_try_report(document, report_file, fmt)
    if fmt == "text":
        for result in results:
            for line in text_lines(result):
                click.echo(line)
        for difference in document.get("comparison", {}).get("differences", []):
            click.echo(f"  differs from the baseline: {difference}")
    sys.exit(EXIT_OK if all(result.status == "measured" for result in results) else EXIT_MANUAL)


def _active_python() -> str:
    """The interpreter a script would run with here: the active virtual environment's, else this one."""
    venv = os.environ.get("VIRTUAL_ENV")
    if (
        venv
        and Path(venv).resolve() != Path(sys.prefix).resolve()
        and (Path(venv) / "bin" / "python").exists()
    ):
        return str(Path(venv) / "bin" / "python")
    return sys.executable


def _pairs(values: tuple[str, ...], option: str, form: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        key, has_value, item = value.partition("=")
        if not has_value or not key or not item:
            _usage_error(f"{option} {value}: expected {form}")
        pairs[key] = item
    return pairs
