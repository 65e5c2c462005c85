# shellcheck shell=bash
# Trino 476 (a single node: coordinator and worker in one JVM) on 127.0.0.1:$TB_TRINO_PORT,
# with the Iceberg connector on the test bed's REST catalogs. An independent reader
# (scripts/readers/trino_reader.py talks to it over Trino's HTTP client protocol).
#
#  - Installed from Maven Central, sha1-checked, in $TRINO_HOME: `io.trino:trino-server-core`
#    (the server without plugins, ~185 MiB) plus the one plugin used, `io.trino:trino-iceberg`
#    (~330 MiB zip), instead of `io.trino:trino-server` (~783 MiB, every plugin), and
#    `org.xerial:sqlite-jdbc` put into the Iceberg plugin's folder (the JDBC catalog type on
#    the embedded catalog's SQLite file).
#  - Needs Java 24+: the newest JDK >= 24 in /usr/lib/jvm (the machine's Temurin 25), or
#    $TB_TRINO_JAVA (a java binary). The default `java` (17) is left alone.
#  - Configuration written on every start into $TRINO_DIR/etc (mode 600: the catalog files
#    hold the S3 keys); data dir $TRINO_DIR/data; log $TB_RUN/trino.log.
#  - Catalogs (etc/catalog): `seaweed` (SeaweedFS' REST catalog, warehouse lakehouse, OAuth2
#    client credentials) and `fixture` (Iceberg's reference REST catalog, OAuth2), both with
#    Trino's native S3 file system on the test bed's store (path-style, the store's keys).
#    Dynamic catalog management is on (catalog.management=dynamic), so that a reader can
#    CREATE CATALOG for a catalog only known at read time (the embedded catalog's SQLite
#    file, through Iceberg's JDBC catalog type).
#  - Memory: a 1 GiB heap (the machine has 2 cores and 24 GiB shared by the whole test bed).
#  - Slow to start (~30-60 s on 2 cores): `scripts/testbed up` starts it right after the
#    catalogs it reads and waits for it after every other component (see cmd_up).
# Readiness: `SELECT 1`, then `SHOW SCHEMAS FROM seaweed` and `SHOW SCHEMAS FROM fixture`
# (each a real query through POST /v1/statement, followed to its end), polled with a
# deadline of $TRINO_WAIT_S seconds.

TRINO_VERSION=476
TRINO_CORE_SHA1=6bae2db438f8e6a2a8d9c8b566bb5e5b05870138
TRINO_ICEBERG_SHA1=6a9841be7b21c71110a1efc3a98e5dd833b20a8e
TRINO_SQLITE_JDBC_VERSION=3.50.3.0
TRINO_SQLITE_JDBC_SHA1=220f0cdfe9c5b97926a417fa11848ce8817d2135
TRINO_MAVEN=https://repo1.maven.org/maven2
TRINO_CORE_URL=$TRINO_MAVEN/io/trino/trino-server-core/$TRINO_VERSION/trino-server-core-$TRINO_VERSION.tar.gz
TRINO_ICEBERG_URL=$TRINO_MAVEN/io/trino/trino-iceberg/$TRINO_VERSION/trino-iceberg-$TRINO_VERSION.zip
TRINO_SQLITE_JDBC_URL=$TRINO_MAVEN/org/xerial/sqlite-jdbc/$TRINO_SQLITE_JDBC_VERSION/sqlite-jdbc-$TRINO_SQLITE_JDBC_VERSION.jar
TRINO_HOME=$TB_CACHE/trino/trino-server-$TRINO_VERSION
TRINO_DIR=$TB_RUN/trino
TRINO_ETC=$TRINO_DIR/etc
TRINO_WAIT_S=${TB_TRINO_WAIT_S:-300}
TRINO_HEAP=${TB_TRINO_HEAP:-1G}
TB_TRINO_PORT=${TB_TRINO_PORT:-18080}
TB_TRINO_URL=http://$TB_HOST:$TB_TRINO_PORT
TB_TRINO_USER=topicberg

# _trino_java: print the path of a java >= 24: $TB_TRINO_JAVA, else the newest JDK in
# /usr/lib/jvm by the JAVA_VERSION of its `release` file.
_trino_java() {
  tb_newest_java 24 "${TB_TRINO_JAVA:-}"
}

# _trino_fetch URL SHA1 DEST: download URL to DEST (atomically), check its sha1.
_trino_fetch() {
  local url=$1 want=$2 dest=$3 tmp got
  tmp=$(mktemp "$(dirname "$dest")/.download.XXXXXX")
  if ! curl -fsSL --retry 3 --max-time 1800 -o "$tmp" "$url"; then
    rm -f "$tmp"
    tb_log "trino: download of $url failed"
    return 1
  fi
  got=$(sha1sum "$tmp" | cut -d' ' -f1)
  if [ "$got" != "$want" ]; then
    rm -f "$tmp"
    tb_log "trino: $url has sha1 $got, expected $want"
    return 1
  fi
  mv -f "$tmp" "$dest"
}

# trino_install: the server core, the Iceberg plugin and the SQLite JDBC driver, once, into
# $TRINO_HOME (the archives are deleted once unpacked). No network when it is there.
trino_install() {
  local stamp=$TRINO_HOME/.topicberg-stamp want tmp
  if ! _trino_java >/dev/null; then
    tb_log "trino: needs Java 24+ (none in /usr/lib/jvm; set TB_TRINO_JAVA=/path/to/java)"
    return 1
  fi
  want="$TRINO_CORE_SHA1 $TRINO_ICEBERG_SHA1 $TRINO_SQLITE_JDBC_SHA1"
  [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && return 0
  mkdir -p "$TB_CACHE/trino"
  tmp=$TB_CACHE/trino/.install
  rm -rf "$tmp" "$TRINO_HOME"
  mkdir -p "$tmp"
  tb_log "trino: downloading trino-server-core $TRINO_VERSION (~185 MiB) and trino-iceberg $TRINO_VERSION (~330 MiB) from Maven Central"
  _trino_fetch "$TRINO_CORE_URL" "$TRINO_CORE_SHA1" "$tmp/core.tar.gz" || return 1
  _trino_fetch "$TRINO_ICEBERG_URL" "$TRINO_ICEBERG_SHA1" "$tmp/iceberg.zip" || return 1
  _trino_fetch "$TRINO_SQLITE_JDBC_URL" "$TRINO_SQLITE_JDBC_SHA1" "$tmp/sqlite-jdbc.jar" || return 1
  tar -xzf "$tmp/core.tar.gz" -C "$tmp" || return 1
  rm -f "$tmp/core.tar.gz"
  python3 -m zipfile -e "$tmp/iceberg.zip" "$tmp" || return 1
  rm -f "$tmp/iceberg.zip"
  mv "$tmp/trino-iceberg-$TRINO_VERSION" "$tmp/trino-server-core-$TRINO_VERSION/plugin/iceberg"
  mv "$tmp/sqlite-jdbc.jar" \
    "$tmp/trino-server-core-$TRINO_VERSION/plugin/iceberg/org.xerial_sqlite-jdbc-$TRINO_SQLITE_JDBC_VERSION.jar"
  echo "$want" >"$tmp/trino-server-core-$TRINO_VERSION/.topicberg-stamp"
  mv "$tmp/trino-server-core-$TRINO_VERSION" "$TRINO_HOME"
  rm -rf "$tmp"
}

# _trino_iceberg_catalog NAME URI WAREHOUSE CLIENT_ID SECRET: etc/catalog/NAME.properties
# for an Iceberg REST catalog with OAuth2 client credentials and the test bed's S3 store.
_trino_iceberg_catalog() {
  cat >"$TRINO_ETC/catalog/$1.properties" <<PROPS
# Written by scripts/testbed.d/trino.sh on every start; edits are lost.
connector.name=iceberg
iceberg.catalog.type=rest
iceberg.rest-catalog.uri=$2
iceberg.rest-catalog.warehouse=$3
iceberg.rest-catalog.security=OAUTH2
iceberg.rest-catalog.oauth2.credential=$4:$5
iceberg.rest-catalog.oauth2.server-uri=$2/v1/oauth/tokens
fs.native-s3.enabled=true
s3.endpoint=http://$TB_HOST:$TB_S3_PORT
s3.region=$TB_S3_REGION
s3.path-style-access=true
s3.aws-access-key=$TB_S3_ACCESS_KEY
s3.aws-secret-key=$TB_S3_SECRET_KEY
PROPS
}

# _trino_write_conf: node, JVM, server, log and catalog configuration in $TRINO_ETC.
_trino_write_conf() {
  rm -rf "$TRINO_ETC"
  mkdir -p "$TRINO_ETC/catalog" "$TRINO_DIR/data"
  (
    umask 077
    cat >"$TRINO_ETC/node.properties" <<PROPS
node.environment=testbed
node.id=topicberg-testbed
node.data-dir=$TRINO_DIR/data
node.bind-ip=$TB_HOST
node.internal-address=$TB_HOST
PROPS
    cat >"$TRINO_ETC/jvm.config" <<JVM
-server
-Xmx$TRINO_HEAP
-XX:+UseG1GC
-XX:+ExplicitGCInvokesConcurrent
-XX:+ExitOnOutOfMemoryError
-XX:-OmitStackTraceInFastThrow
-XX:ReservedCodeCacheSize=256M
-XX:PerMethodRecompilationCutoff=10000
-XX:PerBytecodeRecompilationCutoff=10000
-Djdk.attach.allowAttachSelf=true
-Djdk.nio.maxCachedBufferSize=2000000
-Dfile.encoding=UTF-8
-Djava.net.preferIPv4Stack=true
-Daws.ec2MetadataDisabled=true
-XX:+EnableDynamicAgentLoading
--enable-native-access=ALL-UNNAMED
JVM
    cat >"$TRINO_ETC/config.properties" <<PROPS
coordinator=true
node-scheduler.include-coordinator=true
http-server.http.port=$TB_TRINO_PORT
discovery.uri=$TB_TRINO_URL
query.max-memory=400MB
query.max-memory-per-node=400MB
task.concurrency=2
task.max-worker-threads=4
catalog.management=dynamic
PROPS
    cat >"$TRINO_ETC/log.properties" <<PROPS
io.trino=INFO
PROPS
    _trino_iceberg_catalog seaweed "http://$TB_HOST:$TB_SEAWEED_CATALOG_PORT" \
      "$TB_SEAWEED_WAREHOUSE" "$TB_S3_ACCESS_KEY" "$TB_S3_SECRET_KEY"
    _trino_iceberg_catalog fixture "http://$TB_HOST:$TB_FIXTURE_PORT" \
      "s3://$TB_FIXTURE_BUCKET/" "$TB_FIXTURE_CLIENT_ID" "$TB_FIXTURE_CLIENT_SECRET"
  )
}

trino_start() {
  local java
  if tb_pid trino >/dev/null; then
    tb_log "trino already running (pid $(tb_pid trino))"
    return 0
  fi
  if ! tb_port_free "$TB_TRINO_PORT"; then
    tb_fail trino "port $TB_TRINO_PORT on $TB_HOST is taken by another process"
    return 1
  fi
  java=$(_trino_java) || { tb_fail trino "no Java 24+ found"; return 1; }
  _trino_write_conf
  # The launcher runs the server in the foreground (`run`): its log is trino.log. Trino's
  # AWS SDK must not look for credentials or regions elsewhere.
  tb_start_bg trino env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN \
    -u AWS_PROFILE AWS_EC2_METADATA_DISABLED=true JAVA_HOME="$(dirname "$(dirname "$java")")" \
    "$TRINO_HOME/bin/launcher" run --etc-dir "$TRINO_ETC" --data-dir "$TRINO_DIR/data" \
    --jvm-dir "$(dirname "$(dirname "$java")")"
}

trino_wait() { tb_wait_until trino "$TRINO_WAIT_S" trino_ready; }

trino_stop() { tb_stop trino; }

trino_status() { tb_status_line trino; }

# trino_query SQL: run SQL through Trino's client protocol (POST /v1/statement, then
# follow nextUri to the end); print the rows as JSON, fail on a query error.
trino_query() {
  "$TB_PYTHON" "$TB_REPO/scripts/readers/trino_client.py" --server "$TB_TRINO_URL" \
    --user "$TB_TRINO_USER" "$1"
}

# trino_ready: SELECT 1 answers [[1]], and both REST catalogs list their schemas.
trino_ready() {
  [ "$(trino_query 'SELECT 1')" = '[[1]]' ] || return 1
  trino_query 'SHOW SCHEMAS FROM seaweed' >/dev/null || return 1
  trino_query 'SHOW SCHEMAS FROM fixture' >/dev/null
}
