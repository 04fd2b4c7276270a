# One command from nothing: `make test` builds .venv and runs lint, types and the suite.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint types unit venv demo bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest

test: lint types unit

bench: $(STAMP)
	$(BIN)/python bench/waiting.py
	$(BIN)/python bench/resume.py
	$(BIN)/python bench/ack_latency.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
