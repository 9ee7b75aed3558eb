# agentmem: `make demo`, `make psql` and `make test` work on a fresh clone with no manual step.
# A bare `make` lists the targets.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin
DATA   ?= .pgdata/embedded
# The database of `make migrate` / `make status`: AGENTMEM_DATABASE_URL when set, else the database
# agentmem of the embedded dev server (started if needed).
DB_URL = $(if $(AGENTMEM_DATABASE_URL),$(AGENTMEM_DATABASE_URL),$$($(BIN)/agentmem dev-server start --quiet --data-dir $(DATA)))


.PHONY: help venv demo demo-web psql examples test test-slow test-pooler screenshots inspect browser test-pg15 pg15 citus test-citus lint migrate status psql-script dist docs bench clean
.DEFAULT_GOAL := help

help:
	@echo "make demo         a narrated tour: venv, embedded PostgreSQL 18 + pgvector (.pgdata/), migrate"
	@echo "make demo-web     the same as a chat page in the browser (the inspector's /chat), its URL printed"
	@echo "make psql         psql on the dev server's database agentmem, migrated, as an application login (tenant acme), as its application login"
	@echo "make examples     the Node.js and Java programs of examples/ on the embedded server"
	@echo "make test         the whole suite on the embedded server (test-pg15, test-citus: the other two servers)"
	@echo "make test-slow    the security probes (marker slow, a few minutes): hostile tenant and inputs, kill -9"
	@echo "make test-pooler  the driver, the worker and the examples through PgBouncer in transaction mode"
	@echo "make inspect      agentmem inspect: the browser page over the dev server's database (tenant acme)"
	@echo "make screenshots  docs/inspect/*.png from the inspector's browser tests (tests/test_inspect.py, test_inspect_chat.py)"
	@echo "make lint         sqlfluff on the SQL, mypy on the clients"
	@echo "make migrate      install or upgrade agentmem (AGENTMEM_DATABASE_URL, default the dev server)"
	@echo "make status       its migrations, applied and pending"
	@echo "make psql-script  build/agentmem-install.psql, the psql-only installer"
	@echo "make dist         the release files in dist/: both wheels, agentmem-install.psql, SHA256SUMS"
	@echo "make docs         docs/api.md from the catalogue"
	@echo "make bench        the benchmarks (BENCH_ARGS=--quick for less)"
	@echo "make venv         only the virtualenv .venv (then . .venv/bin/activate puts agentmem on PATH)"
	@echo "make clean        stop the dev and test servers and delete .pgdata/"
	@echo "Ports: the dev server AGENTMEM_EMBEDDED_PORT (default 55418), the test server AGENTMEM_TEST_PORT (55419)"

# Two packages, both editable: the runtime pg-agentmem (python/: the driver, the migrator, the
# runtime commands) and the development tools pg-agentmem-dev (python/dev/: the dev server, agentmem
# psql, demo and docs, the bulk loader and the Ollama stub of the tests and benchmarks).
$(VENV)/.installed: python/pyproject.toml python/dev/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	@# the distribution is pg-agentmem (PyPI's agentmem is another project): drop a venv's older install
	-@$(BIN)/pip uninstall -q -y agentmem >/dev/null 2>&1
	$(BIN)/pip install -q hatchling -e './python[dev,plot,inspect,browser,mcp,ollama]' -e ./python/dev
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(BIN)/agentmem dev-server start --quiet --data-dir $(DATA) >/dev/null
	$(BIN)/agentmem demo --database-url "$$($(BIN)/agentmem dev-server url)"

# The seed's demo as a page: the inspector's chat on the dev server (database agentmem_chat), URL printed.
demo-web: venv
	$(BIN)/agentmem dev-server start --quiet --data-dir $(DATA) >/dev/null
	$(BIN)/agentmem demo --web --database-url "$$($(BIN)/agentmem dev-server url)" $(DEMO_WEB_ARGS)

# From nothing to a psql prompt: the dev server started, database agentmem migrated, an application
# login, tenant acme (agentmem psql --help).
psql: venv
	$(BIN)/agentmem psql --data-dir $(DATA)

# The Node.js and Java programs of examples/ against the embedded server (npm ci; the JDBC jar
# from Debian's libpostgresql-jdbc-java, installed when missing: needs root).
examples: venv
	VENV=$(VENV) DATA=$(DATA) bash scripts/examples.sh

test: venv browser
	$(BIN)/pytest -q tests

# The inspector's browser tests (tests/test_inspect.py) drive Debian's headless Chromium with Playwright,
# which cannot download a browser of its own here: install Debian's when it is missing (needs root).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
	  else echo "make: no /usr/bin/chromium: the inspector's browser tests are skipped (as root: apt-get install -y chromium chromium-driver)"; fi; \
	fi

# docs/inspect/*.png, written by the same browser tests (AGENTMEM_SCREENSHOTS=1).
screenshots: venv browser
	AGENTMEM_SCREENSHOTS=1 AGENTMEM_REQUIRE_BROWSER=1 $(BIN)/pytest -q tests/test_inspect.py tests/test_inspect_chat.py

# The inspector on the dev server's database as its application login (agentmem psql's), tenant acme.
inspect: venv
	@url=$$($(BIN)/agentmem dev-server start --data-dir $(DATA) 2>/dev/null) && \
	app=$$($(PY) -c 'import sys; from agentmem_dev.shell import prepare; print(prepare(sys.argv[1], tenant="acme"))' "$$url") && \
	$(BIN)/agentmem inspect --database-url "$$app" --tenant acme $(INSPECT_ARGS)

# The slow security probes (tests/test_security_probes.py, marker slow): their own embedded server.
test-slow: venv
	$(BIN)/pytest -q -m slow tests

# The pooler leg: Debian's PgBouncer (apt-get install pgbouncer) in pool_mode = transaction in front of
# the test server and the dev server (scripts/pgbouncer.sh, port AGENTMEM_POOLER_PORT, default 55421):
# the driver's tests (tests marked direct skipped), tests/test_pooling.py (tenants interleaved on fewer
# server connections, the local-tenant requirement, the worker) and the examples, all through it.
test-pooler: venv
	@# PgBouncer points at the test server of this checkout, started (or found running) first as the
	@# tests start it: on AGENTMEM_TEST_PORT, else 55419, else a free port when 55419 is taken.
	@upstream=$$($(PY) -c 'import os; from urllib.parse import urlsplit; from agentmem_dev import devserver; \
	  chosen = os.environ.get("AGENTMEM_TEST_PORT"); \
	  print(urlsplit(devserver.start(".pgdata/test", port=int(chosen or 55419), fast=True, \
	    port_variable="AGENTMEM_TEST_PORT", or_any_free_port=not chosen)).port)') && \
	AGENTMEM_POOLER_UPSTREAM_PORT=$$upstream bash scripts/pgbouncer.sh start >/dev/null
	@status=0; \
	AGENTMEM_TEST_POOLER_URL=$$(bash scripts/pgbouncer.sh url) $(BIN)/pytest -q tests/test_pooling.py tests/test_driver.py || status=1; \
	VENV=$(VENV) DATA=$(DATA) POOLER_URL=$$(bash scripts/pgbouncer.sh url) bash scripts/examples.sh || status=1; \
	bash scripts/pgbouncer.sh stop; exit $$status

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

# sqlfluff on the SQL; mypy on what a type checker sees of the clients (tests/typecheck_clients.py), and on
# the turn and the embedders, which reach the clients through their typed seams (TurnBase[M], Embedder).
lint: venv
	$(BIN)/sqlfluff lint sql migrations
	MYPYPATH=python $(BIN)/mypy --follow-imports=silent tests/typecheck_clients.py python/agentmem/mcp_server.py \
	  python/agentmem/turn_async.py python/agentmem/turn_sync.py python/agentmem/turn_parts.py python/agentmem/embed.py python/agentmem/lexical.py

migrate: venv
	$(BIN)/agentmem migrate --database-url "$(DB_URL)"

status: venv
	@# exit code 3: agentmem is not installed there, which status has said in words
	$(BIN)/agentmem status --database-url "$(DB_URL)" || [ $$? -eq 3 ]

# The psql-only install/upgrade script, generated (not kept among the sources).
psql-script: venv
	mkdir -p build
	$(BIN)/agentmem psql-script --source . -o build/agentmem-install.psql

# The release files (DIST, default dist/): the wheels of pg-agentmem and pg-agentmem-dev, the psql
# installer, and their checksums (sha256sum -c SHA256SUMS checks them). Built from the checkout
# with the venv's hatchling, without a download.
DIST ?= dist
dist: venv
	rm -rf $(DIST)
	mkdir -p $(DIST)
	$(BIN)/pip wheel -q --no-deps --no-build-isolation -w $(DIST) ./python ./python/dev
	$(BIN)/agentmem psql-script --source . -o $(DIST)/agentmem-install.psql
	cd $(DIST) && sha256sum *.whl agentmem-install.psql > SHA256SUMS
	@cat $(DIST)/SHA256SUMS

# The API reference, from the catalogue of the embedded server's database once migrated
# (tests/test_docs.py fails when the committed docs/api.md is not what this writes).
docs: venv
	$(BIN)/agentmem dev-server start --quiet --data-dir $(DATA) >/dev/null
	$(BIN)/agentmem migrate --database-url "$$($(BIN)/agentmem dev-server url)" >/dev/null
	$(BIN)/agentmem docs --database-url "$$($(BIN)/agentmem dev-server url)" -o docs/api.md

# The peers and the real model (torch 2.13.0 is the CPU build on disk); BENCH_ARGS=--quick for less.
bench: venv
	$(BIN)/pip install -q -e './python[dev,bench,mcp,ollama]'
	$(PY) bench/run.py $(BENCH_ARGS)

# Both embedded servers stop before their data goes: the dev server's and the test server's.
clean:
	-$(BIN)/agentmem dev-server stop --data-dir $(DATA)
	-$(BIN)/agentmem dev-server stop --data-dir .pgdata/test
	-bash scripts/pgbouncer.sh stop
	rm -rf .pgdata
