"""Shell launchers: parsed with tree-sitter's bash grammar (`syntax`), rewritten by node ranges (`rewrite`, on
the edit list of `edits`), rules NM450-NM499 one module each (`nm<code>_<what>.py`): the rewriter takes each
module's matcher, which declares the events of the walk it takes."""

from __future__ import annotations

from migrator.rules import Example


def example(before: str, after: str | None = None) -> Example:
    """A shell rule's example: a launcher before and after the migration (None: left as it is)."""
    return Example(before, after, kind="shell")
