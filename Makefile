# gt4py_dace_xforms: every target sets up .venv (Python 3.12) on first use.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# python3.12 may be a pyenv shim that refuses to run; take the first one that works.
PYTHON312 ?= $(shell for p in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12; do \
	$$p -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1 && { echo $$p; break; }; done)
export GT4PY_BUILD_CACHE_DIR ?= $(CURDIR)/.gt4py_cache
export PIP_DISABLE_PIP_VERSION_CHECK := 1
PYTEST_ARGS ?=
BENCH_ARGS ?=
FUZZ_SECONDS ?= 1800
# LAYOUT=NAME (global, global-decomposed, lam, lam-decomposed; census-static also all): the
# index layout demo, bench, counts and census-static run on (tools/layouts.py, docs/layouts.md).
# Unset: demo, bench and counts take lam-decomposed (a production run's rank), census-static
# the global one-rank values.
LAYOUT ?=
GPU_CHECK_ARGS ?=
# NVIDIA's CUDA 13.0 compiler and headers from PyPI: the GPU machines' nvcc is 13.0.88.
# nvvm and crt pinned too: pip would otherwise take newer ones, whose PTX this ptxas rejects.
CUDA_WHEELS := nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 \
	nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85
GPU_STAMP := $(VENV)/.gpu-tools-13.0.88

.PHONY: venv venv-icon4py-pins test-icon4py-pins demo test test-slow test-fast lint fixtures bench bench-build bench-substep bench-model counts oracle calibrate fuzz census census-static census-compare clean gpu-tools gpu-check device-wheels device-dry-run

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -n "$(PYTHON312)" || { echo "error: no working python3.12 found" >&2; exit 2; }
	@test -x $(PY) || $(PYTHON312) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
	$(PY) -m pip install -q -e '.[test]' 2>&1 | grep -v '^WARNING: Location' || true
	# This environment runs the newest gt4py in range (1.2.3), so icon4py (which pins gt4py
	# 1.2.1) goes in without its dependencies; make venv-icon4py-pins resolves icon4py's own.
	$(PY) -m pip install -q --no-deps 'icon4py-common==0.4.1' 'icon4py-atmosphere-dycore==0.4.1' 'icon4py-atmosphere-diffusion==0.4.1' 2>&1 | grep -v '^WARNING: Location' || true
	# What icon4py's modules import that gt4py does not bring (xarray: its metrics programs;
	# serialbox4py: its grid package, for the simple test grid that explain/census lower on;
	# netCDF4: its grid manager, reading the grid file `gt4py-dace-xforms grid` writes).
	$(PY) -m pip install -q 'cattrs>=26.1.0' 'pyyaml>=6.0.3' 'xarray' 'serialbox4py>=2.6.2' 'netCDF4' 2>&1 | grep -v '^WARNING: Location' || true
	$(PY) -c 'import gt4py_dace_xforms, gt4py.next, dace, icon4py.model.atmosphere.dycore.stencils.compute_cell_diagnostics_for_dycore'
	@touch $(STAMP)

# A second environment with icon4py 0.4.1's own pins (gt4py 1.2.1), resolved by pip without
# --no-deps: the icon4py-path tests and a substep program built stock and with the library.
PINS_VENV := .venv-icon4py-pins
PINS_STAMP := $(PINS_VENV)/.installed
PINS_TESTS ?= tests/test_build_modes.py tests/test_install.py tests/test_integration.py
venv-icon4py-pins: $(PINS_STAMP)

$(PINS_STAMP): pyproject.toml
	@test -n "$(PYTHON312)" || { echo "error: no working python3.12 found" >&2; exit 2; }
	@test -x $(PINS_VENV)/bin/python || $(PYTHON312) -m venv $(PINS_VENV)
	$(PINS_VENV)/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
	set -o pipefail; $(PINS_VENV)/bin/python -m pip install -q 'icon4py-atmosphere-dycore==0.4.1' \
		'icon4py-atmosphere-diffusion==0.4.1' 'xarray' 'netCDF4' -e '.[test]' 2>&1 | { grep -v '^WARNING: Location' || true; }
	$(PINS_VENV)/bin/python -c 'import gt4py, icon4py.model.atmosphere.dycore.solve_nonhydro, gt4py_dace_xforms; print("gt4py", gt4py.__version__)'
	@touch $(PINS_STAMP)

test-icon4py-pins: $(PINS_STAMP)
	GT4PY_DACE_XFORMS_TEST_BUILD=$(CURDIR)/.build/icon4py-pins $(PINS_VENV)/bin/python -m pytest -q $(PYTEST_ARGS) $(PINS_TESTS)

demo: $(STAMP)
	$(VENV)/bin/gt4py-dace-xforms demo $(if $(LAYOUT),--layout $(LAYOUT))

# The CUDA compile test (tests/test_cuda_codegen.py) needs nvcc: install it, but let the
# rest of the suite run (and that test skip, saying why) where PyPI cannot be reached.
# Tests marked slow (whole icon4py components built: tests/test_model_bench.py) are left out;
# make test-slow runs them.
test: $(STAMP)
	@$(MAKE) --no-print-directory $(GPU_STAMP) || echo "warning: NVIDIA's CUDA wheels could not be installed: the CUDA compile test will be skipped" >&2
	$(PY) -m pytest -n 2 -q -m "not slow" $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not compile" $(PYTEST_ARGS)

# ruff (format and lint) and mypy as pyproject.toml configures them (gt4py's settings); the
# lint extra (pinned ruff and mypy, pre-commit) goes into .venv on first use only, so make
# test does not install it. pre-commit install runs the same checks on each commit.
LINT_STAMP := $(VENV)/.lint-installed
$(LINT_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[lint]' 2>&1 | grep -v '^WARNING: Location' || true
	$(VENV)/bin/ruff --version && $(VENV)/bin/mypy --version
	@touch $(LINT_STAMP)

lint: $(LINT_STAMP)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

fixtures: $(STAMP)
	$(PY) sdfg_fixtures/generate.py

bench: $(STAMP)
	$(PY) bench/bench.py $(if $(LAYOUT),--layout $(LAYOUT)) $(BENCH_ARGS)

# What the library costs at build time: the substep's programs as a model run builds them,
# gt_auto_optimize per program (one at a time) and the build wall time with gt4py's default
# parallel builds, stock vs library (bench/build_time.py; BUILD_ARGS: see --help).
BUILD_ARGS ?= --json bench/build/build_time.json
bench-build: $(STAMP)
	$(PY) bench/build_time.py $(if $(LAYOUT),--layout $(LAYOUT)) $(BUILD_ARGS)

# One dycore substep (icon4py's SolveNonhydro.time_step), stock vs the library, per program and
# summed (docs/substep.md; SUBSTEP_ARGS: see bench/substep.py --help, e.g. --counts, --json OUT).
SUBSTEP_ARGS ?=
bench-substep: $(STAMP)
	$(PY) bench/substep.py $(if $(LAYOUT),--layout $(LAYOUT)) $(SUBSTEP_ARGS)

# icon4py's SolveNonhydro (5 substeps) and Diffusion built by icon4py from the generated torus
# grid file, stock (icon4py's dace_cpu) vs the library through icon4py's backend path, per
# allocator regime; run files in bench/model/ (docs/model_bench.md; BENCH_ARGS: see
# bench/model.py --help, e.g. --cells 1280 --levels 10).
bench-model: $(STAMP)
	$(PY) bench/model.py $(BENCH_ARGS)

# Instructions and simulated last-level misses of one call per build, under callgrind
# (gt4py_dace_xforms/measure/counts.py; COUNTS_ARGS: see bench/counts.py --help).
COUNTS_ARGS ?=
counts: $(STAMP)
	$(PY) bench/counts.py $(if $(LAYOUT),--layout $(LAYOUT)) $(COUNTS_ARGS)

# One program's decision sets timed against each other: the cost model's regret (bench/README.md).
ORACLE_ARGS ?= --program target
oracle: $(STAMP)
	$(PY) bench/oracle.py $(ORACLE_ARGS)

# The CPU model's constants fitted to the oracle runs and a bench run (no compilation; bench/README.md).
CALIBRATE_ARGS ?=
calibrate: $(STAMP)
	$(PY) bench/calibrate.py $(CALIBRATE_ARGS)

# How much of icon4py's programs the inliner reaches (no compilation; CENSUS_ARGS: see --help).
CENSUS_ARGS ?= --jobs 2
census: $(STAMP)
	$(VENV)/bin/gt4py-dace-xforms census $(CENSUS_ARGS) --json bench/census.json | tee bench/census.txt

# The same census with bounds and switches as static arguments, as icon4py's model run compiles
# them (docs/static.md; the 15 concat_where programs by default).
CENSUS_STATIC_ARGS ?= --concat-only --jobs 2
census-static: $(STAMP)
	set -o pipefail; $(VENV)/bin/gt4py-dace-xforms census --static $(if $(LAYOUT),--layout $(LAYOUT)) $(CENSUS_STATIC_ARGS) --json bench/census_static.json \
		| tee bench/census_static.txt

# The same programs compiled stock, with the default backend and with everything sound, run on
# the same random inputs, outputs compared (compiles 3 builds per program: hours on 2 cores).
CENSUS_COMPARE_ARGS ?= --concat-only --jobs 2
census-compare: $(STAMP)
	set -o pipefail; $(VENV)/bin/gt4py-dace-xforms census --compare $(CENSUS_COMPARE_ARGS) --json bench/census_compare.json \
		| tee bench/census_compare.txt

# Generated gt4py programs, stock vs library vs numpy, for FUZZ_SECONDS (tests/fuzzing/).
fuzz: $(STAMP)
	FUZZ_SECONDS=$(FUZZ_SECONDS) $(PY) tests/fuzzing/run_fuzz.py

gpu-tools: $(GPU_STAMP)

$(GPU_STAMP): $(STAMP)
	$(PY) -m pip install -q $(CUDA_WHEELS) 2>&1 | grep -v '^WARNING: Location' || true
	$(PY) -c 'from gt4py_dace_xforms.measure.cuda_check import find_cuda_toolkit as f; t = f(); \
		assert t is not None and t.source == "wheel", t; print("nvcc", t.version, t.nvcc)'
	@touch $(GPU_STAMP)

# CUDA code of the seed programs and the target (cost model and everything sound),
# generated through the library's GPU backend and compiled with nvcc -c for sm_90; no GPU.
gpu-check: $(GPU_STAMP)
	$(PY) bench/gpu_check.py $(GPU_CHECK_ARGS)

# The GPU machine's run (bench/device/): its wheels into .whl/ (checked under 60 MiB), then a
# dry run here: a fresh venv holding what the GPU image holds, installing from .whl/ only.
DRY_VENV := .build/device-dry-run-venv
device-wheels: $(STAMP)
	$(PY) bench/device/build_wheels.py

device-dry-run:
	@test -n "$$(ls .whl/*.whl 2>/dev/null)" || { echo "error: no wheels in .whl/: run make device-wheels first" >&2; exit 2; }
	@test -n "$(PYTHON312)" || { echo "error: no working python3.12 found" >&2; exit 2; }
	rm -rf $(DRY_VENV)
	$(PYTHON312) -m venv $(DRY_VENV)
	$(DRY_VENV)/bin/python -m pip install -q numpy sympy networkx mpmath 2>&1 | grep -v '^WARNING: Location' || true
	$(DRY_VENV)/bin/python bench/device/run.py --dry-run

clean:
	rm -rf $(VENV) $(PINS_VENV) .gt4py_cache .dacecache .pytest_cache
