# gt4py_dace_xforms: every target sets up .venv (Python 3.12) on first use.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# python3.12 may be a pyenv shim that refuses to run; take the first one that works.
PYTHON312 ?= $(shell for p in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12; do \
	$$p -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1 && { echo $$p; break; }; done)
export GT4PY_BUILD_JOBS := 0
export GT4PY_BUILD_CACHE_DIR ?= $(CURDIR)/.gt4py_cache
export PIP_DISABLE_PIP_VERSION_CHECK := 1
PYTEST_ARGS ?=
BENCH_ARGS ?=
FUZZ_SECONDS ?= 1800

.PHONY: venv demo test test-fast fixtures bench fuzz census clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -n "$(PYTHON312)" || { echo "error: no working python3.12 found" >&2; exit 2; }
	@test -x $(PY) || $(PYTHON312) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
	$(PY) -m pip install -q -e '.[test]' 2>&1 | grep -v '^WARNING: Location' || true
	# icon4py pins gt4py 1.2.1 but runs with 1.2.3: install it without its dependencies.
	$(PY) -m pip install -q --no-deps 'icon4py-common==0.4.1' 'icon4py-atmosphere-dycore==0.4.1' 'icon4py-atmosphere-diffusion==0.4.1' 2>&1 | grep -v '^WARNING: Location' || true
	# What icon4py's modules import that gt4py does not bring (xarray: its metrics programs;
	# serialbox4py: its grid package, for the simple test grid that explain/census lower on).
	$(PY) -m pip install -q 'cattrs>=26.1.0' 'pyyaml>=6.0.3' 'xarray' 'serialbox4py>=2.6.2' 2>&1 | grep -v '^WARNING: Location' || true
	$(PY) -c 'import gt4py_dace_xforms, gt4py.next, dace, icon4py.model.atmosphere.dycore.stencils.compute_cell_diagnostics_for_dycore'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/gt4py-dace-xforms demo

test: $(STAMP)
	$(PY) -m pytest -n 2 -q $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not compile" $(PYTEST_ARGS)

fixtures: $(STAMP)
	$(PY) sdfg_fixtures/generate.py

bench: $(STAMP)
	$(PY) bench/bench.py $(BENCH_ARGS)

# How much of icon4py's programs the inliner reaches (no compilation; CENSUS_ARGS: see --help).
CENSUS_ARGS ?= --jobs 2
census: $(STAMP)
	$(VENV)/bin/gt4py-dace-xforms census $(CENSUS_ARGS) --json bench/census.json | tee bench/census.txt

# Generated gt4py programs, stock vs library vs numpy, for FUZZ_SECONDS (tests/fuzzing/).
fuzz: $(STAMP)
	FUZZ_SECONDS=$(FUZZ_SECONDS) $(PY) tests/fuzzing/run_fuzz.py

clean:
	rm -rf $(VENV) .gt4py_cache .dacecache .pytest_cache
