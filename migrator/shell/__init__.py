"""Shell launchers: parsed with tree-sitter's bash grammar (`syntax`), rewritten by node ranges (`rewrite`),
rules NM450-NM499 (`rules`)."""

from migrator.shell.rewrite import rewrite_shell

__all__ = ["rewrite_shell"]
