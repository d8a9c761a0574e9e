"""`neuron-migrate checklist`: what migrating the given scripts to TorchNeuron involves, as a task list.

It combines the migrator's findings (what it rewrites, what it leaves to a person), a scan of the files
(models, target instances, compile risks) and the compatibility results of the models' architectures.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from migrator.sources import UsageError
from reports.advice import STAGE_MEANINGS, advice
from reports.model_ids import UNKNOWN, Architecture, local_config, read_model_type, resolve
from reports.render import asset, fail, render, write_output
from reports.results import REFERENCE_RESULTS, ResultsError, Run, display_path, load_runs
from reports.scan import FileScan, Location, Risk, find_configs, scan_file

SEVERITIES = ("blocking", "manual", "compile-risk", "check")
SEVERITY_LABELS = {
    "blocking": "blocking",
    "manual": "manual change",
    "compile-risk": "compile risk",
    "check": "check",
}
KINDS = {".py": "python", ".ipynb": "notebook", ".sh": "shell", ".bash": "shell"}
FAMILIES = ("inference", "training", "xla", "environment", "shell", "manual")

# What the migrated code needs (TorchNeuron public beta; see docs and the migration map's platform table).
PLATFORM = "trn2 or trn3 instances: TorchNeuron does not run on inf1, inf2 or trn1"
REQUIREMENTS = (
    ("always", "Neuron SDK", "2.33 or later (TorchNeuron public beta)"),
    ("always", "PyTorch", "torch 2.14 with torch-neuronx 2.14.x, Python 3.10 to 3.14"),
    ("always", "Transformers", ">= 5.23 (device_map='neuron', static-cache generation compiled for neuron)"),
    ("trl", "TRL", ">= 1.16 (pads batches to a multiple of 128 on neuron)"),
    ("peft", "PEFT", ">= 0.21"),
)
REMOVALS = {
    "optimum-neuron": "optimum-neuron (replaced by plain Transformers, TRL and PEFT)",
    "torch_xla": "torch-xla (with it installed, Transformers still takes the XLA code paths)",
}


@dataclass
class Item:
    severity: str
    title: str
    action: str
    location: str = ""
    sort_line: int = 0

    @property
    def key(self) -> tuple:
        return (SEVERITIES.index(self.severity), self.sort_line, self.title)


@dataclass
class FileSection:
    display: str
    kind: str
    rewrites: dict[str, int]
    items: list[Item] = field(default_factory=list)


@dataclass
class ModelRow:
    reference: str
    locations: list[str]  # where the files name it, and how (argparse default, shell argument, ...)
    architecture: Architecture
    result: dict | None = None


def _location(display: str, line: int | None, cell: int | None) -> str:
    return str(Location(display, line or 1, cell))


def _migrator_items(file: dict, display: str) -> list[Item]:
    items = []
    if file.get("error"):
        items.append(
            Item(
                "blocking",
                f"neuron-migrate cannot process this file: {file['error']}",
                "Fix the file so that it parses (or exclude it), then run the checklist again.",
                display,
            )
        )
    for finding in file.get("findings", []):
        if finding.get("fixed"):
            continue
        severity = {"error": "blocking", "warning": "manual"}.get(finding.get("severity"), "check")
        items.append(
            Item(
                severity,
                f"{finding.get('code', '')}: {finding.get('why') or finding.get('message', '')}".strip(": "),
                finding.get("action") or "See the migrator's rule reference for this code.",
                _location(display, finding.get("line"), finding.get("cell")),
                finding.get("line") or 0,
            )
        )
    return items


def _target_items(scan: FileScan) -> list[Item]:
    by_target: dict[str, list[Location]] = {}
    for target, location in scan.targets:
        by_target.setdefault(target, []).append(location)
    return [
        Item(
            "blocking",
            f"Targets {target}: TorchNeuron runs on trn2 and trn3 only",
            "Move this workload to trn2 or trn3 instances. On inf2/trn1, keep the optimum-neuron / "
            "PyTorch-XLA stack instead of migrating (XLA inference is still supported; XLA training "
            "ended with Neuron 2.29).",
            ", ".join(str(location) for location in locations),
            locations[0].line,
        )
        for target, locations in by_target.items()
    ]


def _handled_by_migrator(risk: Risk, fixed: list[dict]) -> str | None:
    """The migrator's own message when one of its rewrites already removes this risk: a fixed finding
    with a code the risk's rule names (`CODE`, or `CODE:subject` for a finding about that subject)."""
    for finding in fixed:
        for fix in risk.rule.fixed_by:
            code, _, subject = fix.partition(":")
            if finding.get("code") == code and (not subject or finding.get("subject") == subject):
                return str(finding.get("message", ""))
    return None


def _risk_items(scan: FileScan, fixed: list[dict]) -> list[Item]:
    items = []
    for risk in scan.risks:
        severity, action = "compile-risk", risk.rule.action
        handled = _handled_by_migrator(risk, fixed)
        if handled:
            severity, action = "check", f"neuron-migrate rewrites this; check the result. It says: {handled}"
        items.append(
            Item(
                severity,
                f"{risk.rule.code}: {risk.rule.title} ({risk.detail})",
                action,
                str(risk.location),
                risk.location.line,
            )
        )
    return items


def _result_item(row: ModelRow, run: Run | None) -> Item | None:
    model_type = row.architecture.model_type
    where = ", ".join(row.locations)
    subject = f"`{row.reference}` ({model_type})"
    if model_type == UNKNOWN:
        return Item(
            "check",
            f"Architecture of `{row.reference}` unknown ({row.architecture.source})",
            "Run with --online to read its config.json from the Hub, or point at a local directory with a "
            "config.json; then check the architecture in the compatibility report.",
            where,
        )
    if run is None:
        return Item(
            "check", f"No compatibility results to check {subject} against", "Run neuron-compat.", where
        )
    result = row.result
    if result is None:
        return Item(
            "check",
            f"{subject} was not measured by the compatibility harness",
            f"Run neuron-compat on {model_type} before migrating.",
            where,
        )
    verdict = result["verdict"]
    steps = " ".join(advice(result))
    if verdict in ("fails", "crash"):
        stage = result.get("stage")
        at = f" at {stage} ({STAGE_MEANINGS.get(stage, stage)})" if stage else ""
        error = f": {result['error']}" if result.get("error") else ""
        return Item("blocking", f"{subject} {verdict}{at} on TorchNeuron{error}", steps, where)
    if verdict in ("timeout", "harness-error"):
        return Item("check", f"{subject} was not measured ({verdict})", steps, where)
    if verdict == "works-with-caveats":
        return Item(
            "check",
            f"{subject} works with caveats: {result.get('recompile_count', 0)} recompile(s), "
            f"{result.get('graph_breaks', 0)} graph break(s)",
            steps,
            where,
        )
    return None


def _models(scans: list[FileScan], configs: list[Path], online: bool) -> list[ModelRow]:
    rows: dict[str, ModelRow] = {}
    for config in configs:
        model_type = read_model_type(config)
        key = str(config.parent.resolve())
        rows[key] = ModelRow(
            display_path(config.parent),
            [display_path(config)],
            Architecture(model_type or UNKNOWN, f"local {display_path(config)}"),
        )
    for scan in scans:
        for reference in scan.models:
            config = local_config(reference.value, scan.path.parent)
            key = str(config.parent.resolve()) if config else reference.value
            architecture = resolve(reference.value, scan.path.parent, online)
            row = rows.setdefault(key, ModelRow(reference.value, [], architecture))
            row.locations.append(f"{reference.location} ({reference.how})")
    return sorted(rows.values(), key=lambda row: (row.architecture.model_type == UNKNOWN, row.reference))


def _load_results(results: Path | None) -> tuple[Run | None, str]:
    """The run to check models against: the file's first environment (the reference run has one)."""
    path = results if results is not None else REFERENCE_RESULTS
    if results is None and not path.is_file():
        return None, "no results given and the reference run is not available"
    runs = load_runs([path])
    return runs[0], display_path(path)


def build_checklist(
    paths: list[Path],
    results: Path | None,
    online: bool,
    exclude: tuple[str, ...] = (),
    analyze: Callable[..., dict] | None = None,
) -> dict:
    """The checklist's content; raises ResultsError or ValueError on bad input."""
    if analyze is None:
        from migrator import analyze_paths as analyze
    for path in paths:
        if not path.exists():
            raise ValueError(f"{path}: no such file or directory")
    run, results_label = _load_results(results)
    report = analyze(list(paths), exclude)
    sections: list[FileSection] = []
    scans: list[FileScan] = []
    blocking: list[Item] = []
    uses: set[str] = set()
    for file in report.get("files", []):
        source = Path(file["path"])
        display = display_path(source)
        kind = KINDS.get(source.suffix.lower(), "python")
        scan = scan_file(source, display, kind)
        scans.append(scan)
        uses |= scan.uses
        findings = file.get("findings", [])
        fixed = [finding for finding in findings if finding.get("fixed")]
        counts = Counter(finding.get("family", "manual") for finding in fixed)
        items = _migrator_items(file, display) + _target_items(scan) + _risk_items(scan, fixed)
        items.sort(key=lambda item: item.key)
        blocking += [item for item in items if item.severity == "blocking"]
        section_items = [item for item in items if item.severity != "blocking"]
        rewrites = {family: counts[family] for family in FAMILIES if counts[family]}
        sections.append(FileSection(display, kind, rewrites, section_items))
    models = _models(scans, find_configs(list(paths), exclude), online)
    model_items = []
    for row in models:
        if run is not None and row.architecture.model_type != UNKNOWN:
            row.result = run.rows.get(row.architecture.model_type)
        item = _result_item(row, run)
        if item is not None:
            (blocking if item.severity == "blocking" else model_items).append(item)
    requirements = [
        (name, version) for needs, name, version in REQUIREMENTS if needs == "always" or needs in uses
    ]
    removals = [text for name, text in REMOVALS.items() if name in uses]
    all_items = blocking + model_items + [item for section in sections for item in section.items]
    counts = Counter(item.severity for item in all_items)
    return {
        "paths": [display_path(path) for path in paths],
        "platform": PLATFORM,
        "requirements": requirements,
        "removals": removals,
        "blocking": blocking,
        "sections": sections,
        "models": models,
        "model_items": model_items,
        "run": run,
        "results_label": results_label,
        "online": online,
        "counts": {severity: counts[severity] for severity in SEVERITIES},
        "total_rewrites": sum(sum(section.rewrites.values()) for section in sections),
        "severity_labels": SEVERITY_LABELS,
        "families": FAMILIES,
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _format(output: Path | None) -> str:
    if output is None:
        return "md"
    return {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html"}.get(output.suffix.lower(), "")


def write_checklist(
    paths: list[Path],
    output: Path | None,
    results: Path | None,
    online: bool,
    exclude: tuple[str, ...] = (),
    analyze: Callable[..., dict] | None = None,
) -> int:
    """Writes the checklist as Markdown (stdout or .md) or HTML (.html); returns the exit code."""
    fmt = _format(output)
    if not fmt:
        return fail(f"{output}: the checklist is written as .md or .html")
    try:
        context = build_checklist([Path(path) for path in paths], results, online, exclude, analyze)
    except (ResultsError, UsageError, ValueError) as error:
        return fail(str(error))
    if fmt == "html":
        text = render("checklist.html.jinja", css=asset("report.css"), js=asset("checklist.js"), **context)
    else:
        text = render("checklist.md.jinja", **context)
    if output is None:
        sys.stdout.write(text)
        return 0
    try:
        write_output(output, text)
    except OSError as error:
        return fail(f"cannot write {output}: {error.strerror or error}")
    counts = context["counts"]
    print(
        f"Wrote the pre-migration checklist ({len(context['sections'])} files, {counts['blocking']} "
        f"blocking, {counts['manual']} manual, {counts['compile-risk']} compile-risk items) "
        f"to {output.resolve()}"
    )
    return 0
