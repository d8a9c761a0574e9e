"""The command lines, above the libraries: `neuron-migrate` (rewrite, `try`, `checklist`) and `neuron-compat`
(the compatibility matrix, its report, the stand-in). Only these modules import across `migrator/`,
`try_run/`, `compat_matrix/`, `standin/` and `reports/`; no library imports a command line."""
