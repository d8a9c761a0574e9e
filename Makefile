# The two entry points of the README. Both set up .venv first (idempotent, see scripts/setup.sh).
# The lanes of the tests (docs/contributing/testing.md): `make check` in seconds, `make test` what CI runs.
.PHONY: demo test check setup lint new-rule fixtures

setup:
	bash scripts/setup.sh test,ray

demo: setup
	bash scripts/demo.sh

# Every test, every migrated fixture output tried on the stand-in device included (.ci/run, on a clean clone).
# Two workers: a try keeps a core busy. One intra-op thread per process, as `try -j 2` gives its runs (threads
# that wait for the other worker's core made two tries at once 10-20 % slower). The slowest tests are listed at
# the end, to keep it under 25 minutes. Chromium (apt) installs while pip sets up .venv: on a fresh machine CI's
# clock runs through both.
test:
	bash scripts/install-chromium.sh & chromium=$$!; \
	bash scripts/setup.sh test,ray || { wait $$chromium; exit 1; }; \
	wait $$chromium
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/python -m migrator.rules_doc --check
	HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 .venv/bin/pytest -n 2 --dist loadgroup -q --durations=30

# The fast lane: lint, the generated rules page, every rule example, every fixture's expected output and
# findings, the docs' links and the figures they take from committed results. No tiny model runs.
check: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/python -m migrator.rules_doc --check
	HF_HUB_OFFLINE=1 .venv/bin/pytest -q tests/migrator/test_rule_examples.py tests/migrator/test_fixtures.py \
		tests/migrator/test_doc_links.py tests/migrator/test_target_stack.py tests/reports/test_doc_figures.py \
		tests/test_lanes.py

lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

# Contributors (docs/contributing/writing-rules.md): scaffold a rule (FAMILY: a Python family, shell, notebook or risk);
# rewrite fixture expectations from the current output.
new-rule:
	.venv/bin/python scripts/new_rule.py $(FAMILY) $(NAME) $(if $(CODE),--code $(CODE))

fixtures:
	.venv/bin/python -m tests.migrator.update_fixtures $(CASES)
