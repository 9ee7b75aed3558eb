# agentmem: `make demo` and `make test` work on a fresh clone with no manual step.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin
DATA   ?= .pgdata/embedded
# The embedded server of `make demo`/`make migrate`; override to use your own.
AGENTMEM_DATABASE_URL ?= $(shell $(BIN)/agentmem dev-server url 2>/dev/null)

.PHONY: venv demo examples test test-pg15 pg15 citus test-citus lint migrate status psql-script docs bench clean
.DEFAULT_GOAL := test

$(VENV)/.installed: python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q hatchling -e './python[dev,plot]'
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(BIN)/agentmem dev-server start --data-dir $(DATA) >/dev/null
	$(BIN)/agentmem demo --database-url "$$($(BIN)/agentmem dev-server url)"

# The Node.js and Java programs of examples/ against the embedded server (npm ci; the JDBC jar
# from Debian's libpostgresql-jdbc-java, installed when missing: needs root).
examples: venv
	VENV=$(VENV) DATA=$(DATA) bash scripts/examples.sh

test: venv
	$(BIN)/pytest -q tests

# The second real server: Debian's PostgreSQL 15 + pg_cron + pgvector 0.8.0 (needs root).
pg15:
	bash scripts/pg15-debian.sh install
	bash scripts/pg15-debian.sh start

test-pg15: venv pg15
	AGENTMEM_TEST_SERVER=debian15 AGENTMEM_REQUIRE_PG_CRON=1 $(BIN)/pytest -q tests

# The third: Citus 14.0.1 (built from ../shared/vendor) on the embedded PostgreSQL 18, a coordinator
# and two workers on loopback; the tests run against a distributed installation (needs root for apt).
citus: venv
	bash scripts/citus.sh install
	bash scripts/citus.sh start

test-citus: venv citus
	AGENTMEM_TEST_SERVER=citus $(BIN)/pytest -q tests

# sqlfluff on the SQL; mypy on what a type checker sees of the clients (tests/typecheck_clients.py).
lint: venv
	$(BIN)/sqlfluff lint sql migrations
	MYPYPATH=python $(BIN)/mypy --follow-imports=silent tests/typecheck_clients.py

migrate: venv
	$(BIN)/agentmem migrate --database-url "$(AGENTMEM_DATABASE_URL)"

status: venv
	$(BIN)/agentmem status --database-url "$(AGENTMEM_DATABASE_URL)"

# The psql-only install/upgrade script, generated (not kept among the sources).
psql-script: venv
	mkdir -p build
	$(BIN)/agentmem psql-script --source . -o build/agentmem-install.psql

# The API reference, from the catalogue of the embedded server's database once migrated
# (tests/test_docs.py fails when the committed docs/api.md is not what this writes).
docs: venv
	$(BIN)/agentmem dev-server start --data-dir $(DATA) >/dev/null
	$(BIN)/agentmem migrate --database-url "$$($(BIN)/agentmem dev-server url)" >/dev/null
	$(BIN)/agentmem docs --database-url "$$($(BIN)/agentmem dev-server url)" -o docs/api.md

# The peers and the real model (torch 2.13.0 is the CPU build on disk); BENCH_ARGS=--quick for less.
bench: venv
	$(BIN)/pip install -q -e './python[dev,bench]'
	$(PY) bench/run.py $(BENCH_ARGS)

clean:
	-$(BIN)/agentmem dev-server stop --data-dir $(DATA)
	rm -rf .pgdata
