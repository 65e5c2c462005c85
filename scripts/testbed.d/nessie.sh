# shellcheck shell=bash
# Project Nessie 0.99.0 (the Quarkus server, `nessie-quarkus-0.99.0-runner.jar` from Maven
# Central, sha1-checked, cached in $TB_CACHE/nessie) on 127.0.0.1:$TB_NESSIE_PORT, with its
# Iceberg REST catalog at http://127.0.0.1:$TB_NESSIE_PORT/iceberg.
#
#  - Warehouse `$TB_NESSIE_WAREHOUSE` (what a client passes as `warehouse`; also the default
#    one) at s3://$TB_NESSIE_BUCKET/, a plain bucket of the test bed's SeaweedFS, created
#    here (idempotent) before Nessie starts.
#  - Nessie alone holds the S3 keys, through its secrets config (a quarkus secret referenced
#    as urn:nessie-secret:quarkus:topicberg-secrets.s3), in $NESSIE_CONF (mode 600, not on
#    the command line). Clients get no keys: S3 request signing is on (0.99's default for
#    every bucket, set explicitly), so loadTable answers carry s3.remote-signing-enabled=true
#    and s3.signer.uri/s3.signer.endpoint, and clients have each S3 request signed by
#    POST /iceberg/v1/{prefix}/s3-sign/{table-key}.
#  - No authentication (nessie.server.authentication.enabled=false): any client, no token.
#  - Version store: RocksDB in $NESSIE_DIR/rocksdb (survives restarts; `down --purge` drops it).
#  - Needs Java 21+: the newest JDK >= 21 in /usr/lib/jvm (the machine's Temurin 25),
#    or $TB_NESSIE_JAVA. The default `java` (17) is left alone.
#  - Quarkus' management interface (health, metrics) on 127.0.0.1:$TB_NESSIE_MGMT_PORT.
# Readiness: GET /iceberg/v1/config?warehouse=$TB_NESSIE_WAREHOUSE answers the warehouse's
# defaults (its prefix and its location), and the bucket exists.

NESSIE_VERSION=0.99.0
NESSIE_JAR_SHA1=f68b1c0c69ef2a8b35d7c451d006a7bf2818048e
NESSIE_JAR_URL=https://repo1.maven.org/maven2/org/projectnessie/nessie/nessie-quarkus/$NESSIE_VERSION/nessie-quarkus-$NESSIE_VERSION-runner.jar
NESSIE_HOME=$TB_CACHE/nessie
NESSIE_JAR=$NESSIE_HOME/nessie-quarkus-$NESSIE_VERSION-runner.jar
NESSIE_DIR=$TB_RUN/nessie
# Quarkus reads ./config/application.properties: Nessie runs with $NESSIE_DIR as its cwd.
NESSIE_CONF=$NESSIE_DIR/config/application.properties
NESSIE_WAIT_S=${TB_NESSIE_WAIT_S:-120}
TB_NESSIE_PORT=${TB_NESSIE_PORT:-19120}
TB_NESSIE_MGMT_PORT=${TB_NESSIE_MGMT_PORT:-19121}
TB_NESSIE_BUCKET=nessie-warehouse   # plain SeaweedFS S3 bucket that holds Nessie's tables
TB_NESSIE_WAREHOUSE=topicberg       # Nessie warehouse name = the client's `warehouse`
TB_NESSIE_URI=http://$TB_HOST:$TB_NESSIE_PORT/iceberg

# _nessie_java: print the path of a java >= 21: $TB_NESSIE_JAVA, else the newest JDK in
# /usr/lib/jvm by the JAVA_VERSION of its `release` file.
_nessie_java() {
  tb_newest_java 21 "${TB_NESSIE_JAVA:-}"
}

# nessie_install: download the runner jar once (sha1-checked) and check for Java 21+.
nessie_install() {
  local tmp got
  if ! _nessie_java >/dev/null; then
    tb_log "nessie: needs Java 21+ (none in /usr/lib/jvm; set TB_NESSIE_JAVA=/path/to/java)"
    return 1
  fi
  [ -s "$NESSIE_JAR" ] && return 0
  tb_log "nessie: downloading nessie-quarkus $NESSIE_VERSION runner jar (~245 MB) from Maven Central"
  mkdir -p "$NESSIE_HOME"
  tmp=$(mktemp "$NESSIE_HOME/.download.XXXXXX")
  if ! curl -fsSL --retry 3 --max-time 900 -o "$tmp" "$NESSIE_JAR_URL"; then
    rm -f "$tmp"
    tb_log "nessie: download of $NESSIE_JAR_URL failed"
    return 1
  fi
  got=$(sha1sum "$tmp" | cut -d' ' -f1)
  if [ "$got" != "$NESSIE_JAR_SHA1" ]; then
    rm -f "$tmp"
    tb_log "nessie: $NESSIE_JAR_URL has sha1 $got, expected $NESSIE_JAR_SHA1"
    return 1
  fi
  mv -f "$tmp" "$NESSIE_JAR"
}

# _nessie_bucket: create s3://$TB_NESSIE_BUCKET on SeaweedFS (idempotent).
_nessie_bucket() {
  local code
  code=$(_seaweed_s3_code -X PUT "$(_seaweed_s3_url "$TB_NESSIE_BUCKET")") || return 1
  case $code in
    200 | 409) ;; # 409 BucketAlreadyOwnedByYou
    *) tb_log "nessie: creating bucket $TB_NESSIE_BUCKET on SeaweedFS answered HTTP $code"; return 1 ;;
  esac
}

# _nessie_write_conf: Nessie's application.properties (mode 600: it holds the S3 keys).
_nessie_write_conf() {
  mkdir -p "$(dirname "$NESSIE_CONF")"
  (
    umask 077
    cat >"$NESSIE_CONF.tmp" <<PROPS
# Written by scripts/testbed.d/nessie.sh on every start; edits are lost.
quarkus.http.host=$TB_HOST
quarkus.http.port=$TB_NESSIE_PORT
quarkus.management.host=$TB_HOST
quarkus.management.port=$TB_NESSIE_MGMT_PORT
quarkus.log.console.level=INFO
quarkus.log.file.enable=false
quarkus.otel.sdk.disabled=true

nessie.server.authentication.enabled=false
nessie.version.store.type=ROCKSDB
nessie.version.store.persist.rocks.database-path=$NESSIE_DIR/rocksdb

nessie.catalog.default-warehouse=$TB_NESSIE_WAREHOUSE
nessie.catalog.warehouses.$TB_NESSIE_WAREHOUSE.location=s3://$TB_NESSIE_BUCKET/

nessie.catalog.service.s3.default-options.endpoint=http://$TB_HOST:$TB_S3_PORT
nessie.catalog.service.s3.default-options.path-style-access=true
nessie.catalog.service.s3.default-options.region=$TB_S3_REGION
nessie.catalog.service.s3.default-options.auth-type=STATIC
nessie.catalog.service.s3.default-options.access-key=urn:nessie-secret:quarkus:topicberg-secrets.s3
nessie.catalog.service.s3.default-options.request-signing-enabled=true
topicberg-secrets.s3.name=$TB_S3_ACCESS_KEY
topicberg-secrets.s3.secret=$TB_S3_SECRET_KEY
PROPS
  )
  mv -f "$NESSIE_CONF.tmp" "$NESSIE_CONF"
}

nessie_start() {
  local java p
  if tb_pid nessie >/dev/null; then
    tb_log "nessie already running (pid $(tb_pid nessie))"
    return 0
  fi
  for p in "$TB_NESSIE_PORT" "$TB_NESSIE_MGMT_PORT"; do
    if ! tb_port_free "$p"; then
      tb_fail nessie "port $p on $TB_HOST is taken by another process"
      return 1
    fi
  done
  java=$(_nessie_java) || { tb_fail nessie "no Java 21+ found"; return 1; }
  tb_wait_until seaweed 30 _nessie_bucket || return 1
  _nessie_write_conf
  # Nessie's AWS SDK must not look for credentials or regions elsewhere.
  tb_start_bg nessie env -C "$NESSIE_DIR" \
    -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE \
    AWS_EC2_METADATA_DISABLED=true \
    "$java" -Xms64m -Xmx512m -XX:+UseSerialGC -Djava.net.preferIPv4Stack=true \
    --enable-native-access=ALL-UNNAMED -jar "$NESSIE_JAR"
}

nessie_wait() { tb_wait_until nessie "$NESSIE_WAIT_S" nessie_ready; }

nessie_stop() { tb_stop nessie; }

nessie_status() { tb_status_line nessie; }

# nessie_ready: GET /iceberg/v1/config for the warehouse answers 200 with its defaults
# (the warehouse location), and the bucket answers a signed HEAD.
nessie_ready() {
  local body
  body=$(curl -fsS -m 5 "$TB_NESSIE_URI/v1/config?warehouse=$TB_NESSIE_WAREHOUSE") || return 1
  printf '%s' "$body" | grep -q "\"warehouse\" *: *\"s3://$TB_NESSIE_BUCKET/\?\"" || return 1
  [ "$(_seaweed_s3_code -I "$(_seaweed_s3_url "$TB_NESSIE_BUCKET")")" = 200 ]
}
