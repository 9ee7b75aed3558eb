#!/usr/bin/env bash
# PostgreSQL 15 + pg_cron (Debian bookworm) + pgvector 0.8.x (built from Debian trixie source)
# as a private throwaway test cluster. Idempotent. Usage: pg15-debian.sh install|start|stop|status|url
#
# What `install` changes on the host (root): it installs the missing packages of PKGS from the
# machine's own apt sources, after `apt-get update`. It never upgrades a package for its own sake
# (--no-upgrade), but apt may have to upgrade an installed package those depend on (libpq5,
# postgresql-common, ...): the packages that would be upgraded are listed before anything is
# installed, and AGENTMEM_PG15_NO_UPGRADE=1 stops there instead. pgvector's source comes from
# Debian trixie through a private apt configuration under /var/tmp (its own source list, package
# lists and no cache): nothing is added to /etc/apt, and no trixie binary can be installed. (An
# /etc/apt/sources.list.d/agentmem-trixie-src.sources an earlier version of this script left behind
# is removed.)
set -euo pipefail

PGBIN=/usr/lib/postgresql/15/bin
DATA=${AGENTMEM_PG15_DATA:-/var/tmp/agentmem-pg15/data}
BASE=$(dirname "$DATA")                 # holds the log file and the unix socket
LOG=$BASE/postgresql.log
PORT=${AGENTMEM_PG15_PORT:-55415}
URL="postgresql://postgres@127.0.0.1:$PORT/postgres"
PKGS=(postgresql-15 postgresql-15-cron postgresql-server-dev-15 build-essential dpkg-dev)
OLD_SRC_LIST=/etc/apt/sources.list.d/agentmem-trixie-src.sources   # left by earlier versions
APT_PRIVATE=/var/tmp/agentmem-apt-trixie-src  # the private apt configuration for pgvector's source
BUILD_DIR=/var/tmp/agentmem-pgvector-build
VECTOR_CONTROL=/usr/share/postgresql/15/extension/vector.control
# The settings docker-compose.yml's server runs with: this server starts with the same file.
SETTINGS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/agentmem-postgresql.conf

die() { echo "pg15-debian.sh: ERROR: $*" >&2; exit 1; }
log() { echo "pg15-debian.sh: $*" >&2; }
trap 'echo "pg15-debian.sh: ERROR: command failed (line $LINENO): $BASH_COMMAND" >&2' ERR

need_root() { [[ $(id -u) -eq 0 ]] || die "'$1' must run as root (apt/runuser); PostgreSQL itself runs as 'postgres'"; }
# PostgreSQL refuses to run as root: run server-side tools as the postgres user, from a dir it can read.
as_pg() {
  if [[ $(id -un) == postgres ]]; then (cd / && "$@"); else (cd / && runuser -u postgres -- "$@"); fi
}
psql_pg() { PGOPTIONS='-c client_min_messages=warning' "$PGBIN/psql" "$URL" -X -q -v ON_ERROR_STOP=1 "$@"; }
is_running() { as_pg "$PGBIN/pg_ctl" status -D "$DATA" >/dev/null 2>&1; }
pkg_installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]; }
vector_ok() {
  grep -Eq "^default_version *= *'0\.8\." "$VECTOR_CONTROL" 2>/dev/null && [[ -f /usr/lib/postgresql/15/lib/vector.so ]]
}

cmd_install() {
  need_root install
  export DEBIAN_FRONTEND=noninteractive
  if [[ -f $OLD_SRC_LIST ]]; then
    rm -f "$OLD_SRC_LIST"
    log "install: removed $OLD_SRC_LIST (an earlier version's deb-src entry; now kept out of /etc/apt)"
  fi
  local missing=() p
  for p in "${PKGS[@]}"; do pkg_installed "$p" || missing+=("$p"); done
  if ((${#missing[@]} == 0)) && vector_ok; then
    log "install: packages present and pgvector $(vector_version) installed; nothing to do"; return 0
  fi
  if ((${#missing[@]})); then
    log "install: apt-get update"
    apt-get update -qq || die "apt-get update failed (network / sources?)"
    # What installing them would upgrade among the packages already installed: said first.
    local upgrades
    upgrades=$(apt-get -s install --no-upgrade --no-install-recommends "${missing[@]}" 2>/dev/null \
      | awk '/^Inst [^ ]+ \[/ {gsub(/[][]/, "", $3); print $2 " " $3 " -> " substr($4, 2)}' || true)
    if [[ -n $upgrades ]]; then
      log "install: installing ${missing[*]} also upgrades these installed packages (their dependencies):"
      sed 's/^/  /' <<<"$upgrades" >&2
      [[ ${AGENTMEM_PG15_NO_UPGRADE:-0} != 1 ]] || die "AGENTMEM_PG15_NO_UPGRADE=1: stopping before any change"
    fi
    log "install: installing ${missing[*]}"
    apt-get install -y -qq --no-upgrade --no-install-recommends "${missing[@]}" >/var/tmp/agentmem-apt.log 2>&1 \
      || { tail -n 30 /var/tmp/agentmem-apt.log >&2; die "apt-get install ${missing[*]} failed"; }
  fi
  if vector_ok; then log "install: pgvector $(vector_version) already installed"; return 0; fi
  # deb-src ONLY, in a private apt configuration: trixie's pgvector source, nothing in /etc/apt.
  # The mirror is the one this machine's apt already uses for Debian's main archive.
  local mirror
  mirror=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [[ -n $mirror ]] || mirror=$(awk '/^deb / && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [[ -n $mirror ]] || die "cannot find this machine's Debian mirror in /etc/apt/sources.list(.d)"
  rm -rf "$APT_PRIVATE" && mkdir -p "$APT_PRIVATE/lists/partial"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" \
    >"$APT_PRIVATE/sources.list"
  local apt_src=(-o "Dir::Etc::SourceList=$APT_PRIVATE/sources.list" -o "Dir::Etc::SourceParts=$APT_PRIVATE/none"
                 -o "Dir::State::Lists=$APT_PRIVATE/lists" -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=")
  apt-get "${apt_src[@]}" update -qq || die "apt-get update of trixie's sources failed (network?)"
  log "install: building pgvector from Debian trixie source in $BUILD_DIR"
  rm -rf "$BUILD_DIR" && mkdir -p "$BUILD_DIR"
  chown _apt "$BUILD_DIR" 2>/dev/null || true   # lets apt download sandboxed (no "unsandboxed as root" warning)
  (cd "$BUILD_DIR" && apt-get "${apt_src[@]}" source -qq pgvector/trixie) || die "apt-get source pgvector/trixie failed"
  rm -rf "$APT_PRIVATE"
  local src; src=$(find "$BUILD_DIR" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -n1)
  [[ -n $src ]] || die "no unpacked pgvector source dir in $BUILD_DIR"
  # OPTFLAGS= : like Debian's own packaging, avoid -march=native (portable binary).
  make -C "$src" -s -j"$(nproc)" PG_CONFIG="$PGBIN/pg_config" OPTFLAGS= >/dev/null || die "pgvector build failed"
  make -C "$src" -s install PG_CONFIG="$PGBIN/pg_config" OPTFLAGS= >/dev/null || die "pgvector make install failed"
  vector_ok || die "pgvector installed but $VECTOR_CONTROL is not 0.8.x"
  log "install: pgvector $(vector_version) installed"
}

vector_version() { sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" "$VECTOR_CONTROL" 2>/dev/null; }

cmd_start() {
  need_root start
  [[ -x $PGBIN/initdb ]] || die "PostgreSQL 15 not installed; run '$0 install' first"
  if [[ ! -d $BASE ]]; then mkdir -p "$BASE" && chown postgres:postgres "$BASE"; fi
  as_pg test -w "$BASE" || die "$BASE must be writable by user postgres (log + socket live there)"
  if [[ ! -s $DATA/PG_VERSION ]]; then
    log "start: initdb $DATA"
    as_pg "$PGBIN/initdb" -D "$DATA" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >/dev/null \
      || die "initdb failed for $DATA"
    echo "include_if_exists = 'agentmem.conf'" | as_pg tee -a "$DATA/postgresql.conf" >/dev/null
  fi
  # Rewritten on every start so port/socket changes apply; -A trust already covers local + 127.0.0.1/::1.
  # First the deployment's settings (the file compose mounts), then what belongs to this throwaway
  # test server only.
  [[ -r $SETTINGS ]] || die "missing $SETTINGS (the server settings shared with docker-compose.yml)"
  as_pg tee "$DATA/agentmem-postgresql.conf" <"$SETTINGS" >/dev/null
  as_pg tee "$DATA/agentmem.conf" >/dev/null <<EOF
include = 'agentmem-postgresql.conf'
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$BASE'
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
  if is_running; then
    log "start: already running ($URL)"
  else
    log "start: pg_ctl start (log: $LOG)"
    as_pg "$PGBIN/pg_ctl" start -D "$DATA" -l "$LOG" -w -t 60 >/dev/null \
      || { tail -n 20 "$LOG" >&2 || true; die "server failed to start (see $LOG; port $PORT in use?)"; }
  fi
  local i
  for i in $(seq 1 30); do "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" && break; sleep 1; done
  "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" || die "server not accepting connections on 127.0.0.1:$PORT"
  psql_pg -c "create extension if not exists pg_cron" || die "create extension pg_cron failed"
  log "start: ready at $URL"
}

cmd_stop() {
  need_root stop
  if [[ -s $DATA/PG_VERSION ]] && is_running; then
    as_pg "$PGBIN/pg_ctl" stop -D "$DATA" -m fast -w >/dev/null && log "stop: stopped"
  else
    log "stop: not running"
  fi
}

cmd_status() {
  if is_running; then echo "running: yes ($URL, data $DATA)"; else
    echo "running: no (data $DATA)"
    echo "vector available (control file): $(vector_version || true)"
    return 0
  fi
  psql_pg -At -F ' ' <<'SQL'
select 'server: ' || current_setting('server_version');
select name || ': default=' || default_version || ' installed(postgres db)=' || coalesce(installed_version, '-')
  from pg_available_extensions where name in ('pg_cron', 'vector') order by name;
SQL
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  url) echo "$URL" ;;
  *) echo "usage: $0 install|start|stop|status|url" >&2; exit 2 ;;
esac
