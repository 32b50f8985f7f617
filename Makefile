# Two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev

.PHONY: demo test lint types contracts unit venv clean down

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@# The dashboard tests drive Debian's Chromium (never a downloaded browser); root installs it.
	@if ! command -v chromium >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi
	touch $@ $(STAMP_RUN)

venv: $(STAMP_RUN)

## demo: start a local cluster with fake GPUs and run the sample jobs end to end
demo: $(STAMP_RUN)
	PATH="$(CURDIR)/$(BIN):$$PATH" ./examples/demo.sh

## test: lint, types, import contracts and the whole test suite
test: lint types contracts unit

lint: $(STAMP_DEV)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

types: $(STAMP_DEV)
	$(BIN)/mypy

contracts: $(STAMP_DEV)
	$(BIN)/lint-imports

unit: $(STAMP_DEV)
	$(BIN)/pytest

down:
	-$(BIN)/corral down

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .import_linter_cache
