# One command from nothing: `make test` builds .venv and runs lint, types and the suite;
# `make demo` builds .venv and starts the offline demo (the bot and a local Slack page).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The browser test drives Debian's Chromium (never a downloaded browser).
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Extra arguments for `countersign demo`, e.g. `make demo ARGS="--port 8080"`.
ARGS ?=
# Python keeps the bytecode it compiles (in __pycache__/, gitignored) whatever the shell says:
# where PYTHONDONTWRITEBYTECODE is set, as on our CI machines, every pytest worker and every
# process a test starts compiled the project and the tests again (docs/benchmarks.md, "Suite time").
unexport PYTHONDONTWRITEBYTECODE
# The tests run in this many processes (pytest-xdist): twice a 2-CPU machine's cores, as much
# of a test's time is spent waiting (on worker processes, PostgreSQL, leases); `make fast` too,
# though each process pays ~10 CPU-s collecting (docs/benchmarks.md, "Suite time"). JOBS=0
# runs them in pytest's own.
JOBS ?= 4
# The CrewAI release CI and `make venv` install, one of the range pyproject.toml supports.
CREWAI_CI := 1.15.30
# `make compat`: the crew-shape and provider tests on the oldest, a middle and the newest CrewAI
# release of the range ("newest": the newest pip finds inside it), each in a throwaway venv
# under .compat/ (gitignored), on SQLite (what a CrewAI release changes is not storage). Not
# part of `make test`: 3 to 20 minutes a release on 2 CPUs, by how busy they are.
COMPAT_VERSIONS ?= 1.15.19 1.15.25 newest
COMPAT_TESTS ?= tests/runtime/test_durable.py tests/runtime/test_delegation.py tests/runtime/test_flow_crews.py \
  tests/runtime/test_typed.py tests/runtime/test_crew_options.py tests/runtime/test_event_listeners.py \
  tests/runtime/test_gates.py tests/runtime/test_parallel_gates.py tests/runtime/test_quiet_pauses.py \
  tests/runtime/test_providers.py tests/runtime/test_provider_shapes.py tests/runtime/test_compat.py
COMPAT_SELECT ?= not postgres

.PHONY: test check lint types unit fast venv demo bench clean compat

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' 'crewai==$(CREWAI_CI)'
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: $(STAMP)
	$(BIN)/mypy

$(CHROMIUM):
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
	  || ($(SUDO) apt-get update -qq \
	      && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

unit: $(STAMP) $(CHROMIUM)
	$(BIN)/python -m pytest -n $(JOBS) --dist worksteal

demo: $(STAMP)
	$(BIN)/countersign demo $(ARGS)

# mypy (about 45 s on a cold cache) runs beside the suite, which spends much of its time
# waiting on the processes it starts.
test: lint
	$(MAKE) --no-print-directory -j2 types unit

# The loop while working: lint, then types beside the tests that start no process. mypy keeps
# its cache in .mypy_cache (only `make clean` removes it): about 1 s of CPU when warm, 39 s cold.
check: lint
	$(MAKE) --no-print-directory -j2 types fast

fast: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --dist worksteal -m "not slow" -q

bench: $(STAMP)
	$(BIN)/python bench/waiting.py
	$(BIN)/python bench/resume.py
	$(BIN)/python bench/ack_latency.py
	$(BIN)/python bench/demo_start.py
	$(BIN)/python bench/chaos.py
	$(BIN)/python bench/outbox.py
	$(BIN)/python bench/wakeup.py
	$(BIN)/python bench/batch.py
	$(BIN)/python bench/concurrency.py
	$(BIN)/python bench/rules.py

compat:
	$(PY) .ci/compat.py --tests "$(COMPAT_TESTS)" -k "$(COMPAT_SELECT)" --jobs 2 $(COMPAT_VERSIONS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .compat
