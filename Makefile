# notifyhub: `make run` starts the hub, `make test` runs every test.
#   make run [PORT=8000] [HOST=127.0.0.1]   the service and its embedded stores only
#   make test | lint | bench                 add the dev (and bench) tools
#   make test-fast                          unit + integration tests not marked `slow`
#   make docs                               the docs site into site/ (offline, strict)
#   make format                             ruff format (lint checks it once the tree is)
PYTHON ?= python3
VENV ?= .venv
HOST ?= 127.0.0.1
PORT ?= 8000
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run test test-fast lint format bench docs clean venv venv-run

# $(1): the extras to install, $(2): more pip options; the stamp is the target.
define install
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "notifyhub needs Python >= 3.11")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(2) -e '.[$(1)]'
	touch $@
endef

# --no-compile: Python compiles what the hub imports when it first runs, not every module.
$(RUN_STAMP): pyproject.toml
	$(call install,embedded,--no-compile)

# The Python client (clients/python) is its own distribution; its tests run against a hub.
$(DEV_STAMP): pyproject.toml clients/python/pyproject.toml
	$(call install,dev)
	$(BIN)/pip install --quiet -e clients/python
	touch $(RUN_STAMP)

venv-run: $(RUN_STAMP)

venv: $(DEV_STAMP)

run: $(RUN_STAMP)
	$(BIN)/notifyhub serve --host $(HOST) --port $(PORT)

test: $(DEV_STAMP)
	$(BIN)/pytest

# The quick check while working: no processes started, no fuzzing, no waiting out timeouts.
test-fast: $(DEV_STAMP)
	$(BIN)/pytest -m "not slow" tests/unit tests/integration tests/clients

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests bench clients
	$(BIN)/mypy

format: $(DEV_STAMP)
	$(BIN)/ruff format src tests bench clients

bench: $(DEV_STAMP)
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	$(BIN)/python -m bench

# MkDocs + Material (the `docs` extra, also in `dev`), built with no network: the theme's
# web fonts are off and no page loads anything from another host (tests/readme/test_site.py).
docs: $(DEV_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
