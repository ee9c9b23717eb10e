# notifyhub: `make run` starts the hub, `make test` runs every test.
#   make run [PORT=8000] [HOST=127.0.0.1]   the service and its embedded stores only
#   make test | lint | bench                 add the dev (and bench) tools
#   make test-fast [TEST_WORKERS=2]         unit + integration tests not marked `slow`
#   make lock                               regenerate requirements/ (the pinned versions)
#   make test-compat                        the suite's core at the lowest and the highest
#                                           versions pyproject.toml allows (not in CI)
#   make docs                               the docs site into site/ (offline, strict)
#   make format                             ruff format (lint checks it)
PYTHON ?= python3
VENV ?= .venv
HOST ?= 127.0.0.1
PORT ?= 8000
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
# The pinned versions every install here and the image use (`make lock` writes them):
# dev.txt for every extra, runtime.txt for the hub and its embedded stores.
DEV_LOCK := requirements/dev.txt
RUN_LOCK := requirements/runtime.txt

.PHONY: run test test-fast test-compat lint lock format bench docs clean venv venv-run

# $(1): the extras to install, $(2): the lock (pip constraints), $(3): more pip options;
# the stamp is the target.
define install
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "notifyhub needs Python >= 3.11")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c $(2) $(3) -e '.[$(1)]'
	touch $@
endef

# --no-compile: Python compiles what the hub imports when it first runs, not every module.
$(RUN_STAMP): pyproject.toml $(RUN_LOCK)
	$(call install,embedded,$(RUN_LOCK),--no-compile)

# The Python client (clients/python) is its own distribution; its tests run against a hub.
$(DEV_STAMP): pyproject.toml $(DEV_LOCK) clients/python/pyproject.toml
	$(call install,dev,$(DEV_LOCK))
	$(BIN)/pip install --quiet -c $(DEV_LOCK) -e clients/python
	touch $(RUN_STAMP)

venv-run: $(RUN_STAMP)

venv: $(DEV_STAMP)

run: $(RUN_STAMP)
	$(BIN)/notifyhub serve --host $(HOST) --port $(PORT)

test: $(DEV_STAMP)
	$(BIN)/pytest

# The quick check while working: no processes started, no fuzzing, no waiting out timeouts;
# on TEST_WORKERS pytest-xdist workers, each with its own database and Redis key prefix
# (TEST_WORKERS=0 runs it in one process).
TEST_WORKERS ?= 2
test-fast: $(DEV_STAMP)
	$(BIN)/pytest -m "not slow" -n $(TEST_WORKERS) --dist worksteal \
	  tests/unit tests/integration tests/clients

# ruff (rules and formatting), mypy, and the import contracts of pyproject.toml's
# [tool.importlinter] (the layers of docs/ARCHITECTURE.md).
lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests bench clients
	$(BIN)/ruff format --check src tests bench clients
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(DEV_STAMP)
	$(BIN)/ruff format src tests bench clients

bench: $(DEV_STAMP)
	$(BIN)/pip install --quiet -c $(DEV_LOCK) -e '.[dev,bench]'
	$(BIN)/python -m bench

# uv resolves the locks: one universal resolution (any OS, Python >= 3.11) of every extra,
# then the runtime's (with `embedded`) as a subset of it, so both pin the same versions.
# `make lock` moves every pin to the newest release pyproject.toml allows; commit the result.
UV_COMPILE = $(UV) pip compile pyproject.toml --universal --python-version 3.11 --quiet \
	--custom-compile-command "make lock"
UV := $(VENV)/bin/uv

$(UV):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c $(DEV_LOCK) uv

lock: $(UV)
	$(UV_COMPILE) --all-extras --upgrade -o $(DEV_LOCK)
	$(UV_COMPILE) --extra embedded -c $(DEV_LOCK) -o $(RUN_LOCK)

# The compat job: the suite's core (tests/unit and COMPAT_TESTS) in two fresh venvs, one
# with the core libraries at the floors pyproject.toml declares (requirements/floors.py),
# one at the newest releases its ranges allow, no lock. It downloads both ends, so it is
# kept out of CI (.ci/run); run it when a range in pyproject.toml changes, and raise a
# floor that fails. The last four files cover the internals notifyhub/_compat/ relies
# on (its TESTED ranges are pyproject.toml's); `PYTHON=python3.13` runs the job on
# another Python (asyncio's internals). Uses this machine's Redis and PostgreSQL when the
# NOTIFYHUB_TEST_* variables name them, else embedded ones.
COMPAT_DEPS := fastapi starlette uvicorn redis packaging pydantic pydantic-core sqlalchemy asyncpg \
	pytest-asyncio
COMPAT_TESTS := tests/unit tests/integration/test_inbox_store.py \
	tests/integration/test_stream.py tests/integration/test_publish_entry.py \
	tests/integration/test_unit_of_work.py tests/integration/test_migrate_lock.py \
	tests/integration/test_connections.py tests/integration/test_http_edges.py \
	tests/integration/test_pubsub_reader.py tests/integration/test_compat_fallbacks.py
COMPAT_ENDS ?= lowest highest
COMPAT_VENV := .venv-compat

test-compat: $(UV)
	@for end in $(COMPAT_ENDS); do \
	  venv=$(COMPAT_VENV)/$$end; \
	  rm -rf $$venv && $(UV) venv --quiet --python $(PYTHON) $$venv || exit 1; \
	  if [ $$end = lowest ]; then \
	    $(BIN)/python requirements/floors.py $(COMPAT_DEPS) > $$venv/floors.txt || exit 1; \
	    pins="-c $$venv/floors.txt"; \
	  else pins="--upgrade"; fi; \
	  $(UV) pip install --python $$venv/bin/python --quiet $$pins -e '.[dev]' || exit 1; \
	  echo "== $$end:"; $(UV) pip freeze --python $$venv/bin/python | grep -i -E \
	    "^($$(echo $(COMPAT_DEPS) | tr ' ' '|'))==" | tr '\n' ' '; echo; \
	  $$venv/bin/pytest -p no:cacheprovider $(COMPAT_TESTS) || exit 1; \
	done

# MkDocs + Material (the `docs` extra, also in `dev`), built with no network: the theme's
# web fonts are off and no page loads anything from another host (tests/readme/test_site.py).
docs: $(DEV_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) $(COMPAT_VENV) .pytest_cache .mypy_cache .ruff_cache site
