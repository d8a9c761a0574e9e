"""``neuron-compat``: run the compatibility matrix, rank architectures from the Hub, list architectures."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import click

from compat_matrix import planner
from compat_matrix.settings import BACKENDS, CONFIGS, DEFAULT_TIMEOUT_S, DTYPES, ProbeSettings


class BadInput(click.ClickException):
    """A mistake in what the user asked for: clear message, exit code 2, no file touched."""

    exit_code = 2


def _parse_shard(ctx: click.Context, param: click.Parameter, value: str | None):
    from compat_matrix.merge import Shard

    try:
        return Shard.parse(value) if value is not None else None
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


# What the `compat` and `reports` extras install (a base install is the migrator's: no torch, no pandas).
_EXTRA_OF = {"torch": "compat", "transformers": "compat", "trl": "compat", "peft": "compat"}
_EXTRA_OF |= {"accelerate": "compat", "psutil": "compat", "pandas": "reports", "jinja2": "reports"}


class _Commands(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ModuleNotFoundError as error:
            extra = _EXTRA_OF.get((error.name or "").split(".")[0])
            if extra is None:
                raise
            raise BadInput(
                f"this command needs {error.name}, which the {extra} extra installs: "
                f"pip install 'neuron-migrate[{extra}]'"
            ) from None


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="neuron-migrate")
def main() -> None:
    """Which Transformers architectures work on TorchNeuron, and how often they recompile: text generation,
    the encoders' and vision towers' forward (--archs encoders, vision) and the encoder-decoders' generation
    (--archs seq2seq)."""


@main.command()
@click.option(
    "--archs",
    default="top100",
    show_default=True,
    help="top100, all, checkpoint-differs (whose recorded checkpoint values differ from the class defaults), "
    "a family of other tasks (encoders, vision, seq2seq: text2text-generation and automatic-speech-recognition), "
    "one of its tasks, or a comma list of causal-LM model types and task/model_type probes "
    "(feature-extraction/bert, text2text-generation/t5).",
)
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default="auto",
    show_default=True,
    help="neuron: the real device; neuron-sim: CPU simulation; auto: neuron when present.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=Path("results.jsonl"),
    show_default=True,
    help="Results file (JSON lines, appended); a CSV twin is written next to it.",
)
@click.option("--resume", is_flag=True, help="Skip architectures already in the output for these settings.")
@click.option(
    "-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Parallel workers."
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds per architecture before its worker is killed [default: 600 on neuron-sim, 3600 on neuron, "
    "where a cold compile cache compiles every graph with neuronx-cc].",
)
@click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    default="float32",
    show_default=True,
    help="Weights and activations of every probe; the logit tolerance follows it.",
)
@click.option(
    "--config",
    "config_source",
    type=click.Choice(CONFIGS),
    default="checkpoint",
    show_default=True,
    help="checkpoint: build each tiny model from the code-path fields of its architecture's most-used "
    "checkpoint (compat_matrix/checkpoint_configs.json; class defaults where it has none, as the row says); "
    "class-defaults: from the Transformers config class's defaults.",
)
@click.option(
    "--sim-device",
    default="cpu",
    show_default=True,
    metavar="DEVICE",
    help="neuron-sim only: run the compiled probes on this torch device (e.g. cuda), which takes Transformers' "
    "non-CPU code paths; `neuron` is the neuron stand-in (docs/reference/standin.md), which takes its neuron paths. The "
    "eager references stay on CPU.",
)
@click.option(
    "--memory-mb",
    type=click.IntRange(min=64),
    default=6144,
    show_default=True,
    help="Resident memory cap per worker.",
)
@click.option(
    "--shard",
    metavar="I/N",
    callback=_parse_shard,
    help="Run only shard I of N (every N-th architecture of the list, from the I-th); `merge` joins them.",
)
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="local",
    default=None,
    metavar="[ADDRESS]",
    help="Run each architecture as a Ray task: alone, on a new local Ray instance (sized by -j if given); "
    "with ADDRESS (HOST:PORT, or auto), on that cluster. Needs: pip install '.[ray]'.",
)
@click.option(
    "--cores-per-task",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="NeuronCores per architecture on backend neuron (each of the -j local workers, or each Ray task, "
    "gets its own); with --ray on neuron-sim, CPUs per architecture.",
)
@click.pass_context
def run(
    ctx: click.Context,
    archs: str,
    backend: str,
    output: Path,
    resume: bool,
    jobs: int,
    timeout_s: float | None,
    dtype: str,
    config_source: str,
    sim_device: str,
    memory_mb: int,
    shard,
    ray_address: str | None,
    cores_per_task: int,
) -> None:
    """Run every probe for each architecture, one isolated worker each, appending rows to OUTPUT."""
    from compat_matrix.archs import UnknownArchitecture, longest_first, select_architectures
    from compat_matrix.environment import BackendUnavailable, check_sim_device, resolve_backend, run_env
    from compat_matrix.results_file import ResultsFileError, check_writable, not_yet_measured, read_rows

    jobs_given = ctx.get_parameter_source("jobs") is not click.core.ParameterSource.DEFAULT
    sim_device_given = ctx.get_parameter_source("sim_device") is not click.core.ParameterSource.DEFAULT
    try:
        model_types = select_architectures(archs)
        if shard is not None:
            model_types = shard.select(model_types)
        resolved, why = resolve_backend(backend)
        if sim_device_given and resolved != "neuron-sim":
            raise BadInput(
                "--sim-device applies to --backend neuron-sim; on neuron the device is the Neuron one"
            )
        check_sim_device(sim_device)
        check_writable(output)
        existing = read_rows(output)
    except (UnknownArchitecture, BackendUnavailable, ResultsFileError) as error:
        raise BadInput(str(error)) from None
    schedule, scheduler = _scheduler(ray_address, jobs, jobs_given, cores_per_task, resolved)
    if existing and not resume:
        raise BadInput(
            f"{output} already has {len(existing)} row(s); pass --resume to continue it, or choose -o"
        )
    click.echo(why, err=True)
    settings = ProbeSettings(
        backend=resolved,
        dtype=dtype,
        config=config_source,
        sim_device=sim_device,
        timeout_s=timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S[resolved],
        memory_mb=memory_mb,
    )
    env = run_env(settings)
    todo = not_yet_measured(model_types, env, existing)
    if len(todo) < len(model_types):
        click.echo(
            f"--resume: {len(model_types) - len(todo)} architecture(s) already in {output}, skipped", err=True
        )
    on = f" on {sim_device}" if resolved == "neuron-sim" else ""
    click.echo(
        f"{len(todo)} architecture(s), backend {resolved}{on} (simulated: {str(env['simulated']).lower()}), "
        f"{dtype}, {config_source} configs, torch {env['torch']}, transformers {env['transformers']}, "
        f"settings {env['settings_id']}, {scheduler}" + (f", shard {shard}" if shard is not None else ""),
        err=True,
    )
    run_and_record(longest_first(todo), settings, schedule, output, existing)


def _scheduler(ray_address: str | None, jobs: int, jobs_given: bool, cores_per_task: int, backend: str):
    """The local scheduler, or Ray (checked to be importable before any work): (schedule, description)."""
    from compat_matrix.runner import CorePartitionError, neuron_core_count, partition_cores, run_local

    if ray_address is None:
        if backend != "neuron":
            if cores_per_task != 1:
                raise BadInput("--cores-per-task applies to --backend neuron or to Ray tasks (--ray)")
            description = f"-j {jobs}; the worker server starts first (imports, one warm-up probe)"
            return functools.partial(run_local, jobs=jobs), description
        try:
            cores = partition_cores(neuron_core_count(), jobs, cores_per_task)
        except CorePartitionError as error:
            raise BadInput(str(error)) from None
        description = f"-j {jobs}, spawned workers, NEURON_RT_VISIBLE_CORES {', '.join(cores)}"
        return functools.partial(run_local, jobs=jobs, cores_per_task=cores_per_task), description
    from compat_matrix.ray_runner import LOCAL, RaySetupError, check_reachable, import_ray, run_on_ray

    if jobs_given and ray_address != LOCAL:
        raise BadInput(
            f"-j sizes a local Ray instance; the cluster at {ray_address} decides its own parallelism"
        )
    try:
        import_ray()
        if ray_address not in (LOCAL, "auto"):
            check_reachable(ray_address)
    except RaySetupError as error:
        raise BadInput(str(error)) from None
    schedule = functools.partial(
        run_on_ray,
        address=ray_address,
        cores_per_task=cores_per_task,
        local_tasks=jobs if jobs_given else None,
    )
    where = "a new local Ray instance" if ray_address == LOCAL else f"the Ray cluster at {ray_address}"
    return schedule, f"Ray on {where}, {cores_per_task} core(s) per task"


def run_and_record(
    todo: list[str], settings: ProbeSettings, schedule, output: Path, existing: list[dict]
) -> None:
    from tqdm import tqdm

    from compat_matrix.ray_runner import RaySetupError
    from compat_matrix.results_file import append_row, export_csv
    from compat_matrix.schema import OK_VERDICTS

    rows = list(existing)
    failures = 0
    csv_path = output.with_suffix(".csv")
    with tqdm(total=len(todo), unit="arch", dynamic_ncols=True, file=sys.stderr) as progress:

        def record(row: dict) -> None:
            nonlocal failures
            append_row(output, row)
            rows.append(row)
            failures += row["verdict"] not in OK_VERDICTS
            progress.set_postfix_str(f"last {row['model_type']}: {row['verdict']}, not working {failures}")
            progress.update(1)

        try:
            schedule(todo, settings, on_row=record)
        except RaySetupError as error:
            raise BadInput(str(error)) from None
        except KeyboardInterrupt:
            export_csv(rows, csv_path)
            click.echo(f"\ninterrupted: {len(rows)} row(s) kept in {output}; rerun with --resume", err=True)
            sys.exit(130)
    export_csv(rows, csv_path)
    click.echo(summary(rows, output, csv_path))


def summary(rows: list[dict], output: Path, csv_path: Path) -> str:
    from collections import Counter

    from compat_matrix.results_file import VERDICTS, older_schema_note
    from compat_matrix.schema import Verdict

    # A failure's cause is part of its headline: "fails (transformers)" and "fails (device)" ask different people.
    def label(row: dict) -> str:
        blamed = row["verdict"] in (Verdict.FAILS, Verdict.NOT_MEASURED) and row.get("cause")
        return f"{row['verdict']} ({row['cause']})" if blamed else row["verdict"]

    counts = Counter(label(row) for row in rows)
    order = {verdict: index for index, verdict in enumerate(VERDICTS)}
    labels = sorted(counts, key=lambda text: (order.get(text.split(" ")[0], len(order)), text))
    parts = ", ".join(f"{text} {counts[text]}" for text in labels)
    note = older_schema_note(rows)
    return f"{len(rows)} row(s) in {output} (CSV: {csv_path}): {parts or 'none'}" + (
        f"\n{note}" if note else ""
    )


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def standin(command: tuple[str, ...]) -> None:
    """Run COMMAND with the neuron stand-in switched on (the `neuron` device on CPU, docs/reference/standin.md), for it
    and every process it starts, all of which end with it (a PID namespace); its exit code is this one's.
    Without COMMAND, print the shell exports that
    switch it on: eval "$(neuron-compat standin)"."""
    import os
    import shlex
    import shutil

    import standin as neuron_standin
    from try_run.sandbox import IsolationUnavailable, run_in_own_process_tree

    try:
        neuron_standin.check_supported()
    except neuron_standin.StandinUnavailable as error:
        raise BadInput(str(error)) from None
    env = neuron_standin.activation_env()
    if not command:
        for name in sorted(set(env) - set(os.environ) | {n for n in env if env[n] != os.environ.get(n)}):
            click.echo(f"export {name}={shlex.quote(env[name])}")
        if "TORCH_DEVICE_BACKEND_AUTOLOAD" in os.environ:
            click.echo("unset TORCH_DEVICE_BACKEND_AUTOLOAD")
        return
    if shutil.which(command[0]) is None:
        raise BadInput(f"cannot run {command[0]}: not found")
    try:
        sys.exit(run_in_own_process_tree(list(command), env))
    except IsolationUnavailable as error:
        raise BadInput(str(error)) from None


@main.command("tp-readiness")
@click.option(
    "--archs", default="all", show_default=True, help="top100, all, or a comma list of model types."
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the table (default: migrator/tp_readiness.json, the table the migrator and report read).",
)
@click.option(
    "--checkpoints",
    default="recorded",
    show_default=True,
    help="Checkpoints measured at their own sizes too: recorded (compat_matrix/data/checkpoint_sizes.json), "
    "none, or a comma list of recorded Hub ids.",
)
@click.option(
    "--update",
    is_flag=True,
    help="Replace only the rows of the architectures measured in the existing table (same versions).",
)
def tp_readiness(archs: str, checkpoints: str, output: Path | None, update: bool) -> None:
    """Measure, per architecture, the tensor-parallel plan DistributedConfig(tp_size=N) resolves and the degrees
    in 2..64 that shard its full-size model whole (meta device, fake process group; no download)."""
    import json

    from compat_matrix.archs import UnknownArchitecture, select_architectures
    from compat_matrix.tp_readiness import (
        TABLE_PATH,
        StaleTable,
        measure_all,
        recorded_checkpoints,
        updated,
        write_table,
    )

    try:
        model_types = select_architectures(archs)
    except UnknownArchitecture as error:
        raise BadInput(str(error)) from None
    recorded = recorded_checkpoints()
    named = {"recorded": recorded, "none": []}
    wanted = named[checkpoints] if checkpoints in named else [name.strip() for name in checkpoints.split(",")]
    unknown = [name for name in wanted if name not in recorded]
    if unknown:
        raise BadInput(f"not a recorded checkpoint: {', '.join(unknown)} (recorded: {', '.join(recorded)})")
    path = output or TABLE_PATH
    existing = None
    if update:
        try:
            existing = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise BadInput(f"--update needs a table to update at {path}: {error}") from None
    table = measure_all(model_types, lambda line: click.echo(line, err=True), wanted)
    measured_now = table["architectures"]
    if existing is not None:
        try:
            table = updated(table, existing)
        except StaleTable as error:
            raise BadInput(str(error)) from None
    write_table(table, path)
    rows = measured_now.values()
    counts = {plan: sum(row["plan"] == plan for row in rows) for plan in ("full", "lm_head only", "none")}
    unbuilt = sum(row["plan"] is None for row in rows)
    click.echo(
        f"wrote {len(rows)} architecture(s) and {len(wanted)} checkpoint(s) to {path} in {table.get('updated_seconds', table['seconds'])} s: "
        + ", ".join(f"{count} {plan}" for plan, count in counts.items())
        + f", {unbuilt} not buildable on meta"
    )


@main.command()
@click.argument("model")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The model's config.json, for a model id whose sizes are not recorded here.",
)
@click.option("--task", type=click.Choice(planner.TASKS), default="train", show_default=True)
@click.option("--seq-len", type=click.IntRange(min=1), default=planner.DEFAULT_SEQ_LEN, show_default=True)
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=planner.DEFAULT_BATCH,
    show_default=True,
    help="Sequences per rank.",
)
@click.option(
    "--dtype", type=click.Choice(list(planner.DTYPE_BYTES)), default=planner.DEFAULT_DTYPE, show_default=True
)
@click.option(
    "--instance",
    default=planner.DEFAULT_INSTANCE,
    show_default=True,
    help="trn2.3xlarge, trn2.48xlarge, trn3-gen1-server, trn3-gen2-server.",
)
@click.option(
    "--headroom",
    type=click.FloatRange(0, 0.9),
    default=planner.DEFAULT_HEADROOM,
    show_default=True,
    help="Share of each rank's HBM a plan leaves free (runtime, compiler buffers, fragmentation).",
)
def plan(model: str, config_path: Path | None, task: str, seq_len: int, batch: int, dtype: str,
         instance: str, headroom: float) -> None:  # fmt: skip
    """Will MODEL (a Hub id, a model directory or a config.json) fit: parameters, per-rank bytes of weights,
    gradients, optimizer state, activations and KV cache, the smallest tp x fsdp grid that fits the instance,
    and the DistributedConfig and torchrun lines. Sizes are measured on the full-size model without memory;
    nothing downloads."""
    from compat_matrix.meta_model import MetaBuildError
    from compat_matrix.planner import UnknownModel, describe, instances, make_plan, resolve_model, sizes_for

    if instance not in instances():
        raise BadInput(f"unknown instance {instance}: one of {', '.join(instances())}")
    try:
        full_size = resolve_model(model, config_path)
        sizes = sizes_for(full_size, task, batch, seq_len, dtype)
    except (UnknownModel, MetaBuildError) as error:
        raise BadInput(str(error)) from None
    result = make_plan(model, sizes, task, dtype, instances()[instance], headroom)
    for line in describe(result, full_size, dtype, batch, seq_len):
        click.echo(line)
    if result.fits is None:
        sys.exit(1)


@main.command("list")
@click.option(
    "--archs",
    default="all",
    show_default=True,
    help="top100, all, a family (encoders, vision, seq2seq), a task, or a comma list.",
)
def list_architectures(archs: str) -> None:
    """Print the architectures a run would cover, with rank and optimum-neuron 0.4.5 support."""
    from compat_matrix.archs import UnknownArchitecture, ranks, select_architectures, support_of

    try:
        model_types = select_architectures(archs)
    except UnknownArchitecture as error:
        raise BadInput(str(error)) from None
    marks = {True: "yes", False: "no", None: "-"}
    click.echo(f"{'rank':>4}  {'model_type':<40} {'ON-inference':<13} ON-training")
    for name in model_types:
        inference, training = support_of(name)
        rank = ranks().get(name)  # a family's probe names (task/model_type) have no top-100 rank
        click.echo(f"{rank or '':>4}  {name:<40} {marks[inference]:<13} {marks[training]}")
    click.echo(f"{len(model_types)} architecture(s)", err=True)


@main.command()
@click.option(
    "--from-hub", is_flag=True, required=True, help="Recompute the ranking from the Hugging Face Hub."
)
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), default=Path("top100.csv"), show_default=True
)
@click.option("--top", type=click.IntRange(min=1), default=100, show_default=True)
def rank(from_hub: bool, output: Path, top: int) -> None:
    """Rank causal-LM architectures by Hub downloads of text-generation models (needs network)."""
    from compat_matrix.rank import HubUnavailable, rank_from_hub, write_ranking
    from compat_matrix.results_file import ResultsFileError, check_writable

    try:
        check_writable(output)
        ranking = rank_from_hub(top=top, progress=True)
    except (ResultsFileError, HubUnavailable) as error:
        raise BadInput(str(error)) from None
    write_ranking(ranking, output)
    click.echo(f"wrote {len(ranking.rows)} ranked architectures to {output} (snapshot {ranking.snapshot})")


@main.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("compat.html"),
    show_default=True,
    help="Where to write the report.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md", "csv"]),
    default=None,
    help="Output format (default: from the output's suffix, else html).",
)
@click.option(
    "--merge",
    is_flag=True,
    help="Fold results files of the same environment into one run; the report lists the rows it replaced.",
)
def report(results: tuple[Path, ...], output: Path, fmt: str | None, merge: bool) -> None:
    """Write the compatibility report for one or more results files (several are shown side by side,
    one run per file and environment, unless --merge)."""
    from reports.compat_report import infer_format, write_report

    sys.exit(write_report(list(results), output, fmt or infer_format(output), merge=merge))


@main.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Merged results file; may be one of the inputs (it is replaced atomically).",
)
def merge(results: tuple[Path, ...], output: Path) -> None:
    """Combine results files (shards, reruns, hosts) into one. Rows measured under different torch,
    transformers, backend or probe settings stay separate runs; a later row for the same architecture and
    settings replaces an earlier one, and every such replacement with a different outcome is listed."""
    from compat_matrix.merge import MergeError, merge_results, summary_lines, write_rows_atomically
    from compat_matrix.results_file import export_csv

    if output.exists() and output.resolve() not in {path.resolve() for path in results}:
        raise BadInput(
            f"{output} exists and is not one of the inputs: add it as an input, or choose another -o"
        )
    try:
        merged = merge_results(list(results))
    except MergeError as error:
        raise BadInput(str(error)) from None
    for line in summary_lines(merged):
        click.echo(line, err=True)
    write_rows_atomically(output, merged.rows)
    csv_path = output.with_suffix(".csv")
    export_csv(merged.rows, csv_path)
    click.echo(f"wrote {len(merged.rows)} row(s) to {output} (CSV: {csv_path})")
