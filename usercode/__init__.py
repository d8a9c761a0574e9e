"""The one reader of users' code, for the migrator's checks, the checklist and `neuron-migrate try`: Python
(`ast` helpers), notebook cells as IPython runs them, shell through tree-sitter's bash grammar, the launcher
programs and wrappers a command runs through, and the words that name a model or a dataset. It imports none of
this project's other packages."""
