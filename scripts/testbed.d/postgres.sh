# shellcheck shell=bash
# PostgreSQL 15 (Debian's package postgresql-15, binaries in $PG_BIN) on
# 127.0.0.1:$TB_POSTGRES_PORT, with logical decoding on (wal_level=logical), as the
# source database of the change data capture tests (component `connect` runs
# Debezium's PostgreSQL connector against it). Database `topicberg`, superuser
# `postgres`, trust authentication (loopback only, no password).
#
#  - Cluster in $PG_DATA (initdb at first start), Unix socket in $PG_DIR, server
#    log $TB_RUN/postgres.log, pid (the postmaster's) $TB_RUN/postgres.pid.
#  - PostgreSQL refuses to run as root: when the test bed runs as root, initdb,
#    pg_ctl (and so the server) run as the `postgres` system user (`runuser`), and
#    $PG_DIR and the log belong to it; otherwise they run as the caller. When that
#    user cannot reach $TB_RUN (a clone under /root, mode 700), the cluster lives in
#    /var/tmp/topicberg-testbed-postgres-<checksum of $TB_RUN> instead (the folder
#    chosen is kept in $TB_RUN/postgres.dir; `down --purge` does not remove it).
#  - max_slot_wal_keep_size bounds the WAL that replication slots left behind (a
#    test that died before dropping its slot) can hold on disk.
# Readiness: `psql -d topicberg -c 'show wal_level'` over TCP answers `logical`.

PG_MAJOR=15
PG_BIN=/usr/lib/postgresql/$PG_MAJOR/bin
PG_PACKAGE=postgresql-$PG_MAJOR
PG_PSQL=$PG_BIN/psql
TB_POSTGRES_PORT=${TB_POSTGRES_PORT:-15432}
TB_POSTGRES_DB=topicberg
TB_POSTGRES_USER=postgres
TB_POSTGRES_URL=postgresql://$TB_POSTGRES_USER@$TB_HOST:$TB_POSTGRES_PORT/$TB_POSTGRES_DB
PG_DIR=$TB_RUN/postgres
PG_DATA=$PG_DIR/data
PG_DIR_FILE=$TB_RUN/postgres.dir
PG_WAIT_S=${TB_POSTGRES_WAIT_S:-60}

# _pg_as_owner CMD...: run CMD as the cluster's owner (`postgres` when we are root).
_pg_as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# _pg_psql DB ARGS...: psql over TCP as the superuser, quiet, unaligned, tuples only.
_pg_psql() {
  local db=$1; shift
  PGCONNECT_TIMEOUT=5 "$PG_PSQL" -h "$TB_HOST" -p "$TB_POSTGRES_PORT" -U "$TB_POSTGRES_USER" \
    -d "$db" -X -q -At -v ON_ERROR_STOP=1 "$@"
}

# _pg_locate: sets PG_DIR and PG_DATA (see the header), creating PG_DIR for its owner.
_pg_locate() {
  if [ -f "$PG_DIR_FILE" ]; then
    PG_DIR=$(cat "$PG_DIR_FILE")
  else
    PG_DIR=$TB_RUN/postgres
    mkdir -p "$PG_DIR"
    if [ "$(id -u)" = 0 ]; then
      chown postgres: "$PG_DIR"
      if ! runuser -u postgres -- test -w "$PG_DIR"; then
        rmdir "$PG_DIR" 2>/dev/null || true
        PG_DIR=/var/tmp/topicberg-testbed-postgres-$(printf %s "$TB_RUN" | cksum | cut -d' ' -f1)
        tb_log "postgres: the postgres user cannot reach $TB_RUN; the cluster lives in $PG_DIR"
      fi
    fi
    echo "$PG_DIR" >"$PG_DIR_FILE"
  fi
  PG_DATA=$PG_DIR/data
  mkdir -p "$PG_DIR"
  [ "$(id -u)" != 0 ] || chown postgres: "$PG_DIR"
}

# postgres_install: Debian's postgresql-15 (apt) when its binaries are missing.
postgres_install() {
  [ -x "$PG_BIN/postgres" ] && [ -x "$PG_PSQL" ] && return 0
  tb_log "installing $PG_PACKAGE (apt)"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$PG_PACKAGE" >/dev/null 2>&1; then
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$PG_PACKAGE" >/dev/null
  fi
  [ -x "$PG_BIN/postgres" ] || { tb_log "FAILED: postgres: no $PG_BIN/postgres after installing $PG_PACKAGE"; return 1; }
}

postgres_start() {
  local log pid
  log=$(tb_logfile postgres)
  if tb_pid postgres >/dev/null; then
    tb_log "postgres already running (pid $(tb_pid postgres))"
    return 0
  fi
  if ! tb_port_free "$TB_POSTGRES_PORT"; then
    tb_fail postgres "port $TB_HOST:$TB_POSTGRES_PORT is taken by a process this test bed does not know"
    return 1
  fi
  mkdir -p "$TB_RUN"
  _pg_locate
  # The server writes its log as its owner: in PG_DIR, linked from the usual place.
  ln -sfn "$PG_DIR/server.log" "$log"
  log=$PG_DIR/server.log
  touch "$log"
  [ "$(id -u)" != 0 ] || chown postgres: "$log"
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    tb_log "postgres: initdb $PG_DATA"
    rm -rf "$PG_DATA"
    if ! _pg_as_owner "$PG_BIN/initdb" -D "$PG_DATA" -A trust -U "$TB_POSTGRES_USER" -E UTF8 \
      --locale=C.UTF-8 --no-instructions >>"$log" 2>&1; then
      tb_fail postgres "initdb failed"
      return 1
    fi
  fi
  tb_log "starting postgres"
  # -w: pg_ctl returns once the server accepts connections (or fails, after -t s).
  if ! _pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$log" -w -t "$PG_WAIT_S" \
    -o "-c listen_addresses=$TB_HOST -p $TB_POSTGRES_PORT -c unix_socket_directories=$PG_DIR -c wal_level=logical -c max_replication_slots=64 -c max_wal_senders=64 -c max_slot_wal_keep_size=1024" \
    start >/dev/null; then
    tb_fail postgres "pg_ctl start failed"
    return 1
  fi
  pid=$(head -n 1 "$PG_DATA/postmaster.pid" 2>/dev/null)
  [ -n "$pid" ] || { tb_fail postgres "no postmaster.pid after start"; return 1; }
  echo "$pid" >"$(tb_pidfile postgres)"
  if [ "$(_pg_psql postgres -c "select count(*) from pg_database where datname = '$TB_POSTGRES_DB'")" != 1 ]; then
    tb_log "postgres: creating database $TB_POSTGRES_DB"
    _pg_psql postgres -c "create database $TB_POSTGRES_DB" || { tb_fail postgres "create database failed"; return 1; }
  fi
}

# postgres_ready: the database answers over TCP, with logical decoding on.
postgres_ready() {
  [ "$(_pg_psql "$TB_POSTGRES_DB" -c 'show wal_level' 2>/dev/null)" = logical ]
}

postgres_wait() { tb_wait_until postgres "$PG_WAIT_S" postgres_ready; }

# postgres_stop: a fast shutdown through pg_ctl (rolls back open transactions,
# disconnects replication clients; returns once the server is down); tb_stop if
# that fails. (After pg_ctl, the postmaster can linger a moment as a zombie that
# kill -0 still sees: the pid file goes without asking tb_pid.)
postgres_stop() {
  local pid
  [ ! -f "$PG_DIR_FILE" ] || _pg_locate
  if pid=$(tb_pid postgres) && [ -f "$PG_DATA/postmaster.pid" ]; then
    tb_log "stopping postgres (pid $pid)"
    if _pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 30 stop >/dev/null 2>&1; then
      rm -f "$(tb_pidfile postgres)"
      return 0
    fi
  fi
  tb_stop postgres
}

postgres_status() { tb_status_line postgres; }
