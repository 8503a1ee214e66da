# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check lint typecheck bench bench-quick bench-micro clean

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

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache
