"""`neuron-migrate bench`'s engine: run a script at its real size, with the user's own models, data and
environment, on the device this host has, and measure compile time, steady-state step time, throughput,
generation latency, peak memory and cost.

It shares `try`'s launch handling (scripts, shell launchers, notebooks: `runner`'s plan) and bootstrap, which
in bench mode times each optimizer step and generate() call with the device synchronized at its end
(`bootstrap/sitecustomize.py`, `_Bench`). Unlike a try, nothing is stood in or copied: the run works in the
user's folder, online as the user's shell is, and only its step or request count is capped.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from try_run import plan, runner, scan
from try_run.device import DeviceUnavailable, device_environment, host_device
from try_run.report import RunReport, load_process_reports, merge_processes, where
from try_run.runner import TryUsageError

PRICES = Path(__file__).with_name("instance_prices.json")
MEASURED, NOT_MEASURED = "measured", "not-measured"


@dataclass
class BenchOptions:
    warmup: int = 2
    steps: int = 10
    requests: int = 5
    timeout_s: float = 1800.0
    standin: bool = False  # the stand-in neuron device on CPU, for tests of the tool itself
    python: str = sys.executable  # the interpreter that runs the user's code (--python)
    price_per_hour: float | None = None
    instance: str | None = None  # a row of instance_prices.json
    show_output: bool = True
    echo: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)


@dataclass
class BenchResult:
    command: str
    status: str = NOT_MEASURED
    reason: str = ""
    device: str = ""
    environment: dict = field(default_factory=dict)  # torch, torch_neuronx, Neuron variables
    layout: dict = field(
        default_factory=dict
    )  # what a comparison must match: dtype, batch, sequence, processes
    compile: dict = field(default_factory=dict)  # first step, Dynamo's compile seconds, each recompile
    steps: dict = field(default_factory=dict)  # steady-state step time and throughput
    generation: list[dict] = field(default_factory=list)  # per batch size: first token, per-token latency
    peak_memory: dict = field(default_factory=dict)
    cost: dict = field(default_factory=dict)
    overhead_fraction: float | None = None  # the tool's own hooks over the timed seconds
    seconds: float = 0.0
    exit_code: int | None = None
    output_tail: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def prices() -> dict:
    return json.loads(PRICES.read_text(encoding="utf-8"))


def price_per_hour(options: BenchOptions) -> tuple[float | None, str]:
    if options.price_per_hour is not None:
        return options.price_per_hour, "--price-per-hour"
    if options.instance is None:
        return None, ""
    table = prices()
    row = table["instances"].get(options.instance)
    if row is None:
        known = ", ".join(sorted(table["instances"]))
        raise TryUsageError(
            f"--instance {options.instance}: not in the price table ({known}); pass --price-per-hour"
        )
    return row["usd_per_hour"], f"{options.instance} on-demand, {row['source']} ({row['date']})"


def bench_path(
    path: Path, arguments: list[str], options: BenchOptions, label: str | None = None
) -> BenchResult:
    """Measures the first launch of `path` (a script, launcher or notebook); raises TryUsageError for input
    that cannot be run at all."""
    if not path.is_file():
        raise TryUsageError(f"{path}: no such file")
    kind = runner.file_kind(path)
    price = price_per_hour(options)
    env = dict(os.environ)
    try:
        if options.standin:
            env, device = device_environment(env, options.python)
        else:
            device = host_device(options.python)
    except DeviceUnavailable as error:
        raise TryUsageError(str(error)) from error
    if kind == "script" and (problem := runner._syntax_error(path)):
        return BenchResult(label or f"python {path.name}", NOT_MEASURED, problem, device=device)
    work = Path(tempfile.mkdtemp(prefix="neuron-migrate-bench-"))
    try:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(runner.BOOTSTRAP), env.get("PYTHONPATH", "")]))
        env["PYTHONUNBUFFERED"] = "1"
        try:
            the_plan, cells = _plan(kind, path, arguments, env, work, options)
        except plan.PlanError as error:
            raise TryUsageError(str(error)) from error
        launch = the_plan.launches[0]
        if len(the_plan.launches) > 1:
            options.echo(f"neuron-migrate bench: {len(the_plan.launches)} launches; measuring the first")
        return _measure(launch, label or launch.label, cells, path, env, device, price, work, options)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _plan(
    kind: str, path: Path, arguments: list[str], env: dict[str, str], work: Path, options: BenchOptions
):
    """try's plans, not isolated: a launcher's set-up commands are listed, not run (the user has run them)."""
    python = options.python
    if kind == "script":
        facts = scan.read_python(path.read_text(encoding="utf-8", errors="replace"), arguments)
        return plan.plan_script(path, arguments, facts.multi_process, python), None
    if kind == "launcher":

        def set_up(argv, cwd, env, place):
            done = subprocess.run(
                argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=options.timeout_s
            )
            return done.returncode, done.stderr

        return plan.plan_launcher(path, arguments, env, work / "record", set_up, False, python), None
    if arguments:
        raise plan.PlanError(f"{path}: a notebook takes no arguments")
    return plan.plan_notebook(path, False, python)


def bench_command(command: str, options: BenchOptions) -> BenchResult:
    """Measures a command line (`--baseline "CMD"`) as a one-line launcher run in the current folder."""
    import shlex

    folder = Path(tempfile.mkdtemp(prefix="neuron-migrate-baseline-"))
    try:
        launcher = folder / "baseline.sh"
        launcher.write_text(f"cd {shlex.quote(os.getcwd())}\n{command}\n", encoding="utf-8")
        return bench_path(launcher, [], options, label=command)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _measure(launch, label, cells, path, env, device, price, work, options) -> BenchResult:
    reports = work / "reports"
    reports.mkdir()
    config = {
        "report_dir": str(reports),
        "steps": options.warmup + options.steps,
        "bench": {"requests": options.warmup + options.requests},
        "output_dir": str(work / "trainer_output"),  # a Trainer's checkpoints: not over the user's
        "roots": {os.path.realpath(launch.cwd): str(launch.cwd)},
        "notebook": cells is not None,
    }
    argv = launch.argv
    if cells is not None:
        cells_file = work / "cells.json"
        cells_file.write_text(json.dumps(cells), encoding="utf-8")
        argv = [*argv, str(cells_file)]
    child_env = {**launch.environment(env), "NEURON_MIGRATE_TRY": json.dumps(config)}
    run_options = runner.TryOptions(
        timeout_s=options.timeout_s, show_output=options.show_output, echo=options.echo
    )
    started = time.monotonic()
    exit_code, tail, timed_out = runner._execute(argv, launch.cwd, child_env, run_options)
    result = BenchResult(label, device=device, exit_code=exit_code, output_tail="\n".join(tail))
    result.seconds = round(time.monotonic() - started, 2)
    processes = load_process_reports(reports)
    summary = RunReport(label)  # what try's merge reads: steps reached, the error at the user's line
    merge_processes(summary, processes, cells)
    # the processes that stepped or generated (not a launcher, nor a notebook's kernel runner)
    workers = [
        report
        for report in processes
        if report.get("role") == "worker"
        and ((report.get("bench") or {}).get("step_ends") or (report.get("bench") or {}).get("requests"))
    ]
    result.environment = _environment(env)
    if workers:
        lead = min(workers, key=lambda report: (report.get("rank") not in ("0", None), report.get("pid", 0)))
        analyse(result, lead, len(workers), options, price)
    if result.status != MEASURED:
        result.reason = _why_not(timed_out, exit_code, tail, summary, options)
    return result


def _environment(env: dict[str, str]) -> dict:
    import torch

    from compat_matrix.environment import neuron_environment

    facts = {"torch": torch.__version__, "neuron_environment": neuron_environment()}
    if env.get("NEURON_STANDIN") == "1":
        facts["torch_neuronx"] = "stand-in"
    else:
        try:
            from importlib.metadata import version

            facts["torch_neuronx"] = version("torch-neuronx")
        except Exception:  # not installed: not a Neuron host
            facts["torch_neuronx"] = None
    return facts


def _why_not(timed_out: bool, exit_code, tail: list[str], summary, options: BenchOptions) -> str:
    reached = ""
    if summary is not None:
        reached = (
            f" (it reached {summary.steps} optimizer step(s) and {summary.generate_calls} generate call(s))"
        )
    if timed_out:
        return f"not measured: no steady-state step or request within the --timeout of {options.timeout_s:g} s{reached}"
    if summary is not None and summary.error:
        error = summary.error
        return f"not measured: {error['type']}: {error['message']} at {where(error)}{reached}"
    if exit_code:
        last = next((line.strip() for line in reversed(tail) if line.strip()), "")
        return f"not measured: exit code {exit_code}: {last[:300]}{reached}"
    return (
        "not measured: the script ended before a measured optimizer step or generate() call "
        f"(--warmup {options.warmup} excludes the first ones){reached}"
    )


def _percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (no interpolation between the steps that were timed)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))]


def analyse(result: BenchResult, lead: dict, processes: int, options: BenchOptions, price) -> None:
    """Fills `result` from the lead process's bench record."""
    bench = lead["bench"]
    ends = bench["step_ends"]
    durations = [later - earlier for earlier, later in itertools.pairwise(ends)]
    first = ends[0] - bench["first_batch"] if ends and bench.get("first_batch") is not None else None
    recompiled_in = {recompile.get("step") for recompile in lead.get("recompiles", [])}
    # Step n (1-based) lasted durations[n - 2]; the steady state leaves out warm-up and the steps that recompiled.
    steady = {
        n: durations[n - 2]
        for n in range(max(2, options.warmup + 1), len(ends) + 1)
        if n not in recompiled_in
    }
    median = statistics.median(steady.values()) if steady else None
    step_seconds = {1: first, **{n: durations[n - 2] for n in range(2, len(ends) + 1)}}
    result.compile = {
        "first_step_seconds": _round(first),
        "dynamo_compile_seconds": lead.get("compile_seconds"),
        "graphs": lead.get("unique_graphs"),
        "device_graphs": lead.get("device_graphs"),
        "device_compile": bench.get("device_compile", []),
        "recompiles": [
            {
                "step": recompile.get("step"),
                "request": recompile.get("request"),
                "in": f"step {recompile.get('step')}" if ends else f"request {recompile.get('request')}",
                "step_seconds": _round(step_seconds.get(recompile.get("step"))),
                "over_median_seconds": _round(
                    step_seconds[recompile["step"]] - median
                    if median is not None and step_seconds.get(recompile.get("step")) is not None
                    else None
                ),
                "reason": (recompile.get("reasons") or ["guard failure"])[0],
                "where": where(recompile.get("user") or {}),
                "code": (recompile.get("user") or {}).get("code", ""),
            }
            for recompile in lead.get("recompiles", [])
        ],
    }
    batches = [batch for batch in bench["batches"] if batch["step"] in steady]
    models = lead.get("models", [])
    result.layout = {
        "processes": processes,
        "dtype": sorted({model["dtype"] for model in models if model.get("dtype")}),
        "batch": sorted({batch["samples"] for batch in bench["batches"] if batch.get("samples")}),
        "sequence": sorted(
            {batch["tokens"] // batch["samples"] for batch in bench["batches"] if batch.get("tokens")}
        ),
    }
    tokens_per_s = None
    if steady:
        seconds = sum(steady.values())
        samples = sum(batch.get("samples") or 0 for batch in batches)
        tokens = sum(batch.get("tokens") or 0 for batch in batches)
        real = sum(batch.get("real_tokens") or 0 for batch in batches)
        tokens_per_s = real / seconds if real else None
        result.steps = {
            "measured": len(steady),
            "warmup": options.warmup,
            "left_out_recompiling": sorted(n for n in recompiled_in if n and n > options.warmup),
            "seconds_by_step": {n: _round(seconds) for n, seconds in steady.items()},
            "median_seconds": _round(median),
            "p90_seconds": _round(_percentile(list(steady.values()), 0.9)),
            "samples_per_s": _round(samples / seconds) if samples else None,
            "tokens_per_s": _round(tokens_per_s),
            "padding_tokens_per_s": _round((tokens - real) / seconds) if tokens else None,
        }
    recompiled_requests = {recompile.get("request") for recompile in lead.get("recompiles", [])}
    measured_requests = [
        request
        for number, request in enumerate(bench["requests"], start=1)
        if number > options.warmup and number not in recompiled_requests
    ]
    if measured_requests:
        result.generation = _generation(measured_requests)
        produced = sum(r.get("batch", 0) * (r.get("new_tokens") or 0) for r in measured_requests)
        seconds = sum(r["seconds"] for r in measured_requests)
        tokens_per_s = tokens_per_s or (produced / seconds if produced else None)
    result.status = MEASURED if steady or measured_requests else NOT_MEASURED
    result.peak_memory = bench.get("peak_memory", {})
    start = bench.get("first_batch") or (ends[0] if ends else None)  # no DataLoader: the first step's end
    timed = (ends[-1] - start if ends else 0) + sum(request["seconds"] for request in bench["requests"])
    result.overhead_fraction = _round(bench["overhead_seconds"] / timed, 6) if timed else None
    per_hour, source = price
    if per_hour is not None and tokens_per_s:
        result.cost = {
            "usd_per_hour": per_hour,
            "price_source": source,
            "usd_per_million_tokens": _round(per_hour / 3600 / tokens_per_s * 1e6),
            "tokens": "generated tokens" if not steady else "non-padding tokens trained on",
        }


def _generation(requests: list[dict]) -> list[dict]:
    by_batch: dict[int, list[dict]] = {}
    for request in requests:
        by_batch.setdefault(request.get("batch", 0), []).append(request)
    rows = []
    for batch, group in sorted(by_batch.items()):
        first = [r["first_token_seconds"] for r in group if r.get("first_token_seconds") is not None]
        per_token = [
            (r["seconds"] - r["first_token_seconds"]) / (r["new_tokens"] - 1)
            for r in group
            if r.get("first_token_seconds") is not None and (r.get("new_tokens") or 0) > 1
        ]
        produced = sum(batch * (r.get("new_tokens") or 0) for r in group)
        rows.append(
            {
                "batch": batch,
                "requests": len(group),
                "prompt_tokens": sorted({r.get("prompt_tokens") for r in group if r.get("prompt_tokens")}),
                "first_token_median_seconds": _round(statistics.median(first)) if first else None,
                "per_token_median_seconds": _round(statistics.median(per_token)) if per_token else None,
                "request_median_seconds": _round(statistics.median(r["seconds"] for r in group)),
                "tokens_per_s": _round(produced / sum(r["seconds"] for r in group)) if produced else None,
            }
        )
    return rows


def _round(value, digits: int = 6):
    return None if value is None else round(value, digits)


def text_lines(result: BenchResult) -> list[str]:
    lines = [f"{result.command}: {result.status} on {result.device} ({result.seconds:g} s)"]
    if result.status != MEASURED:
        return [*lines, f"  {result.reason}"]
    compile_ = result.compile
    lines.append(
        f"  compile: first step {_seconds(compile_['first_step_seconds'])}, "
        f"Dynamo compile {compile_['dynamo_compile_seconds']} s, {len(compile_['recompiles'])} recompile(s)"
    )
    for recompile in compile_["recompiles"]:
        lines.append(
            f"    {recompile['in']}: {_seconds(recompile['step_seconds'])} at {recompile['where']}: "
            f"{recompile['reason']}"
        )
    steps = result.steps
    if steps:
        lines.append(
            f"  steady state ({steps['measured']} steps after {steps['warmup']} warm-up): "
            f"median {_seconds(steps['median_seconds'])}, p90 {_seconds(steps['p90_seconds'])}"
        )
        lines.append(
            f"  throughput: {steps['samples_per_s'] or '-'} samples/s, {steps['tokens_per_s'] or '-'} tokens/s "
            f"(+{steps['padding_tokens_per_s'] or 0} padding tokens/s)"
        )
    for row in result.generation:
        lines.append(
            f"  generation, batch {row['batch']} ({row['requests']} requests): first token "
            f"{_seconds(row['first_token_median_seconds'])}, per token {_seconds(row['per_token_median_seconds'])}, "
            f"{row['tokens_per_s'] or '-'} tokens/s"
        )
    memory = result.peak_memory
    if memory:
        lines.append(f"  peak memory: {memory['bytes'] / 2**20:.1f} MiB ({memory['of']})")
    if result.cost:
        cost = result.cost
        lines.append(
            f"  cost: ${cost['usd_per_million_tokens']:.4f} per million {cost['tokens']} "
            f"at ${cost['usd_per_hour']}/h ({cost['price_source']})"
        )
    if result.overhead_fraction is not None:
        lines.append(f"  bench's own hooks: {result.overhead_fraction:.3%} of the timed seconds")
    return lines


def _seconds(value) -> str:
    return "-" if value is None else f"{value * 1000:.2f} ms"
