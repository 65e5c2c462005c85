# shellcheck shell=bash
# fake-gcs-server v1.56.1 (Go module github.com/fsouza/fake-gcs-server, a Google
# Cloud Storage emulator), plain HTTP on 127.0.0.1:$TB_GCS_PORT, no authentication
# (any or no bearer token is accepted), objects on disk in $TB_RUN/gcs/data
# (filesystem backend: buckets and objects survive a restart). The bucket
# $TB_GCS_BUCKET is created at start.
#
# It serves the JSON API (/storage/v1/b/..., /upload/storage/v1/b/...,
# /download/storage/v1/b/...) and, because -public-host is 127.0.0.1:$TB_GCS_PORT,
# the XML API's object paths (GET/HEAD/PUT/DELETE /<bucket>/<object>) to requests
# whose Host header is exactly that (not "localhost:4443"). Not served: XML
# multipart uploads; `x-goog-if-generation-match` on XML PUTs (the JSON API's
# ifGenerationMatch query parameter is honoured).
#
# Built once with `go install` (Go module proxy; GOBIN in $TB_CACHE; about a minute
# the first time, no network afterwards).
#
# Component gcs_xml: gcs_xml_shim.py (Python standard library, the venv's Python)
# on 127.0.0.1:$TB_GCS_XML_PORT, a proxy that adds the XML API's writes (plain PUT
# with x-goog-if-generation-match, x-goog-copy-source copies, multipart uploads)
# by turning them into JSON API calls, and passes everything else through. It is
# the endpoint for clients that speak only the XML API: Rust's object_store
# (GoogleCloudStorage, via $TB_GCS_SERVICE_ACCOUNT's gcs_base_url).

GCS_VERSION=v1.56.1
TB_GCS_PORT=${TB_GCS_PORT:-4443}
TB_GCS_BUCKET=warehouse
TB_GCS_PROJECT=topicberg-testbed
TB_GCS_ENDPOINT=http://$TB_HOST:$TB_GCS_PORT
TB_GCS_XML_PORT=${TB_GCS_XML_PORT:-4444}
TB_GCS_XML_ENDPOINT=http://$TB_HOST:$TB_GCS_XML_PORT
GCS_XML_SHIM=$TB_REPO/scripts/testbed.d/gcs_xml_shim.py
GCS_HOME=$TB_CACHE/fake-gcs-server-$GCS_VERSION
GCS_BIN=$GCS_HOME/fake-gcs-server
GCS_DIR=$TB_RUN/gcs
# A "service account" file for Rust's object_store (GoogleCloudStorageBuilder::
# with_service_account_path, or GOOGLE_SERVICE_ACCOUNT): its gcs_base_url points
# the client at the emulator, disable_oauth sends empty tokens. object_store 0.12
# requires every field below, private_key_id included. It points at the XML shim
# (component gcs_xml): object_store writes through the XML API only.
TB_GCS_SERVICE_ACCOUNT=$GCS_DIR/object-store-service-account.json
GCS_WAIT_S=${TB_GCS_WAIT_S:-60}

gcs_install() {
  [ -x "$GCS_BIN" ] && return 0
  command -v go >/dev/null || { tb_log "gcs: go not found (needed to build fake-gcs-server)"; return 1; }
  tb_log "gcs: building fake-gcs-server $GCS_VERSION with go install into $GCS_HOME"
  mkdir -p "$GCS_HOME"
  if ! GOBIN=$GCS_HOME.tmp GOTOOLCHAIN=local GOFLAGS=-modcacherw \
    go install "github.com/fsouza/fake-gcs-server@$GCS_VERSION" >"$GCS_HOME/build.log" 2>&1; then
    tb_log "gcs: go install failed, see $GCS_HOME/build.log:"
    tail -n 30 "$GCS_HOME/build.log" | sed 's/^/    /' >&2
    rm -rf "$GCS_HOME.tmp"
    return 1
  fi
  mv "$GCS_HOME.tmp/fake-gcs-server" "$GCS_BIN"
  rm -rf "$GCS_HOME.tmp"
}

_gcs_code() { curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$@"; }

# Ready iff the bucket's metadata answers 200 on the JSON API.
gcs_ready() { [ "$(_gcs_code "$TB_GCS_ENDPOINT/storage/v1/b/$TB_GCS_BUCKET")" = 200 ]; }

_gcs_up() { [ "$(_gcs_code "$TB_GCS_ENDPOINT/_internal/healthcheck")" = 200 ]; }

gcs_start() {
  if tb_pid gcs >/dev/null; then
    tb_log "gcs already running (pid $(tb_pid gcs))"
    return 0
  fi
  if ! tb_port_free "$TB_GCS_PORT"; then
    tb_fail gcs "port $TB_HOST:$TB_GCS_PORT is taken by a process this test bed does not know"
    return 1
  fi
  mkdir -p "$GCS_DIR/data"
  tb_start_bg gcs "$GCS_BIN" -scheme http -host "$TB_HOST" -port "$TB_GCS_PORT" \
    -backend filesystem -filesystem-root "$GCS_DIR/data" \
    -public-host "$TB_HOST:$TB_GCS_PORT" -external-url "$TB_GCS_ENDPOINT" \
    -log-level warn
}

# Create the bucket (idempotent), then write a probe object with the JSON API,
# read it back on the XML path and delete it.
gcs_post_start() {
  local code obj=_testbed/probe.txt body got
  code=$(_gcs_code -X POST -H 'Content-Type: application/json' \
    --data "{\"name\":\"$TB_GCS_BUCKET\"}" \
    "$TB_GCS_ENDPOINT/storage/v1/b?project=$TB_GCS_PROJECT") || return 1
  case $code in
    200 | 409) ;; # 409: already exists
    *) tb_log "gcs: creating bucket $TB_GCS_BUCKET answered HTTP $code"; return 1 ;;
  esac
  body="testbed probe $$ $RANDOM"
  code=$(_gcs_code -X POST -H 'Content-Type: text/plain' --data-binary "$body" \
    "$TB_GCS_ENDPOINT/upload/storage/v1/b/$TB_GCS_BUCKET/o?uploadType=media&name=$obj") || code=000
  [ "$code" = 200 ] || { tb_log "gcs: upload of gs://$TB_GCS_BUCKET/$obj answered HTTP $code"; return 1; }
  got=$(curl -sS --fail --max-time 10 "$TB_GCS_ENDPOINT/$TB_GCS_BUCKET/$obj") || return 1
  [ "$got" = "$body" ] || { tb_log "gcs: GET gs://$TB_GCS_BUCKET/$obj returned other bytes"; return 1; }
  _gcs_code -X DELETE "$TB_GCS_ENDPOINT/storage/v1/b/$TB_GCS_BUCKET/o/${obj//\//%2F}" >/dev/null || true
}

gcs_wait() {
  tb_wait_until gcs "$GCS_WAIT_S" _gcs_up || return 1
  tb_wait_until gcs 20 gcs_post_start || return 1
  tb_wait_until gcs 10 gcs_ready
}

gcs_stop() {
  local pid
  tb_stop gcs
  # A fake-gcs-server on our data dir without (or with a stale) pid file: ours, stop it.
  for pid in $(pgrep -f -- "fake-gcs-server .*-filesystem-root $GCS_DIR/data( |\$)" || true); do
    tb_log "stopping stray gcs (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
}

gcs_status() { tb_status_line gcs; }

# --- gcs_xml: the XML API write shim in front of fake-gcs-server ------------

gcs_xml_install() {
  [ -x "$TB_PYTHON" ] || { tb_log "gcs_xml: no venv Python at $TB_PYTHON"; return 1; }
  mkdir -p "$GCS_DIR"
  printf '{"gcs_base_url": "%s", "disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": ""}\n' \
    "$TB_GCS_XML_ENDPOINT" >"$TB_GCS_SERVICE_ACCOUNT"
}

gcs_xml_start() {
  if tb_pid gcs_xml >/dev/null; then
    tb_log "gcs_xml already running (pid $(tb_pid gcs_xml))"
    return 0
  fi
  if ! tb_port_free "$TB_GCS_XML_PORT"; then
    tb_fail gcs_xml "port $TB_HOST:$TB_GCS_XML_PORT is taken by a process this test bed does not know"
    return 1
  fi
  mkdir -p "$GCS_DIR/xml-shim"
  tb_start_bg gcs_xml "$TB_PYTHON" "$GCS_XML_SHIM" --listen "$TB_HOST:$TB_GCS_XML_PORT" \
    --upstream "$TB_HOST:$TB_GCS_PORT" --state "$GCS_DIR/xml-shim"
}

# Ready iff a PUT through the XML API (x-goog-if-generation-match: 0 on a fresh
# name) answers 200 with an ETag, reads back the same bytes, and is deleted.
gcs_xml_ready() {
  local obj body got hdrs
  obj="_testbed%2Fxml-probe-$$-$RANDOM"
  body="xml probe $$ $RANDOM"
  hdrs=$(curl -sS --fail --max-time 10 -D - -o /dev/null -X PUT -H 'x-goog-if-generation-match: 0' \
    --data-binary "$body" "$TB_GCS_XML_ENDPOINT/$TB_GCS_BUCKET/$obj") || return 1
  printf '%s' "$hdrs" | grep -qi '^etag:' || return 1
  got=$(curl -sS --fail --max-time 10 "$TB_GCS_XML_ENDPOINT/$TB_GCS_BUCKET/$obj") || return 1
  curl -sS --max-time 10 -o /dev/null -X DELETE "$TB_GCS_XML_ENDPOINT/$TB_GCS_BUCKET/$obj" || true
  [ "$got" = "$body" ]
}

gcs_xml_wait() { tb_wait_until gcs_xml 30 gcs_xml_ready; }

gcs_xml_stop() {
  local pid
  tb_stop gcs_xml
  for pid in $(pgrep -f -- "gcs_xml_shim.py --listen $TB_HOST:$TB_GCS_XML_PORT .*--state $GCS_DIR/xml-shim" || true); do
    tb_log "stopping stray gcs_xml (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
}

gcs_xml_status() { tb_status_line gcs_xml; }
