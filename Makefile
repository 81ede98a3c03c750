# LogicMap: `make demo` runs the main job offline, `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False

.PHONY: install demo test test-unit lint studio clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# The CPU build of torch first: an unpinned torch pulls a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/logicmap demo

test: install
	$(BIN)/python -m pytest -q

test-unit: install
	$(BIN)/python -m pytest -q tests/unit

lint: install
	$(BIN)/ruff check memory agents graphs tools prompts studio evals tests

clean:
	rm -rf $(VENV) .logicmap reports .pytest_cache
