# Two commands do all set-up on a fresh machine: `make up` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# `make up` installs only what running nodes needs; `make test` adds the extras, the test tools and
# the system parts the tests use. Each has its own stamp, so each reinstalls when pyproject.toml changes.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: install install-dev up test lint proto sim clean nats-cli

# The nats CLI (natscli), for the CLI comparison tests and bench/: built from source when Go is
# present (v0.5.1 is skipped on purpose), into .tools/bin, which git ignores.
NATSCLI_VERSION := v0.5.0
GO ?= $(shell command -v go 2>/dev/null || ls /usr/local/go/bin/go 2>/dev/null)
TOOLS_BIN := $(CURDIR)/.tools/bin

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	# System parts: Java 17 for PySpark, Prometheus (with promtool) for the deploy tests.
	command -v java >/dev/null || (apt-get update -q && apt-get install -y -q openjdk-17-jre-headless)
	command -v prometheus >/dev/null || (apt-get update -q && apt-get install -y -q prometheus)
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(RUN_STAMP)

install: $(RUN_STAMP)

install-dev: $(DEV_STAMP)

up: install
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

test: install-dev nats-cli
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -p no:cacheprovider

# Regenerate protobuf/gRPC code after editing a .proto file.
proto: install-dev
	for p in raft gateway; do \
	  if ls $$p/*.proto >/dev/null 2>&1; then \
	    $(BIN)/python -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. --pyi_out=. $$p/*.proto; \
	  fi; \
	done

sim: install
	$(BIN)/jetraft sim --seeds 2000 --first-seed 1

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info .tools
