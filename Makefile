# `make demo` and `make test` set themselves up on a fresh machine: both build .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck imports unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,demo]'
	touch $(STAMP)

# A real Chroma server for the chroma preset's tests, in a virtualenv of its own: it is a
# server the tests start (`chroma run`), not a library ragcanary imports.
CHROMA_VERSION := 1.5.9
CHROMA_VENV    := .venv-chroma
CHROMA_STAMP   := $(CHROMA_VENV)/.installed-$(CHROMA_VERSION)

$(CHROMA_STAMP):
	$(PYTHON) -m venv $(CHROMA_VENV)
	$(CHROMA_VENV)/bin/python -m pip install --quiet 'chromadb==$(CHROMA_VERSION)'
	touch $(CHROMA_STAMP)

# The demo's ports: `make demo DEMO_PORT=8089 DEMO_LISTEN=127.0.0.1:9465` (or export them).
DEMO_PORT   ?= 8088
DEMO_LISTEN ?= 127.0.0.1:9464

demo: $(STAMP)
	$(BIN)/ragcanary demo --port $(DEMO_PORT) --listen $(DEMO_LISTEN)

test: lint typecheck imports unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict src

imports: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP) $(CHROMA_STAMP)
	RAGCANARY_CHROMA=$(CHROMA_VENV)/bin/chroma $(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) $(CHROMA_VENV) .pytest_cache .mypy_cache .ruff_cache
