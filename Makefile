# The two entry points of the README. Both set up .venv first (idempotent, see scripts/setup.sh).
.PHONY: demo test setup lint new-rule fixtures

setup:
	bash scripts/setup.sh test,ray

demo: setup
	bash scripts/demo.sh

test: setup
	bash scripts/install-chromium.sh
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/python -m migrator.rules_doc --check
	HF_HUB_OFFLINE=1 .venv/bin/pytest -n 2 --dist loadgroup -q

lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

# Contributors (docs/writing-rules.md): scaffold a rule (FAMILY: a Python family, shell, notebook or risk);
# rewrite fixture expectations from the current output.
new-rule:
	.venv/bin/python scripts/new_rule.py $(FAMILY) $(NAME) $(if $(CODE),--code $(CODE))

fixtures:
	.venv/bin/python -m tests.migrator.update_fixtures $(CASES)
