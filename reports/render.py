"""Shared rendering helpers: the jinja environment, inline assets and safe output writing."""

from __future__ import annotations

import os
import sys
import tempfile
from importlib import resources
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape


def markdown_cell(value) -> str:
    """Makes any value safe inside a Markdown table cell."""
    if value is None:
        return ""
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


NULL = "–"


def dash(value):
    """An unmeasured value (None) is shown as a dash, never as 0 or an empty cell that reads as nothing."""
    return NULL if value is None else value


def inline_code(value) -> Markup:
    """Escapes text for HTML and shows `backticked` spans (as in the migrator's messages) as code."""
    parts = str(escape(value)).split("`")
    if len(parts) % 2 == 0:  # unbalanced backticks: leave them as they are
        return Markup("`".join(parts))
    return Markup("".join(f"<code>{part}</code>" if index % 2 else part for index, part in enumerate(parts)))


def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("reports", "templates"),
        autoescape=select_autoescape(enabled_extensions=("html", "html.jinja"), default_for_string=False),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.filters["md"] = markdown_cell
    environment.filters["code"] = inline_code
    environment.filters["dash"] = dash
    return environment


ENVIRONMENT = _environment()


def asset(name: str) -> Markup:
    """A CSS or JS file from reports/assets, to be inlined so the page needs no network."""
    return Markup(resources.files("reports").joinpath("assets", name).read_text(encoding="utf-8"))


def render(template: str, **context) -> str:
    return ENVIRONMENT.get_template(template).render(**context)


def write_output(output: Path, text: str) -> None:
    """Writes via a temporary file in the same directory, so a failure never leaves a half-written file."""
    output.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, output)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2
