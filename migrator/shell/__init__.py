"""Shell launchers: parsed with tree-sitter's bash grammar (`syntax`), rewritten by node ranges (`rewrite`),
rules NM450-NM499 (`rules`)."""
