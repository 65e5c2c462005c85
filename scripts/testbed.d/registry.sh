# shellcheck shell=bash
# Karapace 6.2.0, a Confluent-compatible Schema Registry, on 127.0.0.1:$TB_REGISTRY_PORT,
# storing its schemas in the topic _schemas of the shared broker (component kafka, so
# `down --purge` forgets them with the broker's data).
#
# The source (Apache-2.0, three build fixes: third_party/karapace/NOTE.md) is kept in
# third_party/karapace and built by testbed.d/karapace-up into $TB_CACHE/karapace/venv
# (Python >= 3.12 from PATH or ~/.pyenv/versions, and Go for the protopace extension;
# pip and the Go module proxy; a few minutes the first time, rebuilt when the source
# changes). Pid and log: $TB_RUN/registry.{pid,log}.
#
# Readiness: a real registration, POST /subjects/$REGISTRY_PROBE_SUBJECT/versions
# with a tiny Avro schema, answering an id. Right after start Karapace answers
# error_code 50003 while it elects its master: registry_wait polls until it
# succeeds. (Registering the same schema again is idempotent: same id, no new
# version; so the probe subject shows in GET /subjects with one version.)

TB_REGISTRY_PORT=${TB_REGISTRY_PORT:-8081}
REGISTRY_URL=http://$TB_HOST:$TB_REGISTRY_PORT
REGISTRY_UP=$TB_REPO/scripts/testbed.d/karapace-up
REGISTRY_HOME=$TB_CACHE/karapace
REGISTRY_VENV=$REGISTRY_HOME/venv
REGISTRY_DIR=$TB_RUN/registry
REGISTRY_WAIT_S=${TB_REGISTRY_WAIT_S:-120}
REGISTRY_PROBE_SUBJECT=_testbed-probe-value
REGISTRY_PROBE_SCHEMA='{"schema": "{\"type\":\"record\",\"name\":\"TestbedProbe\",\"namespace\":\"topicberg.testbed\",\"fields\":[{\"name\":\"ok\",\"type\":\"boolean\"}]}"}'

# registry_install: build Karapace into $REGISTRY_VENV unless it is built from
# the current source (karapace-up keeps a hash of the source in the venv).
# A registry still running on a previous build is stopped (`up` starts it again).
registry_install() {
  mkdir -p "$REGISTRY_HOME"
  local log=$REGISTRY_HOME/build.log before
  before=$(cat "$REGISTRY_VENV/.built" 2>/dev/null || true)
  if ! "$REGISTRY_UP" --build "$REGISTRY_VENV" >"$log" 2>&1; then
    tb_log "FAILED: registry: building Karapace failed; last lines of $log:"
    tail -n 30 "$log" | sed 's/^/    /' >&2
    return 1
  fi
  if [ "$(cat "$REGISTRY_VENV/.built" 2>/dev/null)" != "$before" ]; then
    tb_log "registry: built Karapace into $REGISTRY_VENV (log: $log)"
    if tb_pid registry >/dev/null; then
      tb_log "registry: stopping the one running on the previous build"
      registry_stop
    fi
  fi
}

registry_start() {
  if tb_pid registry >/dev/null; then
    tb_log "registry already running (pid $(tb_pid registry))"
    return 0
  fi
  if ! tb_port_free "$TB_REGISTRY_PORT"; then
    tb_fail registry "port $TB_HOST:$TB_REGISTRY_PORT is taken by a process this test bed does not know"
    return 1
  fi
  tb_log "starting registry"
  mkdir -p "$REGISTRY_DIR"
  # karapace-up starts it in its own session and returns once GET /subjects answers.
  "$REGISTRY_UP" --venv "$REGISTRY_VENV" \
    --pidfile "$(tb_pidfile registry)" --logfile "$(tb_logfile registry)" \
    "$REGISTRY_DIR" "$TB_HOST:$TB_KAFKA_PORT" "$TB_REGISTRY_PORT" >/dev/null || {
    tb_fail registry "karapace-up failed"
    return 1
  }
}

# registry_ready: registering the probe schema answers {"id": N}.
registry_ready() {
  local body
  body=$(curl -sS --max-time 10 -X POST \
    -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
    --data "$REGISTRY_PROBE_SCHEMA" \
    "$REGISTRY_URL/subjects/$REGISTRY_PROBE_SUBJECT/versions") || return 1
  printf '%s' "$body" | grep -Eq '^\{ *"id" *: *[0-9]+ *\}$'
}

registry_wait() { tb_wait_until registry "$REGISTRY_WAIT_S" registry_ready; }

registry_stop() {
  tb_stop registry
  # A Karapace from our venv without (or with a stale) pid file: ours, stop it by pid.
  local pid
  for pid in $(pgrep -f -- "^$REGISTRY_VENV/bin/python -m karapace\$" || true); do
    tb_log "stopping stray registry (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
}

registry_status() { tb_status_line registry; }
