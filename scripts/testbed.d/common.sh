# shellcheck shell=bash
# Shared settings and process helpers for scripts/testbed. Sourced, never run.
#
# Every component (kafka, kafka_faults, seaweed, fixture) has, for its name <c>:
#   <c>_install   download/prepare into $TB_CACHE (pinned, idempotent, no network if cached)
#   <c>_start     start in the background unless already running (tb_start_bg)
#   <c>_wait      poll a real request until ready or deadline; on failure tb_fail
#   <c>_stop      stop the process (tb_stop)
#   <c>_status    print one line: "<c>: running (pid N), ready" / "stopped" / "running, not ready"
#   <c>_ready     exit 0 iff the component answers a real request right now (quiet)

TB_REPO=${TB_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# Downloads (jars, venv, binaries): kept between runs, git-ignored.
TB_CACHE=${TOPICBERG_CACHE:-$TB_REPO/.cache}
# Runtime state (data dirs, logs, pid files): wiped by `down --purge`.
TB_RUN=${TOPICBERG_TESTBED_DIR:-$TB_REPO/.testbed}
TB_HOST=127.0.0.1

# --- Ports -----------------------------------------------------------------
# Each can be set in the environment (the schema registry's too: TB_REGISTRY_PORT),
# so that a second test bed, with its own TOPICBERG_CACHE and TOPICBERG_TESTBED_DIR
# (or in another clone), runs beside the first: e.g. the demo's
# `TB_KAFKA_PORT=19092 TB_KAFKA_SASL_PORT=19093 TB_KAFKA_CONTROLLER_PORT=19094
# TB_REGISTRY_PORT=18081 scripts/demo`.
TB_KAFKA_PORT=${TB_KAFKA_PORT:-9092}                       # PLAINTEXT
TB_KAFKA_SASL_PORT=${TB_KAFKA_SASL_PORT:-9093}             # SASL_PLAINTEXT (PLAIN + SCRAM-SHA-512)
TB_KAFKA_CONTROLLER_PORT=${TB_KAFKA_CONTROLLER_PORT:-9094} # KRaft controller
TB_KAFKA_FAULTS_PORT=${TB_KAFKA_FAULTS_PORT:-9095}         # fault-test broker: PLAINTEXT (restarted by tests)
TB_KAFKA_FAULTS_CONTROLLER_PORT=${TB_KAFKA_FAULTS_CONTROLLER_PORT:-9096} # fault-test broker: KRaft controller
TB_S3_PORT=${TB_S3_PORT:-8333}                             # SeaweedFS S3
TB_SEAWEED_CATALOG_PORT=${TB_SEAWEED_CATALOG_PORT:-8181}   # SeaweedFS Iceberg REST catalog
TB_FIXTURE_PORT=${TB_FIXTURE_PORT:-8182}                   # Apache Iceberg reference REST catalog (RESTCatalogServer)

# --- Credentials (test-only, loopback-only) ---------------------------------
TB_KAFKA_PLAIN_USER=tb-plain
TB_KAFKA_PLAIN_PASSWORD=tb-plain-secret
TB_KAFKA_SCRAM_USER=tb-scram
TB_KAFKA_SCRAM_PASSWORD=tb-scram-secret
TB_S3_ACCESS_KEY=topicberg
TB_S3_SECRET_KEY=topicberg-secret-key
TB_S3_REGION=us-east-1
TB_SEAWEED_WAREHOUSE=lakehouse          # SeaweedFS table bucket = catalog warehouse
TB_FIXTURE_BUCKET=fixture-warehouse     # plain S3 bucket the reference catalog writes to
TB_FIXTURE_CLIENT_ID=tb-fixture
TB_FIXTURE_CLIENT_SECRET=tb-fixture-secret

TB_VENV=$TB_CACHE/venv
TB_PYTHON=$TB_VENV/bin/python
# Daft's own venv (scripts/requirements-daft.txt): Daft 0.7.26 needs pyarrow < 26.
TB_DAFT_VENV=$TB_CACHE/venv-daft
TB_DAFT_PYTHON=$TB_DAFT_VENV/bin/python

tb_log() { printf '[testbed] %s\n' "$*" >&2; }

# tb_newest_java MIN [OVERRIDE]: print OVERRIDE if given, else the java of the
# newest JDK in /usr/lib/jvm (by the JAVA_VERSION of its `release` file) whose
# major version is MIN or more; fails when there is none.
tb_newest_java() {
  local min=$1 override=${2:-} d v best="" best_v=0
  if [ -n "$override" ]; then
    echo "$override"
    return 0
  fi
  for d in /usr/lib/jvm/*; do
    if [ ! -x "$d/bin/java" ] || [ ! -f "$d/release" ]; then continue; fi
    v=$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$d/release")
    [ -n "$v" ] || continue
    if [ "$v" -ge "$min" ] && [ "$v" -gt "$best_v" ]; then
      best=$d/bin/java best_v=$v
    fi
  done
  [ -n "$best" ] || return 1
  echo "$best"
}

tb_pidfile() { echo "$TB_RUN/$1.pid"; }
tb_logfile() { echo "$TB_RUN/$1.log"; }

# tb_pid NAME: prints the pid if the process recorded for NAME is alive.
tb_pid() {
  local f pid
  f=$(tb_pidfile "$1")
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

# tb_start_bg NAME CMD...: start CMD in its own session (process group), log to
# $TB_RUN/NAME.log, record its pid. No-op if already running.
tb_start_bg() {
  local name=$1; shift
  mkdir -p "$TB_RUN"
  if tb_pid "$name" >/dev/null; then
    tb_log "$name already running (pid $(tb_pid "$name"))"
    return 0
  fi
  tb_log "starting $name"
  setsid nohup "$@" >>"$(tb_logfile "$name")" 2>&1 </dev/null &
  echo $! >"$(tb_pidfile "$name")"
}

# tb_stop NAME: SIGTERM the process group, wait up to 30 s, then SIGKILL.
tb_stop() {
  local name=$1 pid i
  pid=$(tb_pid "$name") || { rm -f "$(tb_pidfile "$name")"; return 0; }
  tb_log "stopping $name (pid $pid)"
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
  for i in $(seq 1 300); do
    kill -0 -- "-$pid" 2>/dev/null || kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$(tb_pidfile "$name")"
}

# tb_fail NAME WHAT: report that NAME did not come up, with the tail of its log.
tb_fail() {
  local name=$1; shift
  printf '[testbed] FAILED: %s: %s\n' "$name" "$*" >&2
  local log
  log=$(tb_logfile "$name")
  if [ -f "$log" ]; then
    printf '[testbed] last 40 lines of %s:\n' "$log" >&2
    tail -n 40 "$log" | sed 's/^/    /' >&2
  fi
  return 1
}

# tb_wait_until NAME TIMEOUT_S CMD...: poll CMD (quietly) every 0.5 s until it
# succeeds; fail with the log tail if the deadline passes or the process died.
tb_wait_until() {
  local name=$1 timeout=$2; shift 2
  local deadline=$((SECONDS + timeout))
  while [ $SECONDS -lt $deadline ]; do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if ! tb_pid "$name" >/dev/null; then
      tb_fail "$name" "process exited before it became ready"
      return 1
    fi
    sleep 0.5
  done
  tb_fail "$name" "not ready after ${timeout}s"
}

# tb_port_free PORT: exit 0 if nothing listens on 127.0.0.1:PORT.
tb_port_free() { ! (exec 3<>"/dev/tcp/$TB_HOST/$1") 2>/dev/null; }

# tb_status_line NAME: the standard status line, using NAME_ready.
tb_status_line() {
  local name=$1 pid
  if pid=$(tb_pid "$name"); then
    if "${name}_ready" >/dev/null 2>&1; then
      echo "$name: running (pid $pid), ready"
    else
      echo "$name: running (pid $pid), NOT ready"
    fi
  else
    echo "$name: stopped"
  fi
}
