# Two commands do all set-up on a fresh machine: `make up` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PACKAGES := subjects storage raft gateway cluster chaos pipeline local cli deploy
# `make up` installs only what running nodes needs; `make test` adds the extras, the test tools and
# the system parts the tests use. Each has its own stamp, so each reinstalls when pyproject.toml changes.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
# The hot-path modules setup.py compiles with mypyc (pyproject.toml [tool.jetraft] mypyc-modules): an
# install recompiles them when one changes, since the compiled .so files beside them are loaded instead.
COMPILED_SOURCES := $(shell sed -n '/^mypyc-modules/,/^]/p' pyproject.toml | grep -o '"[a-z_.]*"' | tr -d '"' | sed 's|\.|/|g; s|$$|.py|')
# After an install, one line says how many of them are compiled (pip -q hides setup.py's own lines).
SAY_COMPILED := $(BIN)/python -c 'import importlib, tomllib; \
  names = tomllib.load(open("pyproject.toml", "rb"))["tool"]["jetraft"]["mypyc-modules"]; \
  done = [n for n in names if not importlib.import_module(n).__file__.endswith(".py")]; \
  print(f"jetraft: {len(done)} of {len(names)} hot-path modules compiled with mypyc" \
        + ("" if done else " (plain Python; pip install -v -e . says why)"))'

# nats.js, the second client the tests drive (tests/natsjs/), pinned by its package-lock.json
NATSJS := tests/natsjs
NATSJS_STAMP := $(NATSJS)/node_modules/.installed

.PHONY: install install-dev natsjs nats-cli bytecode up test test-workers lint proto sim chaos clean compile uncompile

# The nats CLI (natscli), for the CLI comparison tests and bench/: built from source when Go is
# present (v0.5.1 is skipped on purpose), into .tools/bin, which git ignores.
NATSCLI_VERSION := v0.5.0
GO ?= $(shell command -v go 2>/dev/null || ls /usr/local/go/bin/go 2>/dev/null)
TOOLS_BIN := $(CURDIR)/.tools/bin

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(RUN_STAMP): pyproject.toml setup.py $(COMPILED_SOURCES) | $(BIN)/python
	$(BIN)/pip install -q -e .
	@$(SAY_COMPILED)
	touch $@

$(DEV_STAMP): pyproject.toml setup.py $(COMPILED_SOURCES) | $(BIN)/python
	# System parts: Java 17 for PySpark, Prometheus (with promtool) for the deploy tests.
	command -v java >/dev/null || (apt-get update -q && apt-get install -y -q openjdk-17-jre-headless)
	command -v prometheus >/dev/null || (apt-get update -q && apt-get install -y -q prometheus)
	$(BIN)/pip install -q -e '.[dev]'
	@$(SAY_COMPILED)
	touch $@ $(RUN_STAMP)

install: $(RUN_STAMP)

# Rebuild the compiled modules in place after editing one (an install does it too, more slowly), or remove
# them to run every module as Python (docs/compiled.md). JETRAFT_COMPILE=0 makes installs skip compiling.
# (mypy brings mypyc: installed first, at pyproject's build requirement, where only `make up` ran)
MYPY_REQUIREMENT := $(shell grep -o '"mypy[^"]*"' pyproject.toml | head -1 | tr -d '"')
compile: | $(BIN)/python
	$(BIN)/python -c 'import mypyc' 2>/dev/null || $(BIN)/pip install -q '$(MYPY_REQUIREMENT)'
	$(BIN)/python setup.py -q build_ext --inplace
	@$(SAY_COMPILED)

uncompile:
	find $(PACKAGES) -name '*.so' -delete

$(NATSJS_STAMP): $(NATSJS)/package-lock.json
	cd $(NATSJS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Without npm the nats.js tests are skipped (they say so), not failed.
natsjs:
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory $(NATSJS_STAMP); \
	else echo "npm not found: tests/natsjs will be skipped"; fi

install-dev: $(DEV_STAMP)

# Where PYTHONDONTWRITEBYTECODE is set (as on the VM this project is built on), Python caches no bytecode, and
# every node process compiled about 140 of jetraft's modules from source as it started: 0.4 s of CPU per
# process, a quarter of the node tests' time. Compiling them here (only what changed since) costs 1-2 s.
bytecode: | $(BIN)/python
	$(BIN)/python -m compileall -q -j0 -x node_modules $(PACKAGES) tests >/dev/null

up: install bytecode
	$(BIN)/jetraft local up --nodes 3 --mirror-nodes 1 --data-dir $${DATA_DIR:-./data}

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/lint-imports

$(TOOLS_BIN)/nats:
	GOBIN=$(TOOLS_BIN) $(GO) install github.com/nats-io/natscli/nats@$(NATSCLI_VERSION)

# Builds the CLI when Go is here; without Go the CLI tests skip themselves and say why.
nats-cli:
	@if [ -n "$(GO)" ]; then $(MAKE) --no-print-directory $(TOOLS_BIN)/nats; \
	else echo "go not found: the nats CLI is not built, its tests will be skipped"; fi

test: install-dev natsjs nats-cli bytecode
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -p no:cacheprovider

# The integration tests (every folder that starts nodes) with every node of two worker processes
# (`jetraft node --workers 2`, docs/architecture.md "Every core of the machine"). Not part of `make test`:
# CI must stay under 30 minutes, and this alone takes about as long as the whole suite.
WORKERS_TESTS := tests/node tests/cluster tests/chaos tests/cli tests/pipeline tests/natsjs tests/deploy tests/test_packaging.py
test-workers: install-dev natsjs nats-cli bytecode
	JETRAFT_TEST_WORKERS=2 $(BIN)/python -m pytest -q -p no:cacheprovider $(WORKERS_TESTS)

# Regenerate protobuf/gRPC code after editing a .proto file.
proto: install-dev
	for p in raft gateway; do \
	  if ls $$p/*.proto >/dev/null 2>&1; then \
	    $(BIN)/python -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. --pyi_out=. $$p/*.proto; \
	  fi; \
	done

sim: install
	$(BIN)/jetraft sim --seeds 2000 --first-seed 1

# The chaos matrix (docs/chaos.md): each workload under each fault set, CHAOS_SEEDS seeds, a fresh
# 3-node cluster per run, CHAOS_TIME seconds of faults each; the table goes to chaos-runs/matrix-*/table.md.
CHAOS_SEEDS ?= 1:5
CHAOS_TIME ?= 60
CHAOS_FAULT_SETS ?= kill/pause/partition/latency/all
chaos: install-dev
	$(BIN)/jetraft chaos matrix --workloads queue,register --fault-sets $(CHAOS_FAULT_SETS) \
	  --seeds $(CHAOS_SEEDS) --time $(CHAOS_TIME)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache build *.egg-info .tools $(NATSJS)/node_modules
	find $(PACKAGES) -name '*.so' -delete
