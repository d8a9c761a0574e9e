# The two entry points of the README. Both set up .venv first (idempotent, see scripts/setup.sh).
.PHONY: demo test setup lint

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
