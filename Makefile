# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
# The virtualenv is (re)built only when pyproject.toml changes; protos are recompiled when they change.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench protos clean

run: $(STAMP) protos
	$(BIN)/python -m jobs demo

test: $(STAMP) protos
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

bench: $(STAMP) protos
	$(BIN)/python bench/kafka_filter.py

protos: $(STAMP)
	$(BIN)/python -m jobs.protoc

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

clean:
	rm -rf build .dagger .pytest_cache
