"""`neuron-migrate checklist`: what migrating the given scripts to TorchNeuron involves, as a task list.

It combines the migrator's findings (what it rewrites, what it leaves to a person), a scan of the files
(models, target instances, compile risks) and the compatibility results of the models' architectures.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from compat_matrix.planner import plan_in_one_line
from compat_matrix.schema import Verdict
from migrator import target_stack
from migrator.engine import FileResult
from migrator.registry import RULES
from migrator.risks.base import Risk
from migrator.rules import FAMILIES, Finding, Severity
from reports.advice import STAGE_MEANINGS, advice
from reports.inventory import FileScan, Location, find_configs, scan_file
from reports.render import NULL, asset, fail, render, write_output
from reports.results import REFERENCE_RESULTS, REPO_ROOT, ResultsError, Run, display_path, load_runs
from reports.tries import load_try_reports, match
from reports.vocabulary import NOT_MEASURED_VERDICTS
from usercode.model_ids import UNKNOWN, Architecture, local_config, read_model_type, resolve
from usercode.sources import UsageError, named_file_kind

SEVERITIES = ("blocking", "manual", "compile-risk", "check")
SEVERITY_LABELS = {
    "blocking": "blocking",
    "manual": "manual change",
    "compile-risk": "compile risk",
    "check": "check",
}

# Where the migrated code runs (migrator/target_stack.json, which also holds the versions it needs).
PLATFORM = (
    f"{' or '.join(target_stack.INSTANCES)} instances: TorchNeuron does not run on "
    f"{', '.join(target_stack.NOT_ON[:-1])} or {target_stack.NOT_ON[-1]}"
)
RULES_DOC = REPO_ROOT / "docs" / "reference" / "rules.md"
COMPAT_REPORT_NAME = "compat.html"  # what `make demo` writes next to the checklist
# The matrix a model that is not a causal LM would need; neuron-compat measures causal LMs only.
OTHER_MATRICES = {
    "embedding": "an embedding (feature-extraction) matrix: a compiled forward pass at fixed batch and sequence "
    "length, with pooled embeddings compared against the CPU reference",
    "classification": "a sequence-classification matrix: a compiled forward pass with its logits compared "
    "against the CPU reference",
    "seq2seq": "a sequence-to-sequence matrix: encoder and decoder compiled with a static cache, generated tokens "
    "compared against the CPU reference",
    "diffusion": "a diffusion matrix: the Diffusers pipeline's denoiser, VAE and text encoders compiled at a "
    "fixed image size",
}
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
    code: str = ""  # rule code (NM101), risk kind, or what else the item is about ("model", "platform")
    cell: int | None = None  # notebooks: the code cell of sort_line
    file: str = ""  # path relative to the scanned root; set with the stable key
    line_text: str = ""  # the source line the item points at, stripped
    stable_key: str = ""  # data-key: hash of (code, file, line text, message); ticks are stored under it
    rule_href: str = ""  # link to the rule's entry in docs/reference/rules.md
    model_href: str = ""  # link to the architecture's row in the compatibility report

    @property
    def key(self) -> tuple:
        return (SEVERITIES.index(self.severity), self.sort_line, self.title)


@dataclass
class FileSection:
    display: str
    kind: str
    rewrites: dict[str, int]
    items: list[Item] = field(default_factory=list)
    tries: list[tuple[str, str]] = field(
        default_factory=list
    )  # (command, what `neuron-migrate try` measured)


@dataclass
class ModelRow:
    reference: str
    locations: list[str]  # where the files name it, and how (argparse default, shell argument, ...)
    architecture: Architecture
    result: dict | None = None
    task: str | None = None  # embedding / classification / diffusion: no causal-LM verdict applies
    href: str = ""  # its row in the compatibility report, when that page sits next to the checklist
    config: Path | None = None  # a local model directory's config.json
    measured_config: str = ""  # which config the result measured, where that matters to this model
    trained: bool = False  # a file that names it trains (migrator findings of the training family)
    plan: str = ""  # its real-size plan in one line (compat_matrix.planner), for a causal LM

    @property
    def matrix(self) -> str:
        return OTHER_MATRICES.get(self.task or "", "")


def _location(display: str, line: int | None, cell: int | None) -> str:
    return str(Location(display, line or 1, cell))


# What a finding the migrator leaves to a person is in the checklist, by its rule's severity.
SEVERITY_OF_MANUAL = {Severity.ERROR: "blocking", Severity.WARNING: "manual", Severity.INFO: "check"}


def _migrator_items(file: FileResult, display: str) -> list[Item]:
    items = []
    if file.error:
        items.append(
            Item(
                "blocking",
                f"neuron-migrate cannot process this file: {file.error}",
                "Fix the file so that it parses (or exclude it), then run the checklist again.",
                display,
                code="parse-error",
            )
        )
    for finding in file.manual:
        items.append(
            Item(
                SEVERITY_OF_MANUAL[finding.rule.severity],
                f"{finding.code}: {finding.why or finding.message}",
                finding.action or finding.rule.action,
                _location(display, finding.line, finding.cell),
                finding.line,
                code=finding.code,
                cell=finding.cell,
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
            code="target",
            cell=locations[0].cell,
        )
        for target, locations in by_target.items()
    ]


def _handled_by_migrator(risk: Risk, fixed: list[Finding]) -> str | None:
    """The migrator's own message when one of its rewrites already removes this risk: a fixed finding
    with a code the risk's rule names (`CODE`, or `CODE:subject` for a finding about that subject)."""
    for finding in fixed:
        for fix in risk.rule.fixed_by:
            code, _, subject = fix.partition(":")
            if finding.code == code and (not subject or finding.subject == subject):
                return finding.message
    return None


def _risk_items(scan: FileScan, fixed: list[Finding]) -> list[Item]:
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
                str(scan.at(risk.line, risk.cell)),
                risk.line,
                code=risk.rule.code,
                cell=risk.cell,
            )
        )
    return items


def _result_item(row: ModelRow, run: Run | None) -> Item | None:
    item = _verdict_item(row, run)
    if "config.json has" not in row.measured_config:
        return item
    if item is None:  # works, but with other code-path values than this model's
        return Item(
            "check",
            f"`{row.reference}` ({row.architecture.model_type}) works ({row.measured_config})",
            f"Run neuron-compat --config class-defaults --archs {row.architecture.model_type}, or on this "
            "model's values, before migrating.",
            ", ".join(row.locations),
            code="model",
        )
    item.title += f" ({row.measured_config})"
    return item


def _verdict_item(row: ModelRow, run: Run | None) -> Item | None:
    model_type = row.architecture.model_type
    where = ", ".join(row.locations)
    if row.task:
        kind = {
            "embedding": "an embedding",
            "classification": "a classification",
            "seq2seq": "a sequence-to-sequence",
            "diffusion": "a diffusion",
        }
        return Item(
            "check",
            f"`{row.reference}` is {kind[row.task]} model: the causal-LM compatibility matrix does not apply",
            f"neuron-compat measures text generation and training of causal LMs only; this model would need "
            f"{row.matrix}. Check it on a trn2 instance before migrating.",
            where,
            code="model",
        )
    subject = f"`{row.reference}` ({model_type})"
    if model_type == UNKNOWN:
        return Item(
            "check",
            f"Architecture of `{row.reference}` unknown ({row.architecture.source})",
            "Run with --online to read its config.json from the Hub, or point at a local directory with a "
            "config.json; then check the architecture in the compatibility report.",
            where,
            code="model",
        )
    if run is None:
        return Item(
            "check",
            f"No compatibility results to check {subject} against",
            "Run neuron-compat.",
            where,
            code="model",
        )
    result = row.result
    if result is None:
        return Item(
            "check",
            f"{subject} was not measured by the compatibility harness",
            f"Run neuron-compat on {model_type} before migrating.",
            where,
            code="model",
        )
    verdict = result["verdict"]
    steps = " ".join(advice(result))
    if verdict in ("fails", "crash"):
        stage = result.get("stage")
        at = f" at {stage} ({STAGE_MEANINGS.get(stage, stage)})" if stage else ""
        error = f": {result['error']}" if result.get("error") else ""
        whose = " (a Transformers bug: it fails on CPU too)" if result.get("cause") == "transformers" else ""
        return Item(
            "blocking", f"{subject} {verdict}{at} on TorchNeuron{whose}{error}", steps, where, code="model"
        )
    if verdict in NOT_MEASURED_VERDICTS:
        return Item("check", f"{subject} was not measured ({verdict})", steps, where, code="model")
    if verdict == Verdict.WORKS_EAGER:
        return Item(
            "check", f"{subject} works, with eager (uncompiled) generation", steps, where, code="model"
        )
    if verdict == Verdict.WORKS_WITH_CAVEATS:
        recompiles, breaks = (
            NULL if result.get(name) is None else result[name] for name in ("recompile_count", "graph_breaks")
        )
        return Item(
            "check",
            f"{subject} works with caveats: {recompiles} recompile(s)"
            + (" (at every decode step)" if result.get("recompiles_every_step") else "")
            + f", {breaks} graph break(s)",
            steps,
            where,
            code="model",
        )
    return None


def _models(
    scans: list[FileScan],
    configs: list[Path],
    online: bool,
    show: Callable[[Path], str],
    training_files: set[str] = frozenset(),
) -> list[ModelRow]:
    rows: dict[str, ModelRow] = {}
    for config in configs:
        model_type = read_model_type(config)
        key = str(config.parent.resolve())
        rows[key] = ModelRow(
            show(config.parent),
            [show(config)],
            Architecture(model_type or UNKNOWN, f"local {show(config)}"),
            config=config,
        )
    for scan in scans:
        for reference in scan.models:
            config = local_config(reference.value, scan.path.parent)
            if config is not None:
                key = str(config.parent.resolve())
                architecture = Architecture(read_model_type(config) or UNKNOWN, f"local {show(config)}")
            else:
                key = reference.value
                architecture = resolve(reference.value, scan.path.parent, online)
            row = rows.setdefault(key, ModelRow(reference.value, [], architecture, config=config))
            row.locations.append(f"{reference.location} ({reference.how})")
            row.trained = row.trained or scan.display in training_files
            # How the code loads it (an embedding class, a pipeline task) outranks the id table.
            row.task = row.task or reference.task or architecture.task
    return sorted(rows.values(), key=lambda row: (row.architecture.model_type == UNKNOWN, row.reference))


def _load_results(results: Path | None) -> tuple[list[Run], str]:
    """The runs to check models against: the first (in the reference run, the one on checkpoint configs)
    decides, a class-defaults run beside it serves local models whose config differs from the checkpoint's."""
    path = results if results is not None else REFERENCE_RESULTS
    if results is None and not path.is_file():
        return [], "no results given and the reference run is not available"
    return load_runs([path]), display_path(path)


def _config_value(config: dict, name: str):
    """A field of a config.json, top-level or in a sub-config (Gemma 3's text_config); KeyError if absent."""
    if name in config:
        return config[name]
    for value in config.values():
        if isinstance(value, dict) and name in value:
            return value[name]
    raise KeyError(name)


def _measured_result(row: ModelRow, runs: list[Run]) -> tuple[dict | None, str]:
    """The result a model is checked against and, where it matters, which config it measured. A local
    config.json whose code-path values differ from the checkpoint values the run applied takes the
    class-defaults row of the same file where there is one."""
    model_type = row.architecture.model_type
    result = runs[0].rows.get(model_type) if runs else None
    values = (result or {}).get("checkpoint_values")
    if result is None or result.get("config_source") != "checkpoint" or not isinstance(values, dict):
        return result, ""
    measured = ", ".join(f"{name}={json.dumps(value)}" for name, value in values.items())
    note = f"measured with the code-path values of {result.get('checkpoint')}: {measured}"
    try:
        local = json.loads(row.config.read_text(encoding="utf-8")) if row.config else None
    except (OSError, UnicodeDecodeError, ValueError):
        local = None
    differing = []
    for name, value in values.items():
        try:
            mine = _config_value(local, name) if isinstance(local, dict) else value
        except KeyError:
            continue
        if mine != value:
            differing.append(f"{name}={json.dumps(mine)}")
    if not differing:
        return result, note
    note += f"; its config.json has {', '.join(differing)}"
    class_defaults = next((run.rows[model_type] for run in runs[1:] if run.config == "class-defaults"
                           and model_type in run.rows), None)  # fmt: skip
    if class_defaults is not None:
        return class_defaults, note + ": shown, the row measured with the config class's defaults"
    return result, note + ": not measured with those values"


def _shown_under(roots: list[Path]) -> Callable[[Path], str]:
    """Paths relative to the scanned root that holds them (prefixed by its name when several were given)."""
    bases = [(root, Path(os.path.realpath(root))) for root in roots]

    def show(path: Path) -> str:
        absolute = Path(os.path.realpath(path))  # never raises, a symbolic link loop included
        for root, base in bases:
            if absolute == base:
                return base.name
            if base.is_dir() and absolute.is_relative_to(base):
                relative = absolute.relative_to(base).as_posix()
                return relative if len(bases) == 1 else f"{root.name}/{relative}"
        return display_path(path)

    return show


def _line_text(scan: FileScan, item: Item) -> str:
    body = scan.lines.get(item.cell) or []
    return body[item.sort_line - 1].strip() if 0 < item.sort_line <= len(body) else ""


def _assign_keys(items: list[Item]) -> None:
    """Stable keys: the same finding on the same line text keeps its key when other lines move or change.
    Identical items (same code, file, line text and message) are told apart by their order."""
    seen: Counter[str] = Counter()
    for item in items:
        material = "\x1f".join((item.code, item.file, item.line_text, item.title, item.action))
        digest = hashlib.sha256(material.encode("utf-8")).hexdigest()[:16]
        seen[digest] += 1
        item.stable_key = digest if seen[digest] == 1 else f"{digest}-{seen[digest]}"


def _links(output: Path | None) -> tuple[str, str]:
    """Relative links from where the checklist is written: the rules doc, and the compatibility report when
    it sits next to the checklist (as `make demo` writes them); "" when there is nothing to link to."""
    folder = output.parent if output is not None else Path.cwd()
    rules = Path(os.path.relpath(RULES_DOC, folder.resolve())).as_posix() if RULES_DOC.is_file() else ""
    compat = COMPAT_REPORT_NAME if (folder / COMPAT_REPORT_NAME).is_file() else ""
    return rules, compat


def _why(component: target_stack.Component) -> str:
    where = f": {component.index}" if component.index else ""
    return f"({component.why}{where})" if component.why else ""


def _platform_items(uses: set[str]) -> list[Item]:
    items = [Item("check", f"Run on {PLATFORM}", "TorchNeuron is a public beta on Trainium2 and Trainium3.")]
    items += [
        Item("check", " ".join(filter(None, ("Install", c.name, c.wanted, _why(c)))), "")
        for c in target_stack.COMPONENTS
        if c.needed_when == "always" or c.needed_when in uses
    ]
    items += [Item("check", f"Uninstall {text}", "") for name, text in REMOVALS.items() if name in uses]
    for item in items:
        item.code = "platform"
    return items


def build_checklist(
    paths: list[Path],
    results: Path | None,
    online: bool,
    exclude: tuple[str, ...] = (),
    analyze: Callable[[list[Path], tuple[str, ...]], list[FileResult]] | None = None,
    output: Path | None = None,
    try_reports: list[Path] = (),
) -> dict:
    """The checklist's content; raises ResultsError or ValueError on bad input."""
    if analyze is None:
        from migrator import analyze_paths as analyze
    for path in paths:
        if not path.exists():
            raise ValueError(f"{path}: no such file or directory")
    runs, results_label = _load_results(results)
    run = runs[0] if runs else None
    tried = load_try_reports(list(try_reports))
    rules_href, compat_href = _links(output)
    show = _shown_under(paths)
    analyzed = analyze(list(paths), exclude)
    sections: list[FileSection] = []
    scans: list[FileScan] = []
    blocking: list[Item] = []
    uses: set[str] = set()
    training_files: set[str] = set()
    for file in analyzed:
        source = Path(file.path)
        display = show(source)
        # The kind the migrator read the file as (suffix, else a shell `#!` line): a Slurm job or a
        # suffix-less launcher is scanned as shell, never parsed as Python.
        kind = named_file_kind(source) or "other"
        scan = scan_file(source, display, kind)
        scans.append(scan)
        uses |= scan.uses
        if "trl" in scan.uses or any(finding.rule.family == "training" for finding in file.findings):
            training_files.add(display)
        fixed = [finding for finding in file.findings if finding.fixed]
        counts = Counter(finding.rule.family for finding in fixed)
        items = _migrator_items(file, display) + _target_items(scan) + _risk_items(scan, fixed)
        for item in items:
            item.file, item.line_text = display, _line_text(scan, item)
            if rules_href and item.code in RULES:  # docs/reference/rules.md has an entry for every rule
                item.rule_href = f"{rules_href}#{item.code.lower()}"
        items.sort(key=lambda item: item.key)
        blocking += [item for item in items if item.severity == "blocking"]
        section_items = [item for item in items if item.severity != "blocking"]
        rewrites = {family.name: counts[family.name] for family in FAMILIES if counts[family.name]}
        tries = [line for entry in match(tried, source) for line in entry.lines]
        sections.append(FileSection(display, kind, rewrites, section_items, tries))
    models = _models(scans, find_configs(list(paths), exclude), online, show, training_files)
    model_items = []
    for row in models:
        if row.task is None and row.architecture.model_type != UNKNOWN:
            reference = str(row.config.parent) if row.config else row.reference
            row.plan = plan_in_one_line(reference, row.config, "train" if row.trained else "generate")
        if row.task is None and run is not None and row.architecture.model_type != UNKNOWN:
            row.result, row.measured_config = _measured_result(row, runs)
            if compat_href and row.result is not None:
                row.href = f"{compat_href}#arch-{row.architecture.model_type}"
        item = _result_item(row, run)
        if item is not None:
            item.line_text, item.model_href = row.reference, row.href
            (blocking if item.severity == "blocking" else model_items).append(item)
    platform_items = _platform_items(uses)
    all_items = blocking + model_items + [item for section in sections for item in section.items]
    _assign_keys(all_items + platform_items)
    counts = Counter(item.severity for item in all_items)
    return {
        "paths": [display_path(path) for path in paths],
        "platform_items": platform_items,
        "blocking": blocking,
        "sections": sections,
        "models": models,
        "model_items": model_items,
        "run": run,
        "results_label": results_label,
        "online": online,
        "rules_href": rules_href,
        "counts": {severity: counts[severity] for severity in SEVERITIES},
        "total_rewrites": sum(sum(section.rewrites.values()) for section in sections),
        "try_reports": [display_path(path) for path in try_reports],
        "severity_labels": SEVERITY_LABELS,
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
    analyze: Callable[[list[Path], tuple[str, ...]], list[FileResult]] | None = None,
    try_reports: list[Path] = (),
) -> int:
    """Writes the checklist as Markdown (stdout or .md) or HTML (.html); returns the exit code."""
    fmt = _format(output)
    if not fmt:
        return fail(f"{output}: the checklist is written as .md or .html")
    try:
        context = build_checklist(
            [Path(path) for path in paths], results, online, exclude, analyze, output, list(try_reports)
        )
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
