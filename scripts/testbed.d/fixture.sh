# shellcheck shell=bash
# Apache Iceberg's reference REST catalog (the server inside the apache/iceberg-rest-fixture
# image) on 127.0.0.1:$TB_FIXTURE_PORT: a JDBC catalog on SQLite ($TB_RUN/fixture/catalog.db)
# whose tables live in s3://$TB_FIXTURE_BUCKET/ on SeaweedFS (S3FileIO, path-style).
#
# Maven Central does not serve the fixture's fat jar (iceberg-open-api-test-fixtures-runtime),
# so fixture/pom.xml lists the same pieces (iceberg-core and its test jar, which holds
# RESTCatalogAdapter and RESTCatalogServlet; iceberg-aws + iceberg-aws-bundle; Jetty 11;
# sqlite-jdbc) and fixture/LoopbackRestCatalog.java mounts the fixture's servlet on a Jetty
# connector bound to one address, since RESTCatalogServer's own main binds every interface.
# The catalog has no authentication: any client id and secret get a token.

FIXTURE_ICEBERG_VERSION=1.10.1
FIXTURE_SRC=$TB_REPO/scripts/testbed.d/fixture
FIXTURE_HOME=$TB_CACHE/fixture/iceberg-$FIXTURE_ICEBERG_VERSION
FIXTURE_LIB=$FIXTURE_HOME/lib
FIXTURE_CLASSES=$FIXTURE_HOME/classes
FIXTURE_DIR=$TB_RUN/fixture
FIXTURE_DB=$FIXTURE_DIR/catalog.db
FIXTURE_MAIN=topicberg.testbed.LoopbackRestCatalog

# fixture_install: resolve the pinned jars into $FIXTURE_LIB (once per pom.xml) and compile
# the wrappers (fixture/*.java: this one, and vending.sh's VendingRestCatalog) into
# $FIXTURE_CLASSES (once per source). No network when both are current.
fixture_install() {
  local pom=$FIXTURE_SRC/pom.xml srcs=("$FIXTURE_SRC"/*.java)
  local want_lib want_cls
  want_lib=$(sha256sum "$pom" | cut -d' ' -f1)
  if [ "$(cat "$FIXTURE_LIB/.stamp" 2>/dev/null)" != "$want_lib" ]; then
    tb_log "fixture: resolving Iceberg $FIXTURE_ICEBERG_VERSION REST fixture jars with Maven"
    command -v mvn >/dev/null || { tb_log "fixture: mvn not found"; return 1; }
    rm -rf "$FIXTURE_LIB.tmp"
    mkdir -p "$FIXTURE_HOME"
    if ! mvn -B -q -f "$pom" \
      org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$FIXTURE_LIB.tmp" >"$FIXTURE_HOME/mvn.log" 2>&1; then
      tb_log "fixture: Maven failed, see $FIXTURE_HOME/mvn.log:"
      tail -n 30 "$FIXTURE_HOME/mvn.log" | sed 's/^/    /' >&2
      return 1
    fi
    echo "$want_lib" >"$FIXTURE_LIB.tmp/.stamp"
    rm -rf "$FIXTURE_LIB" "$FIXTURE_CLASSES"
    mv "$FIXTURE_LIB.tmp" "$FIXTURE_LIB"
  fi
  want_cls=$(cat "${srcs[@]}" "$FIXTURE_LIB/.stamp" | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$FIXTURE_CLASSES/.stamp" 2>/dev/null)" != "$want_cls" ]; then
    tb_log "fixture: compiling $(cd "$FIXTURE_SRC" && echo *.java)"
    rm -rf "$FIXTURE_CLASSES.tmp"
    mkdir -p "$FIXTURE_CLASSES.tmp"
    javac --release 17 -nowarn -d "$FIXTURE_CLASSES.tmp" -cp "$FIXTURE_LIB/*" "${srcs[@]}" || return 1
    echo "$want_cls" >"$FIXTURE_CLASSES.tmp/.stamp"
    rm -rf "$FIXTURE_CLASSES"
    mv "$FIXTURE_CLASSES.tmp" "$FIXTURE_CLASSES"
  fi
}

fixture_start() {
  if tb_pid fixture >/dev/null; then
    tb_log "fixture already running (pid $(tb_pid fixture))"
    return 0
  fi
  if ! tb_port_free "$TB_FIXTURE_PORT"; then
    tb_fail fixture "port $TB_FIXTURE_PORT on $TB_HOST is taken by another process"
    return 1
  fi
  mkdir -p "$FIXTURE_DIR"
  # CATALOG_X__Y_Z is catalog property x-y.z (see LoopbackRestCatalog.java).
  # CATALOG_CLIENTS=1: one JDBC connection. With SQLite, a second pooled connection can
  # read an old snapshot under concurrent requests ("Table does not exist" right after a
  # create, SQLITE_BUSY_SNAPSHOT on writes); one connection serializes catalog calls.
  tb_start_bg fixture env \
    CATALOG_CATALOG__IMPL=org.apache.iceberg.jdbc.JdbcCatalog \
    CATALOG_URI="jdbc:sqlite:$FIXTURE_DB?journal_mode=WAL&busy_timeout=10000" \
    CATALOG_JDBC_USER=user \
    CATALOG_JDBC_PASSWORD=password \
    CATALOG_JDBC_SCHEMA__VERSION=V1 \
    CATALOG_CLIENTS=1 \
    CATALOG_WAREHOUSE="s3://$TB_FIXTURE_BUCKET/" \
    CATALOG_IO__IMPL=org.apache.iceberg.aws.s3.S3FileIO \
    CATALOG_S3_ENDPOINT="http://$TB_HOST:$TB_S3_PORT" \
    CATALOG_S3_PATH__STYLE__ACCESS=true \
    CATALOG_CLIENT_REGION="$TB_S3_REGION" \
    CATALOG_REST_HOST="$TB_HOST" \
    CATALOG_REST_PORT="$TB_FIXTURE_PORT" \
    AWS_ACCESS_KEY_ID="$TB_S3_ACCESS_KEY" \
    AWS_SECRET_ACCESS_KEY="$TB_S3_SECRET_KEY" \
    AWS_REGION="$TB_S3_REGION" \
    AWS_EC2_METADATA_DISABLED=true \
    java -Xms64m -Xmx512m -XX:+UseSerialGC -Djava.net.preferIPv4Stack=true \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
    -cp "$FIXTURE_CLASSES:$FIXTURE_LIB/*" "$FIXTURE_MAIN"
}

fixture_wait() { tb_wait_until fixture 90 fixture_ready; }

fixture_stop() { tb_stop fixture; }

fixture_status() { tb_status_line fixture; }

# fixture_ready: a client-credentials token exchange, then GET /v1/config and
# GET /v1/namespaces (which reads the SQLite catalog) with that token, all answering 200.
fixture_ready() {
  local base=http://$TB_HOST:$TB_FIXTURE_PORT body token
  body=$(curl -fsS -m 5 -X POST "$base/v1/oauth/tokens" \
    --data-urlencode grant_type=client_credentials \
    --data-urlencode client_id="$TB_FIXTURE_CLIENT_ID" \
    --data-urlencode client_secret="$TB_FIXTURE_CLIENT_SECRET" \
    --data-urlencode scope=catalog) || return 1
  token=$(printf '%s' "$body" | sed -n 's/.*"access_token"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p')
  [ -n "$token" ] || return 1
  curl -fsS -m 5 -o /dev/null -H "Authorization: Bearer $token" "$base/v1/config" || return 1
  curl -fsS -m 5 -o /dev/null -H "Authorization: Bearer $token" "$base/v1/namespaces"
}
