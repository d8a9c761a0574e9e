"""What one try run measured, from the reports its processes wrote, as JSON and as text."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from try_run.packages import declared
from try_run.plan import MAX_PROCESSES
from usercode.notebook import as_ipython_runs

RAN, FAILED, NOT_RUN = "ran", "failed", "not-run"
UPSTREAM_FAILURES = Path(__file__).with_name("upstream_failures.json")
MESSAGE_CHARACTERS = 500  # of an error's first line; a longer one keeps its start and its end
# Dynamo's guard failure for a size: "tensor 'input_ids' size mismatch at index 1. expected 12, actual 15"
SIZE_MISMATCH = re.compile(r"size mismatch at index (\d+)\. expected (\d+), actual (\d+)")
# The guard's source, the tensor it names: "tensor 'kwargs['cu_seq_lens_q']' size mismatch ..."
GUARD_SOURCE = re.compile(r"tensor '(.+)' size mismatch")
# Padding-free packing's inputs (TRL's padding_free / packing, Transformers' DataCollatorWithFlattening): one
# entry per packed sequence plus one, so their size is the count of sequences in the batch, not a length.
PACKING_INPUTS = re.compile(r"cu_seq_lens|max_length_[qk]")
GUARD_ID = re.compile(r"^\d+/\d+: ")
FOREIGN_MAGIC = (
    "a magic of another Jupyter kernel (IPython has none of that name): the session set-up of the kernel the "
    "notebook was written for (AWS Glue, Spark), not Python"
)


@dataclass
class RunReport:
    command: str
    status: str = NOT_RUN
    reason: str = ""
    error: dict | None = None  # type, message, file, line (the user's frame nearest the raise)
    device: str = ""
    steps: int = 0
    processes: int = 0
    loss_finite: bool | None = None  # None: no loss was computed (an inference run)
    last_loss: float | None = None
    generate_calls: int = 0
    compile_count: int = 0  # graphs Dynamo compiled (a recompile is one more)
    device_graphs: int = 0  # graphs the neuron backend compiled after AOT autograd (forward and backward)
    recompile_count: int = 0
    recompile_reasons: list[dict] = field(default_factory=list)  # reason, file, line, code, count
    # Frames that reached Dynamo's recompile limit and ran eagerly after it: limit_type, limit, function,
    # last_reason, file, cell, line, code (the user's call).
    recompile_limit_hits: list[dict] = field(default_factory=list)
    graph_breaks: list[dict] = field(default_factory=list)  # reason, count
    dynamic_shapes_rejected: int = 0
    unsupported_ops: list[str] = field(default_factory=list)
    cpu_fallback_ops: list[str] = field(default_factory=list)
    models: list[dict] = field(default_factory=list)
    datasets: list[dict] = field(default_factory=list)
    # Set-up commands (pip install, aws s3, activation, ...): command, reason, line/cell, outcome.
    skipped: list[dict] = field(default_factory=list)
    # Hub uploads recorded, never sent (a repository, a commit, a branch): repo_id, what, file, cell, line, code.
    uploads: list[dict] = field(default_factory=list)
    # whoami, login, logout: answered as the stand-in account `name`, never sent: what, name, file, cell, line, code.
    hub_account: list[dict] = field(default_factory=list)
    # Image URLs served with a stand-in picture: url, file, cell, line, code.
    images: list[dict] = field(default_factory=list)
    # torchvision pretrained weights stood in by the architecture's random initialisation: weights, url, file,
    # cell, line, code.
    weights: list[dict] = field(default_factory=list)
    # Downloads pinned to a revision (a tag, a branch, a commit) that a stand-in, which has one, served: repo_id,
    # revision.
    pinned_revisions: list[dict] = field(default_factory=list)
    # Packages the code imported whose compiled operators do not load against this torch (torchvision: a wheel
    # built for another torch), imported without them (the bootstrap's `_after_torchvision_extension`).
    missing_native_ops: list[str] = field(default_factory=list)
    # "isolated" (the sandbox: docs/reference/safety.md), with the mounts it could only make read-only, or "not isolated"
    isolation: str = ""
    # Distributions the project declares, installed for modules its code imports and the environment lacks:
    # module, requirement, declared_in, outcome, distributions (try_run/packages.py).
    installs: list[dict] = field(default_factory=list)
    # The SageMaker training environment set for code that reads it (sagemaker.py): read (the SM_* variables
    # the code reads), channels (name -> what fills it), variables (every variable set, with its value).
    sagemaker: dict = field(default_factory=dict)
    # evaluate metrics the code loads: name, source (metrics.py)
    metrics: list[dict] = field(default_factory=list)
    launcher_capped: list[str] = field(default_factory=list)
    # A Trainer stopped at the try's steps: the full run's last checkpoint folder, linked to the try's last
    # (asked, written), for code after train() that reads it by name.
    checkpoint_links: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    timings: dict = field(default_factory=dict)  # where the seconds went: see docs/using/try.md
    exit_code: int | None = None
    output_tail: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def load_process_reports(folder: Path) -> list[dict]:
    reports = []
    for path in sorted(folder.glob("*.json")):
        try:
            reports.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return reports


def merge_processes(run: RunReport, reports: list[dict], cell_sources: list[str] | None = None) -> None:
    """Fills `run` from its processes' reports: launchers (torchrun itself) only say what they capped."""
    for report in reports:
        run.launcher_capped += [c for c in report.get("launcher_capped", []) if c not in run.launcher_capped]
        run.checkpoint_links += report.get("checkpoint_links", [])
        for index, code in report.get("set_up_exits", {}).items():  # (JSON keys are strings)
            run.skipped[int(index)]["outcome"] = f"ran in the sandbox: exit {code}"
        for magic in report.get("foreign_magics", []):
            run.skipped.append(
                {
                    "command": magic,
                    "reason": FOREIGN_MAGIC,
                    "line": None,
                    "cell": _cell_of_line(magic.split()[0], cell_sources),
                    "outcome": "not run",
                }
            )
        run.missing_native_ops += [
            name for name in report.get("missing_native_ops", []) if name not in run.missing_native_ops
        ]
    served = {dataset["id"] for dataset in run.datasets}
    for report in reports:  # stand-ins written when the code loaded them (each once, by one of the processes)
        run.datasets += [dataset for dataset in report.get("datasets", []) if dataset["id"] not in served]
        served |= {dataset["id"] for dataset in report.get("datasets", [])}
    named = set()
    for report in reports:  # metric stand-ins written when the code loaded them
        run.metrics += [metric for metric in report.get("metrics", []) if metric["name"] not in named]
        named |= {metric["name"] for metric in report.get("metrics", [])}
    workers = [report for report in reports if report.get("role") == "worker" and _did_work(report)]
    if not workers:
        return
    ranks = {report.get("rank") for report in workers}
    run.processes = len(ranks) if None not in ranks else max(1, len(workers))
    lead = min(workers, key=lambda report: (report.get("rank") not in ("0", None), report.get("pid", 0)))
    run.steps = max(report.get("steps", 0) for report in workers)
    if any(report.get("loss_count") for report in workers):
        run.loss_finite = not any(report.get("nonfinite_losses") for report in workers)
        losses = lead.get("losses") or [loss for report in workers for loss in report.get("losses", [])]
        run.last_loss = losses[-1] if losses and math.isfinite(losses[-1]) else None
    run.generate_calls = lead.get("generate_calls", 0)
    run.compile_count = lead.get("unique_graphs", 0)
    run.device_graphs = lead.get("device_graphs", 0)
    run.timings = {
        **lead.get("marks", {}),
        "compile_seconds": lead.get("compile_seconds", 0.0),
        "process_seconds": lead.get("seconds"),
    }
    run.recompile_count = len(lead.get("recompiles", []))
    run.recompile_reasons = _recompile_reasons(lead.get("recompiles", []), cell_sources)
    run.recompile_limit_hits = [
        {
            **{key: value for key, value in hit.items() if key not in ("user", "last_reason")},
            "last_reason": GUARD_ID.sub("", hit["last_reason"]),
            **_cell_location(dict(hit.get("user") or {"file": None}), cell_sources),
        }
        for hit in lead.get("recompile_limit_hits", [])
    ]
    run.graph_breaks = [
        {"reason": reason, "count": count}
        for reason, count in sorted(lead.get("graph_breaks", {}).items(), key=lambda item: -item[1])
    ]
    run.unsupported_ops = sorted({op for report in workers for op in report.get("unsupported_ops", [])})
    run.cpu_fallback_ops = sorted({op for report in workers for op in report.get("cpu_fallback_ops", [])})
    loaded = {model["id"]: model for model in lead.get("models", [])}
    copied = [copy for report in reports for copy in report.get("local_dirs", [])]
    for model in run.models:  # the stand-ins served, whether the run loaded them, where it downloaded them to
        model["loaded"] = model["id"] in loaded
        folders = {copy["dir"] for copy in copied if copy["repo_id"] == model["id"]}
        if folders:
            model["local_dirs"] = sorted(folders)
    served = {model["id"] for model in run.models}
    run.models += [  # what it loaded from local folders, as they are
        {
            "id": model_id,
            "architecture": model.get("model_type"),
            "parameters": model.get("parameters"),
            "vocab_size": model.get("vocab_size"),
            "source": "local",
        }
        for model_id, model in loaded.items()
        if model_id not in served and not _inside_served(model_id, served)
    ]
    errors = sorted(
        (report["error"] for report in workers if report.get("error")), key=lambda e: e.get("time", 0)
    )
    if errors:
        run.error = _error(errors[0], cell_sources)
    run.uploads = _by_line(
        [upload for report in workers for upload in report.get("uploads", [])],
        cell_sources,
        ("repo_id", "repo_type"),
    )
    run.hub_account = _by_line(
        [call for report in workers for call in report.get("hub_account", [])], cell_sources, ("name",)
    )
    run.pinned_revisions = list(
        {
            pinned["repo_id"]: pinned for report in workers for pinned in report.get("pinned_revisions", [])
        }.values()
    )
    run.weights = _located_once(workers, "weights", ("weights", "url"), cell_sources)
    run.images = _located_once(workers, "images", ("url",), cell_sources)
    run.dynamic_shapes_rejected = sum(
        1
        for error in errors
        if any("DynamicShapeRejected" in text for text in [*error.get("chain", []), error.get("message", "")])
    )


def _located_once(
    workers: list[dict], name: str, fields: tuple[str, ...], cell_sources: list[str] | None
) -> list[dict]:
    """The `name` entries the processes recorded, once per value of the first of `fields`, with those fields and
    the user's line (a notebook's cell)."""
    return list(
        {
            entry[fields[0]]: {
                **{field: entry[field] for field in fields},
                **_cell_location(dict(entry.get("user") or {}), cell_sources),
            }
            for report in workers
            for entry in report.get(name, [])
        }.values()
    )


def _cell_of_line(start: str, cell_sources: list[str] | None) -> int | None:
    """The first code cell with a line that starts with the word `start` (a magic's name)."""
    for number, cell in enumerate(cell_sources or [], start=1):
        if any(line.strip().split(maxsplit=1)[:1] == [start] for line in cell.splitlines()):
            return number
    return None


def _did_work(report: dict) -> bool:
    return bool(
        report.get("steps")
        or report.get("models")
        or report.get("error")
        or report.get("generate_calls")
        or report.get("unique_graphs")
        or report.get("loss_count")
        or report.get("uploads")
        or report.get("images")
        or report.get("weights")
        or report.get("hub_account")
        or report.get("local_dirs")
        or report.get("device_peak_bytes")
    )


def _cell_location(location: dict, cell_sources: list[str] | None) -> dict:
    """A kernel's cell file -> the notebook's code-cell number (matched by the cell's source)."""
    source = location.pop("cell_source", None)
    if source is not None and cell_sources is not None:
        for number, cell in enumerate(cell_sources, start=1):
            # the cell as written, or as IPython ran it (its `%magic` and `!cmd` lines as calls)
            ran = source.strip()
            if cell.strip() and (cell.strip() == ran or as_ipython_runs(cell).strip() == ran):
                location["cell"] = number
                location["file"] = "notebook"
                break
    return location


def _by_line(recorded: list[dict], cell_sources: list[str] | None, fields: tuple[str, ...]) -> list[dict]:
    """Hub calls recorded, one entry per value of `fields` (the repository; the account) and line of the
    user's code, with the list of what was asked there (push_to_hub: its repository, then its commit)."""
    grouped: dict[tuple, dict] = {}
    for call in recorded:
        user = _cell_location(dict(call.get("user") or {}), cell_sources)
        location = {name: user.get(name) for name in ("file", "cell", "line")}
        key = (*(call[name] for name in fields), *location.values())
        entry = grouped.setdefault(
            key,
            {**{name: call[name] for name in fields}, "what": [], **location, "code": user.get("code", "")},
        )
        entry["what"].append(call["what"])
    return list(grouped.values())


def _recompile_reasons(recompiles: list[dict], cell_sources: list[str] | None) -> list[dict]:
    """One entry per place in the user's code and kind of guard failure, with how often it recompiled."""
    grouped: dict[tuple, dict] = {}
    for recompile in recompiles:
        user = _cell_location(dict(recompile.get("user") or {}), cell_sources)
        reasons = recompile.get("reasons") or ["guard failure"]
        first = GUARD_ID.sub("", reasons[0])
        match = SIZE_MISMATCH.search(first)
        kind = SIZE_MISMATCH.sub(r"size mismatch at index \1", first)
        key = (user.get("file"), user.get("cell"), user.get("line"), kind)
        entry = grouped.get(key)
        if entry is None:
            entry = grouped[key] = {
                "reason": first,
                "explanation": "",
                "function": recompile.get("function", ""),
                "file": user.get("file"),
                "cell": user.get("cell"),
                "line": user.get("line"),
                "code": user.get("code", ""),
                "count": 0,
                "sizes": [int(match.group(2))] if match else [],
            }
        entry["count"] += 1
        if match:
            entry["sizes"].append(int(match.group(3)))
            source = GUARD_SOURCE.search(first)
            entry["explanation"] = _size_change_explanation(
                source.group(1) if source else "", match, entry["sizes"]
            )
    return list(grouped.values())


def _size_change_explanation(source: str, match: re.Match, sizes: list[int]) -> str:
    """Why the size of the guarded tensor changed, read from the guard's source (the tensor's name)."""
    change = (
        f"new size of {source or 'an input'} at dimension {match.group(1)} ({' -> '.join(map(str, sizes))})"
    )
    if PACKING_INPUTS.search(source):
        return (
            f"{change}: the cumulative sequence lengths of padding-free packing (TRL's padding_free or packing, "
            "DataCollatorWithFlattening) have one entry per sequence packed into the batch, a count that changes "
            "from batch to batch and compiles a new graph on the device each time; for one shape, pack into "
            'fixed-length rows without padding-free (TRL: packing_strategy="wrapped", padding_free=False; its '
            '"bfd" strategies always pack padding-free) or train unpacked, padded to a fixed length'
        )
    return (
        f"{change}: an input whose length changes from call to call (padding to the longest sequence of each "
        "batch) compiles a new graph on the device each time; pad to a fixed length"
    )


def _shortened(message: str) -> str:
    """The first line of a message, its start and its end kept where it is long (the end often names the cause:
    "... got types: [Parameter, ..., DeviceMesh, Tensor]")."""
    line = message.strip().splitlines()[0] if message.strip() else ""
    if len(line) <= MESSAGE_CHARACTERS:
        return line
    half = MESSAGE_CHARACTERS // 2
    return f"{line[:half]} ... {line[-half:]}"


def upstream_failure(message: str) -> dict | None:
    """The known PyTorch / Transformers failure (reproduced on plain CPU) whose strings the message holds."""
    failures = json.loads(UPSTREAM_FAILURES.read_text())["failures"]
    return next((entry for entry in failures if all(text in message for text in entry["match"])), None)


def _error(error: dict, cell_sources: list[str] | None) -> dict:
    user = _cell_location(dict(error.get("user") or {}), cell_sources)
    return {
        "type": error.get("type"),
        "module": error.get("module"),
        "library": installed_package((error.get("raised_at") or {}).get("file")),
        "message": _shortened(error.get("message") or ""),
        "upstream": upstream_failure(error.get("message") or ""),
        "file": user.get("file"),
        "cell": user.get("cell"),
        "line": user.get("line"),
        "code": user.get("code", ""),
    }


def installed_package(path: str | None) -> str | None:
    """The installed package a frame's file belongs to (`botocore` of .../site-packages/botocore/auth.py)."""
    parts = Path(path).parts if path else ()
    folders = [index for index, part in enumerate(parts) if part in ("site-packages", "dist-packages")]
    if not folders or folders[-1] + 1 >= len(parts):
        return None
    return parts[folders[-1] + 1].removesuffix(".py")


def where(entry: dict) -> str:
    if entry.get("file") is None:
        return "(no frame of your code)"
    if entry.get("cell") is not None:
        return f"cell {entry['cell']}:{entry.get('line')}"
    return f"{entry['file']}:{entry.get('line')}"


def _inside_served(path: str, served: set[str]) -> bool:
    """A component a served pipeline loads from its own folder (text_encoder/...) is part of that stand-in."""
    return any(f"models--{model_id.replace('/', '--')}/" in path for model_id in served)


def text_lines(runs: list[RunReport]) -> list[str]:
    lines = []
    for run in runs:
        head = f"{run.status.upper():8} {run.command}"
        lines.append(head + (" (not isolated)" if run.isolation == "not isolated" else ""))
        if run.reason:
            lines.append(f"         {run.reason}")
        if run.status != NOT_RUN:
            loss = (
                ""
                if run.loss_finite is None
                else (
                    f", loss {run.last_loss:.4g}"
                    if run.loss_finite and run.last_loss is not None
                    else ", loss NOT finite"
                    if run.loss_finite is False
                    else ""
                )
            )
            lines.append(
                f"         {run.steps} step(s), {run.processes} process(es){loss}, {run.compile_count} graph(s) compiled "
                f"({run.device_graphs} for the device), "
                f"{run.recompile_count} recompile(s), {len(run.graph_breaks)} graph break(s), {run.seconds:.1f} s on {run.device}"
            )
        for entry in run.recompile_reasons:
            lines.append(
                f"         recompile x{entry['count']} at {where(entry)}: {entry['explanation'] or entry['reason']}"
            )
            if entry.get("code"):
                lines.append(f"             {entry['code']}")
        for hit in run.recompile_limit_hits:
            lines.append(
                f"         Dynamo's {hit['limit_type']} ({hit['limit']}) reached at {where(hit)}: {hit['function']} "
                f"ran eagerly from then on, uncompiled (as it would on the device); last guard failure: "
                f"{hit['last_reason']}"
            )
            if hit.get("code"):
                lines.append(f"             {hit['code']}")
        for entry in run.graph_breaks:
            lines.append(f"         graph break x{entry['count']}: {entry['reason'].splitlines()[0][:200]}")
        for name, values in (
            ("unsupported on the device", run.unsupported_ops),
            ("run on CPU by TorchNeuron", run.cpu_fallback_ops),
        ):
            if values:
                lines.append(f"         {name}: {', '.join(values)}")
        if run.dynamic_shapes_rejected:
            lines.append(f"         dynamic shapes rejected: {run.dynamic_shapes_rejected}")
        for model in run.models:
            lines.append(
                f"         model {model['id']}: tiny {model.get('architecture')} ({model.get('parameters')} parameters, {model.get('source')})"
            )
            if model.get("real_size_plan"):
                lines.append(f"           real size: {model['real_size_plan']}")
            if model.get("parts"):
                lines.append(f"           with {', '.join(model['parts'])}")
            if model.get("kept"):
                kept = ", ".join(f"{name} {value}" for name, value in model["kept"].items())
                lines.append(f"           keeps {model['kept_from']}'s {kept}")
            for folder in model.get("local_dirs", []):
                lines.append(
                    f"           copied into {folder} (snapshot_download / hf_hub_download local_dir)"
                )
        lines.extend(_served_lines(run))
    return lines


def _served_lines(run: RunReport) -> list[str]:
    """What the try served or held back for the run: data, caps, metrics, installs, uploads, images, set-up."""
    lines = []
    if run.sagemaker:
        variables = run.sagemaker["variables"]
        read = [f"{name}={variables[name]}" for name in run.sagemaker["read"] if name in variables]
        lines.append(
            f"         SageMaker training environment ({len(variables)} variables set, as SageMaker's training toolkit sets them"
            f" for one host; the code reads {', '.join(read) or 'none that is set'})"
        )
        for name, what in run.sagemaker["channels"].items():
            lines.append(f"           channel {name}: {what}")
    for dataset in run.datasets:
        served = f", {dataset['served']}" if dataset.get("served") else ""
        lines.append(
            f"         dataset {dataset['id']}: {', '.join(dataset['columns'])} ({dataset['source']}{served})"
        )
    for capped in run.launcher_capped:
        lines.append(f"         capped (a try runs at most {MAX_PROCESSES} processes): {capped}")
    for link in run.checkpoint_links:
        lines.append(
            f"         checkpoint {link['asked']} (the full run's last): a link to {link['written']}, the try's last"
        )
    for metric in run.metrics:
        served = f", {metric['served']}" if metric.get("served") else ""
        lines.append(f"         metric {metric['name']}: {metric['source']}{served}")
    for install in run.installs:
        added = f" ({', '.join(install['distributions'])})" if install["distributions"] else ""
        lines.append(
            f"         install for `{install['needed_by']}`: {install['requirement']}{added}, "
            f"{declared(install['declared_in'])}: {install['outcome']}"
        )
    for upload in run.uploads:
        kind = "" if upload["repo_type"] == "model" else f"{upload['repo_type']} "
        lines.append(
            f"         Hub write not performed at {where(upload)}: {kind}{upload['repo_id']}: "
            f"{'; '.join(upload['what'])}; recorded, never sent (a try does not reach the Hub)"
        )
    for call in run.hub_account:
        lines.append(
            f"         Hub account at {where(call)}: {'; '.join(dict.fromkeys(call['what']))}: answered as the "
            f"stand-in user {call['name']!r}; no token is sent or stored (a try has no credentials)"
        )
    for image in run.images:
        lines.append(
            f"         image {image['url']} at {where(image)}: a 640 x 480 stand-in picture (a try has no network)"
        )
    for pinned in run.pinned_revisions:
        lines.append(
            f"         revision {pinned['revision']} of {pinned['repo_id']}: the stand-in's files (a stand-in has one "
            "revision)"
        )
    for entry in run.weights:
        lines.append(
            f"         weights {entry['weights']} at {where(entry)}: the architecture's random initialisation "
            "(its download from download.pytorch.org: a try has no network)"
        )
    for package in run.missing_native_ops:
        lines.append(
            f"         {package} imported without its compiled operators, which do not load against this torch "
            f"(its wheel was built for another one): its Python parts ran; a call to one of them fails"
        )
    for skipped in run.skipped:
        at = f" (line {skipped['line']})" if skipped.get("line") else ""
        at = f" (cell {skipped['cell']})" if skipped.get("cell") else at
        lines.append(f"         set-up{at}: {skipped['command']}: {skipped['reason']}; {skipped['outcome']}")
    return lines


def summary(runs: list[RunReport]) -> str:
    counts = {status: sum(run.status == status for run in runs) for status in (RAN, FAILED, NOT_RUN)}
    return f"neuron-migrate try: {counts[RAN]} ran, {counts[FAILED]} failed, {counts[NOT_RUN]} not run"
