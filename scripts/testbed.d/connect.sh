# shellcheck shell=bash
# Kafka Connect $CONNECT_VERSION, one standalone worker on 127.0.0.1:$TB_CONNECT_PORT (REST),
# with the Debezium PostgreSQL connector $DEBEZIUM_VERSION on its classpath, producing to
# the shared broker (component kafka) from the test bed's PostgreSQL (component postgres).
#
#  - Jars from Maven Central (scripts/testbed.d/connect/*.xml): the worker (connect-runtime,
#    connect-json, log4j2) into $CONNECT_LIB, the connector (without org.apache.kafka, and
#    without any jar the worker's lib already has) into $DEBEZIUM_LIB; re-resolved when a
#    pom changes.
#  - Started with no connector: tests register theirs through the REST API
#    (POST /connectors) and delete them when done. A standalone worker keeps connector
#    configurations in memory only (a restart forgets them); source offsets go to
#    $CONNECT_DIR/offsets.
#  - The broker does not create topics on demand: connectors must carry
#    topic.creation.default.replication.factor=1 and topic.creation.default.partitions=N
#    (the worker's topic.creation.enable is on).
#  - Default `java` (Connect 4.x needs 17+), or $TB_CONNECT_JAVA.
# Readiness: GET /connector-plugins lists io.debezium.connector.postgresql.PostgresConnector.

CONNECT_VERSION=4.3.1         # keep in step with kafka.version in connect/connect-pom.xml
DEBEZIUM_VERSION=3.6.1.Final  # keep in step with debezium.version in connect/debezium-pom.xml
CONNECT_SRC=$TB_REPO/scripts/testbed.d/connect
CONNECT_HOME=$TB_CACHE/connect/kafka-connect-$CONNECT_VERSION
CONNECT_LIB=$CONNECT_HOME/lib
DEBEZIUM_HOME=$TB_CACHE/connect/debezium-postgres-$DEBEZIUM_VERSION
DEBEZIUM_LIB=$DEBEZIUM_HOME/lib
CONNECT_DIR=$TB_RUN/connect
CONNECT_CONF=$CONNECT_DIR/worker.properties
CONNECT_WAIT_S=${TB_CONNECT_WAIT_S:-120}
TB_CONNECT_PORT=${TB_CONNECT_PORT:-18083}
TB_CONNECT_URL=http://$TB_HOST:$TB_CONNECT_PORT
CONNECT_PROBE_PLUGIN=io.debezium.connector.postgresql.PostgresConnector
# The test bed's own Avro converter (connect/RegistryAvroConverter.java: registry wire format,
# Confluent's schema conventions; Maven Central does not serve Confluent's), compiled here.
CONNECT_CLASSES=$CONNECT_HOME/classes

# _connect_resolve POM LIB MARKER MVN_ARGS...: copy POM's runtime dependencies into LIB
# (atomically) unless LIB was resolved from this very POM; MARKER is a jar LIB must hold.
_connect_resolve() {
  local pom=$1 lib=$2 marker=$3; shift 3
  local want home log
  want=$(sha256sum "$pom" | cut -d' ' -f1)
  if [ -f "$lib/$marker" ] && [ "$(cat "$lib/.stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  home=$(dirname "$lib")
  log=$home/mvn.log
  tb_log "connect: resolving $(basename "$pom") into $lib"
  rm -rf "$lib.tmp"
  mkdir -p "$home"
  if ! mvn -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$lib.tmp" "$@" >"$log" 2>&1 ||
    [ ! -f "$lib.tmp/$marker" ]; then
    tb_log "FAILED: connect: could not resolve $(basename "$pom"); last lines of $log:"
    tail -n 30 "$log" | sed 's/^/    /' >&2
    return 1
  fi
  echo "$want" >"$lib.tmp/.stamp"
  rm -rf "$lib"
  mv "$lib.tmp" "$lib"
}

# connect_install: the worker's jars, then Debezium's (minus those the worker has).
# A worker still running on previous jars is stopped (`up` starts it again).
connect_install() {
  local before after jar
  before=$(cat "$CONNECT_LIB/.stamp" "$DEBEZIUM_LIB/.stamp" "$CONNECT_CLASSES/.stamp" 2>/dev/null || true)
  _connect_resolve "$CONNECT_SRC/connect-pom.xml" "$CONNECT_LIB" \
    "connect-runtime-$CONNECT_VERSION.jar" || return 1
  if [ ! -f "$DEBEZIUM_LIB/.stamp" ] || [ "$CONNECT_LIB/.stamp" -nt "$DEBEZIUM_LIB/.stamp" ]; then
    rm -f "$DEBEZIUM_LIB/.stamp" # the worker's jars changed: dedupe again
  fi
  _connect_resolve "$CONNECT_SRC/debezium-pom.xml" "$DEBEZIUM_LIB" \
    "debezium-connector-postgres-$DEBEZIUM_VERSION.jar" -DexcludeGroupIds=org.apache.kafka || return 1
  # The same jar (same file name, same version) twice on the classpath: keep the worker's.
  for jar in "$DEBEZIUM_LIB"/*.jar; do
    [ ! -f "$CONNECT_LIB/$(basename "$jar")" ] || rm -f "$jar"
  done
  _connect_compile || return 1
  after=$(cat "$CONNECT_LIB/.stamp" "$DEBEZIUM_LIB/.stamp" "$CONNECT_CLASSES/.stamp" 2>/dev/null || true)
  if [ "$after" != "$before" ] && tb_pid connect >/dev/null; then
    tb_log "connect: stopping the worker running on the previous jars"
    connect_stop
  fi
}

# _connect_compile: connect/*.java into $CONNECT_CLASSES (once per source), with the
# ServiceLoader manifest that names the converter.
_connect_compile() {
  local srcs=("$CONNECT_SRC"/*.java) want
  want=$(cat "${srcs[@]}" "$CONNECT_LIB/.stamp" | sha256sum | cut -d' ' -f1)
  [ "$(cat "$CONNECT_CLASSES/.stamp" 2>/dev/null)" != "$want" ] || return 0
  tb_log "connect: compiling $(cd "$CONNECT_SRC" && echo *.java)"
  rm -rf "$CONNECT_CLASSES.tmp"
  mkdir -p "$CONNECT_CLASSES.tmp/META-INF/services"
  javac --release 17 -nowarn -d "$CONNECT_CLASSES.tmp" -cp "$CONNECT_LIB/*" "${srcs[@]}" || return 1
  echo topicberg.testbed.RegistryAvroConverter \
    >"$CONNECT_CLASSES.tmp/META-INF/services/org.apache.kafka.connect.storage.Converter"
  echo "$want" >"$CONNECT_CLASSES.tmp/.stamp"
  rm -rf "$CONNECT_CLASSES"
  mv "$CONNECT_CLASSES.tmp" "$CONNECT_CLASSES"
}

# _connect_java: $TB_CONNECT_JAVA, else the default java.
_connect_java() { echo "${TB_CONNECT_JAVA:-java}"; }

_connect_write_conf() {
  mkdir -p "$CONNECT_DIR"
  cat >"$CONNECT_CONF.tmp" <<EOF
# Generated by scripts/testbed.d/connect.sh; rewritten on every start.
bootstrap.servers=$TB_HOST:$TB_KAFKA_PORT
listeners=http://$TB_HOST:$TB_CONNECT_PORT
rest.advertised.host.name=$TB_HOST
rest.advertised.port=$TB_CONNECT_PORT
# Connectors may set their own (key|value).converter and *.schemas.enable.
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter.schemas.enable=true
offset.storage.file.filename=$CONNECT_DIR/offsets
offset.flush.interval.ms=1000
# Plugins are on the classpath (no plugin.path): found through their ServiceLoader
# manifests, without scanning every class of every jar.
plugin.discovery=service_load
topic.creation.enable=true
# Short-lived test connectors: stop them quickly when deleted.
task.shutdown.graceful.timeout.ms=5000
EOF
  mv "$CONNECT_CONF.tmp" "$CONNECT_CONF"
}

connect_start() {
  if tb_pid connect >/dev/null; then
    tb_log "connect already running (pid $(tb_pid connect))"
    return 0
  fi
  if ! tb_port_free "$TB_CONNECT_PORT"; then
    tb_fail connect "port $TB_HOST:$TB_CONNECT_PORT is taken by a process this test bed does not know"
    return 1
  fi
  _connect_write_conf
  tb_start_bg connect "$(_connect_java)" -Xms128m -Xmx512m -XX:+UseSerialGC \
    -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$CONNECT_SRC/log4j2.properties" \
    -cp "$CONNECT_CLASSES:$CONNECT_LIB/*:$DEBEZIUM_LIB/*" \
    org.apache.kafka.connect.cli.ConnectStandalone "$CONNECT_CONF"
}

# connect_ready: the worker's REST API lists Debezium's PostgreSQL connector.
connect_ready() {
  curl -fsS -m 5 "$TB_CONNECT_URL/connector-plugins" 2>/dev/null |
    grep -q "\"$CONNECT_PROBE_PLUGIN\""
}

connect_wait() { tb_wait_until connect "$CONNECT_WAIT_S" connect_ready; }

# connect_stop: SIGTERM (the worker stops its connectors), SIGKILL after 30 s.
connect_stop() {
  tb_stop connect
  # A worker on this config that the pid file does not know: stop it by its pid.
  local pid
  for pid in $(pgrep -f "ConnectStandalone $CONNECT_CONF\$" || true); do
    tb_log "stopping stray connect (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
}

connect_status() { tb_status_line connect; }
