# shellcheck shell=bash
# Azurite 3.37.0 (npm `azurite`, Microsoft's Azure Storage emulator), Blob service
# only (`azurite-blob`), on 127.0.0.1:$TB_AZURITE_PORT, data in $TB_RUN/azurite.
#
# Account: the emulator's well-known development account devstoreaccount1 with its
# published key (the one object_store's `use_emulator` and every Azure SDK default
# to; public, test-only). Path-style URLs: http://127.0.0.1:10000/devstoreaccount1/
# <container>/<blob>. The container $TB_AZURE_CONTAINER is created at start.
#
# Azurite has no ADLS Gen2 (dfs endpoint, `*.dfs.core.windows.net` API: filesystems,
# paths, rename, ACLs): only the Blob REST API. Clients reach it through the Blob
# API whatever the URI scheme says (abfss:// and wasbs:// locations name the same
# container and blob); see scripts/readers/README.md for what works per engine.
#
# Installed with `npm ci` from azurite/package.json + package-lock.json (every
# transitive version pinned) into $TB_CACHE/azurite-$AZURITE_VERSION. Azurite 3.37
# declares node >= 22; it runs on the machine's Node 20 (npm warns EBADENGINE).
# No telemetry (--disableTelemetry), any x-ms-version accepted (--skipApiVersionCheck:
# newer SDKs than Azurite's API version), unknown headers ignored (--loose).

AZURITE_VERSION=3.37.0
TB_AZURITE_PORT=${TB_AZURITE_PORT:-10000}
TB_AZURE_ACCOUNT=devstoreaccount1
TB_AZURE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
TB_AZURE_CONTAINER=warehouse
TB_AZURITE_BLOB_ENDPOINT=http://$TB_HOST:$TB_AZURITE_PORT/$TB_AZURE_ACCOUNT
AZURITE_SRC=$TB_REPO/scripts/testbed.d/azurite
AZURITE_HOME=$TB_CACHE/azurite-$AZURITE_VERSION
AZURITE_BIN=$AZURITE_HOME/node_modules/.bin/azurite-blob
AZURITE_DIR=$TB_RUN/azurite
AZURITE_WAIT_S=${TB_AZURITE_WAIT_S:-60}
AZURITE_API_VERSION=2021-08-06   # x-ms-version of our own curl requests

azurite_install() {
  local want
  command -v node >/dev/null || { tb_log "azurite: node not found (Node.js >= 20 needed)"; return 1; }
  command -v npm >/dev/null || { tb_log "azurite: npm not found"; return 1; }
  want=$(cat "$AZURITE_SRC/package.json" "$AZURITE_SRC/package-lock.json" | sha256sum | cut -d' ' -f1)
  if [ -x "$AZURITE_BIN" ] && [ "$(cat "$AZURITE_HOME/.stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  tb_log "azurite: installing azurite $AZURITE_VERSION with npm ci into $AZURITE_HOME"
  rm -rf "$AZURITE_HOME"
  mkdir -p "$AZURITE_HOME"
  cp "$AZURITE_SRC/package.json" "$AZURITE_SRC/package-lock.json" "$AZURITE_HOME/"
  if ! (cd "$AZURITE_HOME" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error) \
    >"$AZURITE_HOME/npm.log" 2>&1; then
    tb_log "azurite: npm ci failed, see $AZURITE_HOME/npm.log:"
    tail -n 30 "$AZURITE_HOME/npm.log" | sed 's/^/    /' >&2
    return 1
  fi
  [ -x "$AZURITE_BIN" ] || { tb_log "azurite: npm ci did not install $AZURITE_BIN"; return 1; }
  echo "$want" >"$AZURITE_HOME/.stamp"
}

# _azurite_req VERB PATH QUERY [curl args...]: a SharedKey-signed request to
# $TB_AZURITE_BLOB_ENDPOINT/PATH?QUERY (QUERY: "k=v&k2=v2", names lower case, no
# escaping needed). Extra headers to sign: only x-ms-* via AZ_HDRS (array of
# "name:value", names lower case, sorted) and the body length via AZ_LEN.
_azurite_req() {
  local verb=$1 path=$2 query=$3; shift 3
  local date res sts key sig url h hdrs=() canon=""
  date=$(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S GMT')
  for h in "${AZ_HDRS[@]}" "x-ms-date:$date" "x-ms-version:$AZURITE_API_VERSION"; do
    hdrs+=("$h")
  done
  mapfile -t hdrs < <(printf '%s\n' "${hdrs[@]}" | LC_ALL=C sort)
  for h in "${hdrs[@]}"; do canon+="$h"$'\n'; done
  res="/$TB_AZURE_ACCOUNT/$TB_AZURE_ACCOUNT/$path"
  if [ -n "$query" ]; then
    res+=$'\n'$(printf '%s\n' "${query//&/$'\n'}" | LC_ALL=C sort | sed 's/=/:/')
  fi
  # VERB, Content-Encoding, -Language, -Length, -MD5, -Type, Date, If-Modified-Since,
  # If-Match, If-None-Match, If-Unmodified-Since, Range, headers, resource.
  sts="$verb"$'\n\n\n'"${AZ_LEN:-}"$'\n\n\n\n\n\n\n\n\n'"$canon$res"
  key=$(printf '%s' "$TB_AZURE_KEY" | base64 -d | od -An -v -tx1 | tr -d ' \n')
  sig=$(printf '%s' "$sts" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$key" -binary | base64 -w0)
  url="$TB_AZURITE_BLOB_ENDPOINT/$path${query:+?$query}"
  for h in "${hdrs[@]}"; do set -- "$@" -H "$h"; done
  curl -sS --max-time 10 -X "$verb" -H "Authorization: SharedKey $TB_AZURE_ACCOUNT:$sig" \
    "$@" "$url"
}

_azurite_code() { _azurite_req "$@" -o /dev/null -w '%{http_code}'; }

# Ready iff a signed Get Container Properties on the container answers 200.
azurite_ready() {
  local AZ_HDRS=() AZ_LEN=
  [ "$(_azurite_code GET "$TB_AZURE_CONTAINER" restype=container)" = 200 ]
}

# Azurite answers (with 403 to an unsigned account listing) and a signed one works.
_azurite_up() {
  local AZ_HDRS=() AZ_LEN=
  [ "$(_azurite_code GET "" comp=list)" = 200 ]
}

azurite_start() {
  if tb_pid azurite >/dev/null; then
    tb_log "azurite already running (pid $(tb_pid azurite))"
    return 0
  fi
  if ! tb_port_free "$TB_AZURITE_PORT"; then
    tb_fail azurite "port $TB_HOST:$TB_AZURITE_PORT is taken by a process this test bed does not know"
    return 1
  fi
  mkdir -p "$AZURITE_DIR"
  tb_start_bg azurite "$AZURITE_BIN" --blobHost "$TB_HOST" --blobPort "$TB_AZURITE_PORT" \
    --location "$AZURITE_DIR" --disableTelemetry --skipApiVersionCheck --loose --silent
}

# Create the container (idempotent) and check a signed PUT/GET/DELETE of a blob.
azurite_post_start() {
  local code obj=_testbed/probe.txt body got tmp
  local AZ_HDRS=() AZ_LEN=
  code=$(_azurite_code PUT "$TB_AZURE_CONTAINER" restype=container -H 'Content-Length: 0') || return 1
  case $code in
    201 | 409) ;; # 409 ContainerAlreadyExists
    *) tb_log "azurite: creating container $TB_AZURE_CONTAINER answered HTTP $code"; return 1 ;;
  esac
  body="testbed probe $$ $RANDOM"
  tmp=$(mktemp)
  printf '%s' "$body" >"$tmp"
  AZ_HDRS=("x-ms-blob-type:BlockBlob") AZ_LEN=${#body}
  code=$(_azurite_code PUT "$TB_AZURE_CONTAINER/$obj" "" -T "$tmp") || code=000
  rm -f "$tmp"
  [ "$code" = 201 ] || { tb_log "azurite: PUT $TB_AZURE_CONTAINER/$obj answered HTTP $code"; return 1; }
  AZ_HDRS=() AZ_LEN=
  got=$(_azurite_req GET "$TB_AZURE_CONTAINER/$obj" "" --fail) || return 1
  [ "$got" = "$body" ] || { tb_log "azurite: GET $TB_AZURE_CONTAINER/$obj returned other bytes"; return 1; }
  _azurite_req DELETE "$TB_AZURE_CONTAINER/$obj" "" -o /dev/null || true
}

azurite_wait() {
  tb_wait_until azurite "$AZURITE_WAIT_S" _azurite_up || return 1
  tb_wait_until azurite 20 azurite_post_start || return 1
  tb_wait_until azurite 10 azurite_ready
}

azurite_stop() {
  local pid
  tb_stop azurite
  # An Azurite serving our data dir without (or with a stale) pid file: ours, stop it.
  for pid in $(pgrep -f -- "azurite-blob .*--location $AZURITE_DIR( |\$)" || true); do
    tb_log "stopping stray azurite (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
}

azurite_status() { tb_status_line azurite; }
