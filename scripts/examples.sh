#!/usr/bin/env bash
# `make examples`: the Node.js and Java programs of examples/ against the embedded server.
# Installs what they need (npm ci; Debian's JDBC driver when /usr/share/java/postgresql.jar is
# missing, which needs root), starts the embedded server, (re)creates the database
# agentmem_examples, migrates it, makes the login agentmem_example_app an application role
# granted the tenants example-*,
# then runs both programs; fails if either does. With POOLER_URL (postgresql://HOST:PORT of a PgBouncer
# in transaction mode in front of the dev server: make test-pooler) the programs connect through it,
# JDBC with prepareThreshold=0 (no server-side prepared statements: docs/pooling.md).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${VENV:-.venv}/bin
DATA=${DATA:-.pgdata/embedded}
DB=agentmem_examples
APP=agentmem_example_app
JAR=/usr/share/java/postgresql.jar

die() { echo "examples.sh: ERROR: $*" >&2; exit 1; }
command -v node >/dev/null || die "node is not on PATH (Node.js 18 or later)"
command -v java >/dev/null || die "java is not on PATH (Java 17 or later)"

if [[ ! -f $JAR ]]; then
  [[ $(id -u) -eq 0 ]] || die "$JAR is missing: sudo apt-get install libpostgresql-jdbc-java"
  apt-get update -q && apt-get install -y -q libpostgresql-jdbc-java
fi
(cd examples/node && npm ci --no-audit --no-fund --loglevel=error)

admin_url=$("$BIN/agentmem" dev-server start --data-dir "$DATA")
psql=$("$BIN/python" -c 'from agentmem_dev import devserver; print(devserver.bin_path("psql"))')
PGOPTIONS="-c client_min_messages=warning" "$psql" "$admin_url" -X -q -v ON_ERROR_STOP=1 <<SQL
drop database if exists $DB with (force);
create database $DB;
select 'create role $APP login' where not exists (select from pg_roles where rolname = '$APP') \gexec
SQL
db_url=${admin_url%/*}/$DB
"$BIN/agentmem" migrate --database-url "$db_url" --grant-app-role "$APP" >/dev/null
# Tenants are bound to logins: the login may act as the examples' tenants (example-node, example-java).
"$psql" "$db_url" -X -q -v ON_ERROR_STOP=1 \
  -c "select agentmem.grant_tenant(role_name => '$APP', tenant_prefix => 'example-')" >/dev/null

hostport=${admin_url#*@}; hostport=${hostport%%/*}
jdbc_options=""
if [[ -n ${POOLER_URL:-} ]]; then
  hostport=${POOLER_URL#*://}; hostport=${hostport#*@}; hostport=${hostport%%/*}
  jdbc_options="&prepareThreshold=0"
  echo "== through the pooler at $hostport"
fi
status=0
echo "== examples/node (pg from npm)"
DATABASE_URL="postgresql://$APP@$hostport/$DB" node examples/node/example.js || status=1
echo "== examples/java (JDBC: Debian's libpostgresql-jdbc-java)"
java -cp "$JAR" examples/java/Example.java "jdbc:postgresql://$hostport/$DB?user=$APP$jdbc_options" || status=1
exit $status
