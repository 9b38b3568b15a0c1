# The two quickstart commands: `make serve` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/calypso: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found; run make PYTHON=python3"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,bench,embed,xai]'
	@# rapidocr-onnxruntime requires opencv-python, whose cv2 needs libGL.so.1 (absent on a fresh server);
	@# both builds install the same cv2 files, so drop the GUI one and lay the headless one down again.
	$(BIN)/pip uninstall --quiet --yes opencv-python
	$(BIN)/pip install --quiet --force-reinstall --no-deps 'opencv-python-headless>=4.8,<6'
	$(BIN)/python -c "import cv2, rapidocr_onnxruntime" || { echo "the OCR engine does not import"; exit 1; }
	@touch $@

install: $(BIN)/calypso

# The demo knowledge base lives beside the checkout (./.calypso), not in the user's data directory.
serve: install
	$(BIN)/calypso serve --demo --home .calypso

# The whole suite (tests/store and the document API on both backends), then every API test again on
# PostgreSQL. pytest exits 5 when it collects nothing: that is a failure of the suite, say so.
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; fi; [ $$rc -eq 0 ] || exit $$rc; \
	CALYPSO_TEST_BACKEND=postgres $(BIN)/python -m pytest tests/api $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; fi; exit $$rc

# Lint and format check (the rules in pyproject.toml: pyflakes, isort, bugbear, complexity, pyupgrade, simplify).
lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

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

.PHONY: install serve test test-fast typecheck lint lint-js
