# The two commands: `make demo` and `make test`. Everything else is a helper for them.
SHELL := /bin/bash
# python3.12 gets the newest JAX; python3 (3.11 here) runs the oldest supported one, 0.10.2.
# Python 3.12: `python3.12` on PATH, else a 3.12 that pyenv has installed (active or not).
PY312 := $(shell for p in python3.12 \
	  $$(command -v pyenv >/dev/null 2>&1 && for v in $$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12(\.[0-9]+)?$$' | sort -rV); \
	     do PYENV_VERSION=$$v pyenv which python3.12 2>/dev/null; done); \
	  do $$p -c 'import sys' >/dev/null 2>&1 && { echo $$p; break; }; done)
PYTHON ?= $(if $(PY312),$(PY312),python3)
PY_OLDEST ?= python3.11
VENV := .venv
VENV_OLDEST := .venv-jax010
CHROMIUM := /usr/bin/chromium

.PHONY: demo lab test test-device accel-check lint bench venv venv-oldest chromium js clean

$(VENV)/.stamp: pyproject.toml hatch_build.py $(wildcard js/package*.json) $(wildcard js/src/*)
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -U pip
	$(VENV)/bin/pip install -q -e '.[test,ui]'
	touch $@

venv: $(VENV)/.stamp

# The oldest supported JAX (0.10.2) on Python 3.11, for the core tests.
$(VENV_OLDEST)/.stamp: pyproject.toml hatch_build.py
	test -d $(VENV_OLDEST) || $(PY_OLDEST) -m venv $(VENV_OLDEST)
	$(VENV_OLDEST)/bin/pip install -q -U pip
	$(VENV_OLDEST)/bin/pip install -q 'jax==0.10.2' 'jaxlib==0.10.2'
	$(VENV_OLDEST)/bin/pip install -q -e '.[test]' 'jax==0.10.2' 'jaxlib==0.10.2'
	touch $@

venv-oldest: $(VENV_OLDEST)/.stamp

# Debian's Chromium for the browser tests (never `playwright install`: it downloads a browser).
chromium:
	@test -x $(CHROMIUM) || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium graphviz; }
	@command -v dot >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz; }

# The widget bundle (also built by `pip install`, through hatch_build.py); esbuild takes ~0.1 s.
js:
	cd js && { test -d node_modules || npm ci --no-audit --no-fund; } && npm run build --silent

demo: venv js
	$(VENV)/bin/python tools/demo.py notebooks/quickstart.ipynb reports/quickstart.html

lab: venv
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/quickstart.ipynb

# Habits: ruff (lint and format) and mypy on jaxviz/ with zero findings; the view's unit tests.
lint: venv js
	@echo "== ruff, mypy, node --test"
	$(VENV)/bin/ruff check jaxviz
	$(VENV)/bin/ruff format --check jaxviz
	$(VENV)/bin/mypy
	cd js && npm test --silent

# The suite on every core (pytest-xdist, the test extra): tests go to whichever worker is free,
# except those that share an expensive fixture, kept on one worker (tests/scheduling.py: the
# JupyterLab server's tests; a module's shared trace). TEST_WORKERS=0 runs it in one process.
# Each run ends with its 15 slowest tests (the suite's time on 2 cores is issue 56's).
TEST_WORKERS ?= auto
PYTEST_N := -n $(TEST_WORKERS)

test: venv venv-oldest chromium js lint
	@echo "== jax (newest) on $$($(VENV)/bin/python -V): the whole suite"
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider --durations=15 $(PYTEST_N)
	@echo "== jax 0.10.2 on $$($(VENV_OLDEST)/bin/python -V): everything but the browser tests"
	$(VENV_OLDEST)/bin/python -m pytest -q -p no:cacheprovider --durations=15 -m "not browser" $(PYTEST_N)

# On a machine with a TPU or GPU (docs/accelerator.md: its Python, the project's dependencies
# installed or on PYTHONPATH). test-device: the suite but the browser and kernel tests (they need
# sockets), split by tests/scheduling.py's DEVICE_FILES: those in one process that holds the
# accelerator (it says how many ran there), the others at the same time beside it on the
# host's other cores, as CPU-only workers (their log follows; pytest-benchmark, which refuses
# xdist, off there), under tools/host_memory_guard.py (it kills the largest CPU-only worker before
# the host runs out of memory: xdist then names its test). accel-check: the accelerator's own figures (bench/accel_check.py; it
# skips, saying why, without one).
PY_DEVICE ?= python3
# (one per 4 GiB of the host's memory beyond 16 GiB, at most nproc - 2: the process that holds
# a TPU takes 13-15 GiB of host memory; on a TPU v5e host (13 cores, 40 GiB) the two halves
# together ran out of host memory with 11 workers and again with 4, cause not measured, while
# a CPU-only JAX process there holds 480 MiB: docs/accelerator.md)
DEVICE_CPU_WORKERS ?= $(shell n=$$(nproc); m=$$(awk '/MemTotal/ {print int($$2 / 4194304) - 4}' /proc/meminfo); \
	w=$$(( n - 2 < m ? n - 2 : m )); echo $$(( w > 1 ? w : 1 )))
# Each CPU-only worker may map at most 16 GiB: a test that asks XLA for more gets XLA's
# out-of-memory error, as on a host of less memory, not the host's OOM killer (a CPU-only worker
# took 32 GiB in 2 s on the TPU host, December 2026; here, with 23 GiB, XLA refuses it).
DEVICE_CPU_WORKER_VM_KIB ?= 16777216
test-device:
	@mkdir -p test-artifacts
	@echo "== on the device: tests/scheduling.py's DEVICE_FILES; beside it, $(DEVICE_CPU_WORKERS) CPU-only workers run the rest"
	@rm -rf test-artifacts/running; mkdir -p test-artifacts/running; \
	  export JAXVIZ_TEST_RUNNING_DIR=$$PWD/test-artifacts/running; \
	  $(PY_DEVICE) tools/host_memory_guard.py test-artifacts/host-memory.log --running $$JAXVIZ_TEST_RUNNING_DIR & guard=$$!; \
	  ( ulimit -v $(DEVICE_CPU_WORKER_VM_KIB); JAX_PLATFORMS=cpu exec $(PY_DEVICE) -m pytest -q -p no:cacheprovider -p no:benchmark -n $(DEVICE_CPU_WORKERS) \
	    -m "not device and not browser and not kernel" ) > test-artifacts/test-device-cpu.log 2>&1 & cpu=$$!; \
	  $(PY_DEVICE) -m pytest -q -p no:cacheprovider --on-device -m "not browser and not kernel"; dev=$$?; \
	  wait $$cpu; host=$$?; kill $$guard; wait $$guard; \
	  echo "== the CPU-only workers (test-artifacts/test-device-cpu.log)"; tail -n 40 test-artifacts/test-device-cpu.log; \
	  echo "== the host's memory (tools/host_memory_guard.py)"; tail -n 20 test-artifacts/host-memory.log; \
	  exit $$(( dev || host ))

accel-check:
	$(PY_DEVICE) bench/accel_check.py

# Every benchmark on the newest JAX; the overhead ones (cells, dispatch, soak) again on the
# oldest supported JAX (0.10.2, Python 3.11: no sys.monitoring, JAX's Python dispatch path).
bench: venv venv-oldest js chromium
	$(VENV)/bin/python -m bench
	@echo "== jax 0.10.2 on $$($(VENV_OLDEST)/bin/python -V): the overhead benchmarks"
	$(VENV_OLDEST)/bin/python -m bench cells magic dispatch reply soak live_arrays

clean:
	rm -rf $(VENV) $(VENV_OLDEST) jaxviz/static/*.js js/node_modules reports test-artifacts
