# The two quickstart commands: `make serve` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/calypso: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found; run make PYTHON=python3"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,bench,embed,xai]'
	@touch $@

install: $(BIN)/calypso

serve: install
	$(BIN)/calypso serve --demo

# The whole suite (tests/store and the document API on both backends), then every API test again on
# PostgreSQL. pytest exits 5 when it collects nothing: that is a failure of the suite, say so.
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; fi; [ $$rc -eq 0 ] || exit $$rc; \
	CALYPSO_TEST_BACKEND=postgres $(BIN)/python -m pytest tests/api $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; fi; exit $$rc

# The type checker over src/ (strict on citations, store and services; see pyproject.toml).
typecheck: install
	$(BIN)/mypy

.PHONY: install serve test typecheck
