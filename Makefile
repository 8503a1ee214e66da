# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check lint typecheck bench bench-quick bench-micro build-compiled test-compiled clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "error: Python >= 3.11 is required; run e.g. 'make PYTHON=python3.12 $(MAKECMDGOALS)'" >&2; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || \
		{ echo "error: '$(PYTHON) -m venv' failed; install the venv module (Debian/Ubuntu: apt install python3-venv)" >&2; exit 1; }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Options of `mcp-gateway demo`, e.g. make demo DEMO_ARGS="--port 8090 --tokens jwt".
DEMO_ARGS ?=

demo: $(STAMP)
	$(BIN)/mcp-gateway demo $(DEMO_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check gateway tests scripts
	$(BIN)/ruff format --check gateway tests scripts

typecheck: $(STAMP)
	$(BIN)/mypy --strict gateway scripts

check: lint typecheck

PYTEST_OPTS ?=

test: check
	$(BIN)/pytest -q $(PYTEST_OPTS)

# The comparison of issue 18 at the defaults and the tuned case, beside a bare aiohttp backend:
# gateway pinned to core 0, wrk on core 1 (needs wrk and taskset); about 11 minutes.
bench: $(STAMP)
	$(BIN)/python scripts/bench.py

# The same phases, one short round each (about 2 minutes): a smoke run, not figures.
bench-quick: $(STAMP)
	$(BIN)/python scripts/bench.py --quick

# In-process microbenchmarks of the pieces (front door, protocol, observer, JWT, assertions).
bench-micro: $(STAMP)
	$(BIN)/python scripts/bench_micro.py

# The mypyc-compiled core (setup.py's COMPILED_MODULES), non-editable, in its own venv so that
# `make test` keeps running the pure-Python reference; needs a C compiler and the Python headers.
# The wheel is built once (build/compiled-wheel/) and installed from there, so adding the test
# extras (test-compiled) never rebuilds it uncompiled.
COMPILED_VENV := .venv-compiled
COMPILED_WHEEL_DIR := build/compiled-wheel
COMPILED_EXTRAS ?=

build-compiled:
	test -x $(COMPILED_VENV)/bin/python || $(PYTHON) -m venv $(COMPILED_VENV)
	rm -rf build  # setuptools reuses build/lib: a module dropped from the list would stay compiled
	MCP_GATEWAY_COMPILE=1 $(COMPILED_VENV)/bin/python -m pip wheel --quiet --no-deps \
		--wheel-dir $(COMPILED_WHEEL_DIR) .
	$(COMPILED_VENV)/bin/python -m pip install --quiet --no-deps --force-reinstall $(COMPILED_WHEEL_DIR)/*.whl
	$(COMPILED_VENV)/bin/python -m pip install --quiet "$$(echo $(COMPILED_WHEEL_DIR)/*.whl)$(COMPILED_EXTRAS)"
	$(COMPILED_VENV)/bin/mcp-gateway version | grep -qx 'core: compiled (mypyc)' || \
		{ $(COMPILED_VENV)/bin/mcp-gateway version; echo "error: the build is not compiled" >&2; exit 1; }
	$(COMPILED_VENV)/bin/mcp-gateway version

# The suite (or COMPILED_TESTS, a subset) against that compiled install: MCP_GATEWAY_COMPILED=1
# makes tests/conftest.py import the installed package instead of the checkout's gateway/.
COMPILED_TESTS ?=

test-compiled:
	$(MAKE) build-compiled COMPILED_EXTRAS='[dev]'
	MCP_GATEWAY_COMPILED=1 $(COMPILED_VENV)/bin/pytest -q $(PYTEST_OPTS) $(COMPILED_TESTS)

clean:
	rm -rf $(VENV) $(COMPILED_VENV) build .pytest_cache .mypy_cache .ruff_cache
