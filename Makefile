# tilelang-devtools: `make help` lists the targets.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.setup-stamp
TRACE  ?= out/examples.trace.jsonl

.DEFAULT_GOAL := help
.PHONY: help setup demo test lint format bench clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@command -v dot >/dev/null 2>&1 || { apt-get install -y graphviz >/dev/null 2>&1 || sudo apt-get install -y graphviz >/dev/null 2>&1 || echo "warning: install Graphviz (the 'dot' program) for passviz drawings"; }
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP) ## Make the environment in .venv (idempotent; a second run is quick)

demo: setup ## Record every bundled example on every backend, print the summary and time per pass
	@mkdir -p $(dir $(TRACE))
	$(VENV)/bin/irtrace record --manifest examples/irtrace.toml -o $(TRACE)
	$(VENV)/bin/irtrace show $(TRACE) --by-pass

test: setup ## Run the test suite
	$(PY) -m pytest -q

lint: setup ## ruff (format and lint) and mypy (strict on the irtrace core)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

format: setup ## Apply ruff's formatting and fixes
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: setup ## Run the benchmarks in bench/ (each ends with a RESULT line)
	$(PY) bench/trace_overhead.py
	$(PY) bench/diff_speed.py
	$(PY) bench/tui_open.py
	$(PY) bench/lsp_latency.py

clean: ## Remove build outputs (keeps .venv)
	rm -rf out .pytest_cache .ruff_cache .mypy_cache *.egg-info
