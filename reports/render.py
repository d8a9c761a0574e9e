"""Shared rendering helpers: the jinja environment, inline assets and safe output writing."""

from __future__ import annotations

import re
import sys
from importlib import resources
from pathlib import Path
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from migrator.writes import replace_file


class MarkdownText(str):
    """Markdown already made safe (by a filter below, or a template's own macro): inserted as it is."""


_HTML_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# An `_` between two letters or digits (snake_case) can neither open nor close emphasis: it stays as it is.
_MARKDOWN_PUNCTUATION = re.compile(r"[\\`*\[\]|~]|(?<![^\W_])_|_(?![^\W_])")
_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


def markdown_text(value) -> MarkdownText:
    """Any value as Markdown text that reads as written, whatever it holds: `&`, `<` and `>` as entities (no
    HTML tag or comment can open), Markdown's inline punctuation backslash-escaped (no code span, link,
    emphasis or table cell can start), line breaks as spaces (no new block). What every value a Markdown
    template prints goes through (its `finalize`), as HTML templates escape theirs."""
    if isinstance(value, MarkdownText):
        return value
    text = re.sub(r"[&<>]", lambda match: _HTML_ENTITIES[match[0]], str(value))
    text = _MARKDOWN_PUNCTUATION.sub(lambda match: "\\" + match[0], text)
    return MarkdownText(_LINE_BREAKS.sub(" ", text))


def markdown_cell(value) -> MarkdownText:
    """A value in a Markdown table cell (None: an empty cell)."""
    return MarkdownText("") if value is None else MarkdownText(markdown_text(value).strip())


def markdown_code(value, cell: bool = False) -> MarkdownText:
    """A value as a Markdown code span, whatever backticks it holds (the fence is longer than any run of
    them); `cell`: in a table, where a `|` must be escaped even inside a code span."""
    text = _LINE_BREAKS.sub(" ", str(value))
    if not text:
        return MarkdownText("")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    if text.startswith("`") or text.endswith("`"):
        text = f" {text} "
    if cell:
        text = text.replace("|", "\\|")
    return MarkdownText(f"{fence}{text}{fence}")


def markdown_inline(value, cell: bool = False) -> MarkdownText:
    """Text whose `backticked` spans (as in the migrator's messages) are code: the spans as code spans, the
    rest as text; with unbalanced backticks, all of it as text."""
    parts = str(value).split("`")
    if len(parts) % 2 == 0:
        return markdown_text(value)
    return MarkdownText(
        "".join(
            markdown_code(part, cell) if index % 2 else markdown_text(part)
            for index, part in enumerate(parts)
        )
    )


def markdown_url(value) -> MarkdownText:
    """A link target: percent-encoded, so that no space, parenthesis or bracket ends the link."""
    return MarkdownText(quote(str(value), safe="/#:.-_~%"))


def template_markdown(value) -> MarkdownText:
    """Markdown a template made itself (a macro's output, whose values it already escaped)."""
    return MarkdownText(value)


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


def _environment(markdown: bool) -> Environment:
    environment = Environment(
        loader=PackageLoader("reports", "templates"),
        autoescape=select_autoescape(enabled_extensions=("html", "html.jinja"), default_for_string=False),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=markdown_text if markdown else None,
    )
    environment.filters["md"] = markdown_cell
    environment.filters["md_code"] = markdown_code
    environment.filters["md_inline"] = markdown_inline
    environment.filters["md_url"] = markdown_url
    environment.filters["markdown"] = template_markdown
    environment.filters["code"] = inline_code
    environment.filters["dash"] = dash
    return environment


# HTML templates escape every value they print (autoescape); Markdown templates (`*.md.jinja`) too, for
# Markdown (`finalize`): a file name, model id or error message shows as written and never becomes markup.
ENVIRONMENT = _environment(markdown=False)
MARKDOWN_ENVIRONMENT = _environment(markdown=True)


def asset(name: str) -> Markup:
    """A CSS or JS file from reports/assets, to be inlined so the page needs no network."""
    return Markup(resources.files("reports").joinpath("assets", name).read_text(encoding="utf-8"))


def render(template: str, **context) -> str:
    environment = MARKDOWN_ENVIRONMENT if template.endswith(".md.jinja") else ENVIRONMENT
    return environment.get_template(template).render(**context)


def write_output(output: Path, text: str) -> None:
    """Writes atomically (a failure never leaves a half-written page, nor a temporary file behind)."""
    replace_file(output, text.encode("utf-8"))


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2
