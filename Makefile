# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast check lint typecheck interop bench bench-quick bench-micro clean

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
# Test workers (pytest-xdist): the tests mostly wait on loopback I/O and child processes, so
# workers beat cores (figures for three and four: README.md, Tests). loadgroup: test by test,
# except the modules marked xdist_group, which share one expensive module fixture on one worker.
PYTEST_WORKERS ?= 3
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadgroup

# The npm packages some tests run with node (DIR:PACKAGE), installed exactly as their lock files
# pin them when npm is there. Every other tool the suite drives is a Debian package: README.md
# names them; the run's header and summary name those missing (their tests skip, -rs says why).
INTEROP := tests/interop/oidc-provider:oidc-provider \
	tests/interop/conformance:@modelcontextprotocol/conformance

interop:
	@for entry in $(INTEROP); do \
		dir=$${entry%%:*}; package=$${entry#*:}; \
		test -e "$$dir/node_modules/$$package/package.json" && continue; \
		if command -v npm >/dev/null 2>&1; then \
			echo "npm ci --prefix $$dir"; \
			npm ci --prefix "$$dir" --no-audit --no-fund --loglevel=error || exit 1; \
		else \
			echo "note: npm is not installed, so $$package is not (apt-get install -y nodejs npm)"; \
		fi; \
	done

# Every test (CI runs this); each worker picks ports from its own slice (tests/support/ports.py).
test: check interop
	$(BIN)/pytest -q -rs $(PYTEST_PARALLEL) $(PYTEST_OPTS)

# For developers: without the slow interop, load and gateway-process tests.
test-fast: check
	$(BIN)/pytest -q -rs $(PYTEST_PARALLEL) -m "not slow" $(PYTEST_OPTS)

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
