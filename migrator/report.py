"""Findings as text (one `path:line:col: CODE [*] message` line each, like ruff), JSON (docs/using/json-report.md)
and SARIF 2.1.0 (checked against the OASIS schema in tests/migrator/test_sarif.py)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from urllib.parse import quote

from migrator.engine import FileResult
from migrator.registry import RULES
from migrator.version import __version__

SARIF_LEVELS = {"error": "error", "warning": "warning", "info": "note"}
# The JSON report's layout (docs/using/json-report.md, docs/using/json-report.schema.json). A change that could break a
# reader (a field removed, renamed or of another type) increments it; new fields do not.
JSON_SCHEMA_VERSION = 1


def summary(results: list[FileResult], total: int | None = None) -> dict:
    """`total`: the files the run set out to do, when it was interrupted before all were done."""
    findings = [finding for result in results for finding in result.findings]
    return {
        "files": len(results),
        "changed": sum(result.changed for result in results),
        "errors": sum(result.error is not None for result in results),
        "fixed": sum(finding.fixed for finding in findings),
        "manual": sum(not finding.fixed for finding in findings),
        "by_family": dict(sorted(Counter(finding.rule.family for finding in findings).items())),
        "interrupted": total is not None and total > len(results),
    }


def json_report(results: list[FileResult], total: int | None = None) -> dict:
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "tool": {"name": "neuron-migrate", "version": __version__},
        "files": [result.to_dict() for result in results],
        "summary": summary(results, total),
    }


def _where(result: FileResult, finding) -> str:
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{result.path}:{cell}{finding.line}:{finding.column}"


def text_lines(results: Iterable[FileResult], show_fixed: bool = True) -> list[str]:
    lines = []
    for result in results:
        if result.error:
            lines.append(f"{result.path}: error: {result.error}")
        for finding in result.findings:
            if finding.fixed and not show_fixed:
                continue
            mark = "[fixed]" if finding.fixed else "[manual]"
            lines.append(f"{_where(result, finding)}: {finding.code} {mark} {finding.message}")
    return lines


def summary_line(results: list[FileResult], verb: str) -> str:
    totals = summary(results)
    parts = [
        f"{totals['files']} file{'s' if totals['files'] != 1 else ''} checked",
        f"{totals['changed']} {verb}",
        f"{totals['fixed']} fix{'es' if totals['fixed'] != 1 else ''}",
        f"{totals['manual']} manual item{'s' if totals['manual'] != 1 else ''}",
    ]
    if totals["errors"]:
        parts.append(f"{totals['errors']} error{'s' if totals['errors'] != 1 else ''}")
    line = ", ".join(parts)
    if totals["manual"]:
        # Not migrated yet: legacy code or behaviour changes remain (the exit code is 1).
        line += "; manual work remains (see the TODO(neuron-migrate) comments)"
    return line


def artifact_uri(path: str) -> str:
    """A path as the URI reference SARIF's `artifactLocation.uri` must be: "/" separators, and every character
    a URI cannot hold as it is (space, `#`, `?`, `%`, non-ASCII...) percent-encoded as UTF-8 (RFC 3986)."""
    return quote(path.replace("\\", "/"), safe="/")


def sarif_report(results: list[FileResult], fixed_in_place: bool = False) -> dict:
    """`fixed_in_place`: the rewrites were written into the files the results point at (a plain run, not
    --check, --diff or --output-dir). A finding still in its file is a result of kind `fail` at its rule's
    level; one this run fixed in place is `informational`, and SARIF 2.1.0 §3.27.9 then wants level `none`."""
    used = sorted({finding.code for result in results for finding in result.findings})
    rules = [
        {
            "id": code,
            "name": code,
            "shortDescription": {"text": RULES[code].title},
            "fullDescription": {"text": RULES[code].action},
            "help": {"text": f"{RULES[code].action} (docs/reference/rules.md#{code.lower()})"},
            "defaultConfiguration": {"level": SARIF_LEVELS[str(RULES[code].severity)]},
            "properties": {"family": RULES[code].family},
        }
        for code in used
    ]
    index = {code: i for i, code in enumerate(used)}
    sarif_results = []
    notifications = []
    for result in results:
        location = {"artifactLocation": {"uri": artifact_uri(result.path)}}
        if result.error:
            notifications.append(
                {
                    "level": "error",
                    "message": {"text": result.error},
                    "locations": [{"physicalLocation": location}],
                }
            )
        for finding in result.findings:
            message = (
                finding.message
                if finding.cell is None
                else f"cell {finding.cell}, line {finding.line}: {finding.message}"
            )
            done = finding.fixed and fixed_in_place
            sarif_results.append(
                {
                    "ruleId": finding.code,
                    "ruleIndex": index[finding.code],
                    "kind": "informational" if done else "fail",
                    "level": "none" if done else SARIF_LEVELS[str(finding.rule.severity)],
                    "message": {"text": message},
                    "locations": [
                        {
                            "physicalLocation": {
                                **location,
                                # In a notebook, the JSON line that holds the cell's line (code scanning
                                # shows the .ipynb file); the cell and its own line are in the message.
                                "region": {"startLine": max(1, finding.file_line or finding.line)}
                                | (
                                    {"startColumn": max(1, finding.column)}
                                    if finding.file_line is None
                                    else {}
                                ),
                            }
                        }
                    ],
                    "properties": {"fixed": finding.fixed}
                    | ({"cell": finding.cell, "cellLine": finding.line} if finding.cell is not None else {})
                    | ({"also": list(finding.also)} if finding.also else {}),
                }
                # The other lines one TODO stands for (a notebook's are lines of its cell: in `properties`).
                | (
                    {
                        "relatedLocations": [
                            {"id": n, "physicalLocation": {**location, "region": {"startLine": line}}}
                            for n, line in enumerate(finding.also)
                        ]
                    }
                    if finding.also and finding.cell is None
                    else {}
                )
            )
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "neuron-migrate",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "results": sarif_results,
                "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
            }
        ],
    }


def render(
    results: list[FileResult], fmt: str, fixed_in_place: bool = False, total: int | None = None
) -> str:
    """`fixed_in_place`: see `sarif_report`; `total`: see `summary`."""
    if fmt == "json":
        return json.dumps(json_report(results, total), indent=2) + "\n"
    if fmt == "sarif":
        return json.dumps(sarif_report(results, fixed_in_place), indent=2) + "\n"
    lines = text_lines(results)
    return "\n".join(lines) + ("\n" if lines else "")
