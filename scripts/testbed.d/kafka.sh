# shellcheck shell=bash
# Apache Kafka: two independent single-node KRaft clusters (broker + controller)
# on 127.0.0.1, from the same jars and the same functions (kafka_node_* NODE):
#  - component `kafka` (node `main`), shared by every test:
#      9092 PLAINTEXT, 9093 SASL_PLAINTEXT (PLAIN + SCRAM-SHA-512), 9094 controller;
#  - component `kafka_faults` (node `faults`), only for fault tests that stop
#    and restart their broker (`scripts/testbed restart-kafka-faults`):
#      9095 PLAINTEXT, 9096 controller.
# Jars come from Maven Central (scripts/testbed.d/kafka/pom.xml) into
# $TB_CACHE/kafka-<version>/lib; config, data and log live in $TB_RUN.
# Readiness: kcat metadata requests on each client listener, plus (main) a
# SASL/SCRAM-SHA-512 login on 9093 with Kafka's Java admin client.

KAFKA_VERSION=4.3.1 # keep in step with kafka.version in kafka/pom.xml
KAFKA_HOME=$TB_CACHE/kafka-$KAFKA_VERSION
KAFKA_LIB=$KAFKA_HOME/lib
KAFKA_SRC=$TB_REPO/scripts/testbed.d/kafka
KAFKA_CONF=$TB_RUN/kafka-server.properties
KAFKA_DATA=$TB_RUN/kafka-data
# Java client settings for SASL/SCRAM-SHA-512 on 9093 (used by kafka_ready; handy by hand).
KAFKA_SCRAM_CLIENT=$TB_RUN/kafka-scram-client.properties
# Fixed cluster id (base64url of "TopicbergTestbed"): same on every machine.
KAFKA_CLUSTER_ID=VG9waWNiZXJnVGVzdGJlZA
KAFKA_WAIT_S=${TB_KAFKA_WAIT_S:-90}
# The faults node: its own config, data dir and cluster id ("TopicbergFaults!").
KAFKA_FAULTS_CONF=$TB_RUN/kafka-faults-server.properties
KAFKA_FAULTS_DATA=$TB_RUN/kafka-faults-data
KAFKA_FAULTS_CLUSTER_ID=VG9waWNiZXJnRmF1bHRzIQ

# kafka_node NODE: sets the caller's K_NAME (component: pid and log file
# name), K_PORT (PLAINTEXT), K_SASL_PORT (empty: no SASL listener),
# K_CTRL_PORT, K_CONF, K_DATA, K_CLUSTER_ID, K_MORE_PORTS (other listeners)
# and K_JAVA_OPTS for node `main`, `faults` or `tls` (kafka_tls.sh).
# Callers declare them `local` first (bash's dynamic scope makes these
# assignments theirs).
kafka_node() {
  case $1 in
    main)
      K_NAME=kafka K_PORT=$TB_KAFKA_PORT K_SASL_PORT=$TB_KAFKA_SASL_PORT
      K_CTRL_PORT=$TB_KAFKA_CONTROLLER_PORT K_CONF=$KAFKA_CONF K_DATA=$KAFKA_DATA
      K_CLUSTER_ID=$KAFKA_CLUSTER_ID K_MORE_PORTS='' K_JAVA_OPTS=''
      ;;
    faults)
      K_NAME=kafka_faults K_PORT=$TB_KAFKA_FAULTS_PORT K_SASL_PORT=
      K_CTRL_PORT=$TB_KAFKA_FAULTS_CONTROLLER_PORT K_CONF=$KAFKA_FAULTS_CONF
      K_DATA=$KAFKA_FAULTS_DATA K_CLUSTER_ID=$KAFKA_FAULTS_CLUSTER_ID K_MORE_PORTS='' K_JAVA_OPTS=''
      ;;
    tls)
      K_NAME=kafka_tls K_PORT=$TB_KAFKA_TLS_ADMIN_PORT K_SASL_PORT=
      K_CTRL_PORT=$TB_KAFKA_TLS_CONTROLLER_PORT K_CONF=$KAFKA_TLS_CONF K_DATA=$KAFKA_TLS_DATA
      K_CLUSTER_ID=$KAFKA_TLS_CLUSTER_ID
      K_MORE_PORTS="$TB_KAFKA_TLS_PORT $TB_KAFKA_MTLS_PORT $TB_KAFKA_SASL_SSL_PORT $TB_KAFKA_OAUTH_PORT $TB_KAFKA_TLS_EXPIRED_PORT $TB_KAFKA_TLS_WRONG_HOST_PORT"
      # Kafka 4 reads a JWKS only from URLs allowed here.
      K_JAVA_OPTS=-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file://$KAFKA_TLS_PKI/jwks.json
      ;;
    *)
      tb_log "unknown kafka node '$1'"
      return 1
      ;;
  esac
}

# Installs kcat (used for readiness) and the Kafka jars. No network when both are there.
kafka_install() {
  if ! command -v kcat >/dev/null 2>&1; then
    tb_log "installing kcat (apt)"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q kcat >/dev/null 2>&1; then
      apt-get update -q >/dev/null
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q kcat >/dev/null
    fi
  fi

  # The stamp records the pom it was resolved from: an edited pom re-resolves.
  local stamp=$KAFKA_HOME/.complete want
  want=$(sha256sum "$KAFKA_SRC/pom.xml" | cut -d' ' -f1)
  if [ -f "$KAFKA_LIB/kafka_2.13-$KAFKA_VERSION.jar" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  tb_log "downloading Apache Kafka $KAFKA_VERSION and its dependencies into $KAFKA_LIB"
  rm -rf "$KAFKA_LIB.tmp"
  mkdir -p "$KAFKA_HOME"
  local mvnlog=$KAFKA_HOME/mvn.log
  if ! mvn -B -Dstyle.color=never -f "$KAFKA_SRC/pom.xml" dependency:copy-dependencies \
    -Dkafka.version="$KAFKA_VERSION" -DincludeScope=runtime \
    -DoutputDirectory="$KAFKA_LIB.tmp" >"$mvnlog" 2>&1 ||
    [ ! -f "$KAFKA_LIB.tmp/kafka_2.13-$KAFKA_VERSION.jar" ]; then
    tb_log "FAILED: kafka: could not resolve the Kafka jars; last lines of $mvnlog:"
    tail -n 30 "$mvnlog" | sed 's/^/    /' >&2
    return 1
  fi
  rm -rf "$KAFKA_LIB"
  mv "$KAFKA_LIB.tmp" "$KAFKA_LIB"
  echo "$want" >"$stamp"
}

# kafka_tool MAIN_CLASS ARGS...: run a Kafka CLI class from the cached jars
# (short-lived JVM: quick start-up flags; warnings only, on stderr).
kafka_tool() {
  java -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$KAFKA_SRC/tools-log4j2.properties" \
    -cp "$KAFKA_LIB/*" "$@"
}

# kafka_node_write_config NODE: the node's server.properties (main: with the
# SASL listener, and the SCRAM client settings beside it).
kafka_node_write_config() {
  local K_NAME K_PORT K_SASL_PORT K_CTRL_PORT K_CONF K_DATA K_CLUSTER_ID K_MORE_PORTS K_JAVA_OPTS
  kafka_node "$1" || return 1
  local listeners="PLAINTEXT://$TB_HOST:$K_PORT"
  local advertised="PLAINTEXT://$TB_HOST:$K_PORT"
  local protocols="PLAINTEXT:PLAINTEXT"
  if [ -n "$K_SASL_PORT" ]; then
    listeners+=",SASL_PLAINTEXT://$TB_HOST:$K_SASL_PORT"
    advertised+=",SASL_PLAINTEXT://$TB_HOST:$K_SASL_PORT"
    protocols+=",SASL_PLAINTEXT:SASL_PLAINTEXT"
  fi
  listeners+=",CONTROLLER://$TB_HOST:$K_CTRL_PORT"
  protocols+=",CONTROLLER:PLAINTEXT"
  mkdir -p "$TB_RUN" "$K_DATA"
  {
    cat <<EOF
# Generated by scripts/testbed.d/kafka.sh; rewritten on every start.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$TB_HOST:$K_CTRL_PORT
controller.listener.names=CONTROLLER
listeners=$listeners
advertised.listeners=$advertised
listener.security.protocol.map=$protocols
inter.broker.listener.name=PLAINTEXT
EOF
    if [ -n "$K_SASL_PORT" ]; then
      cat <<EOF

# SASL on $K_SASL_PORT: PLAIN users live in this JAAS line, SCRAM users in the metadata log
# (created by 'StorageTool format --add-scram').
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$TB_KAFKA_PLAIN_USER="$TB_KAFKA_PLAIN_PASSWORD";
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
EOF
    fi
    if [ "$1" = faults ]; then
      cat <<EOF

# The fault-test broker offers only the classic consumer group protocol, as
# Kafka before 4.0 does: followers there must fall back from KIP-848's.
group.coordinator.rebalance.protocols=classic
EOF
    fi
    cat <<EOF

log.dirs=$K_DATA
auto.create.topics.enable=false
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=5
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=5
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# KIP-848 consumer groups: a member that stops heartbeating is fenced after 10 s
# and its partitions go to the others (the default, 45 s, would make every kill
# round of the followers' and workers' tests wait that long). The bounds below
# the broker's defaults (45 s, 5 s) are lowered so that these are allowed.
group.consumer.min.session.timeout.ms=3000
group.consumer.session.timeout.ms=10000
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=1000
# After a kill the old registration must expire before the restarted broker can
# register again (default 9 s); 5 s still rides out GC pauses on a busy box.
broker.session.timeout.ms=5000
broker.heartbeat.interval.ms=1000

# Small box: few threads, modest segments.
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
log.segment.bytes=67108864
EOF
  } >"$K_CONF.tmp"
  mv "$K_CONF.tmp" "$K_CONF"
  [ -n "$K_SASL_PORT" ] || return 0
  cat >"$KAFKA_SCRAM_CLIENT" <<EOF
bootstrap.servers=$TB_HOST:$K_SASL_PORT
security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$TB_KAFKA_SCRAM_USER" password="$TB_KAFKA_SCRAM_PASSWORD";
request.timeout.ms=5000
default.api.timeout.ms=10000
EOF
}

# kafka_node_format NODE: formats the node's log dir (cluster id; main also
# gets the SCRAM user) unless it already is. A broker that was killed keeps
# its formatted dir and simply starts again on it.
kafka_node_format() {
  local K_NAME K_PORT K_SASL_PORT K_CTRL_PORT K_CONF K_DATA K_CLUSTER_ID K_MORE_PORTS K_JAVA_OPTS
  kafka_node "$1" || return 1
  [ -f "$K_DATA/meta.properties" ] && return 0
  tb_log "formatting Kafka log dir $K_DATA"
  local scram=()
  if [ -n "$K_SASL_PORT" ]; then
    scram=(--add-scram "SCRAM-SHA-512=[name=$TB_KAFKA_SCRAM_USER,password=$TB_KAFKA_SCRAM_PASSWORD]")
  fi
  if [ "$1" = tls ]; then
    scram=(--add-scram "SCRAM-SHA-256=[name=$TB_KAFKA_SCRAM_USER,password=$TB_KAFKA_SCRAM_PASSWORD]"
      --add-scram "SCRAM-SHA-512=[name=$TB_KAFKA_SCRAM_USER,password=$TB_KAFKA_SCRAM_PASSWORD]")
  fi
  kafka_tool kafka.tools.StorageTool format \
    --cluster-id "$K_CLUSTER_ID" --config "$K_CONF" "${scram[@]}" \
    >>"$(tb_logfile "$K_NAME")" 2>&1 || {
    tb_fail "$K_NAME" "StorageTool format failed"
    return 1
  }
}

# kafka_node_start NODE: starts the node's broker in the background unless it
# already runs.
kafka_node_start() {
  local K_NAME K_PORT K_SASL_PORT K_CTRL_PORT K_CONF K_DATA K_CLUSTER_ID K_MORE_PORTS K_JAVA_OPTS
  kafka_node "$1" || return 1
  if tb_pid "$K_NAME" >/dev/null; then
    tb_log "$K_NAME already running (pid $(tb_pid "$K_NAME"))"
    return 0
  fi
  local port
  for port in $K_PORT $K_SASL_PORT $K_CTRL_PORT $K_MORE_PORTS; do
    if ! tb_port_free "$port"; then
      tb_fail "$K_NAME" "port $TB_HOST:$port is taken by a process this test bed does not know (a stray broker?)"
      return 1
    fi
  done
  if [ "$1" = tls ]; then kafka_tls_write_config; else kafka_node_write_config "$1"; fi
  kafka_node_format "$1" || return 1
  local heap=512m
  [ "$1" != tls ] || heap=384m
  # shellcheck disable=SC2086 # K_JAVA_OPTS: zero or more options
  tb_start_bg "$K_NAME" java -Xms$heap -Xmx$heap -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -Djava.awt.headless=true $K_JAVA_OPTS \
    -Dlog4j2.configurationFile="$KAFKA_SRC/log4j2.properties" \
    -Dkafka.logs.dir="$TB_RUN" \
    -cp "$KAFKA_LIB/*" kafka.Kafka "$K_CONF"
}

# kafka_node_stop NODE: SIGTERM (Kafka shuts down cleanly), SIGKILL after 30 s.
kafka_node_stop() {
  local K_NAME K_PORT K_SASL_PORT K_CTRL_PORT K_CONF K_DATA K_CLUSTER_ID K_MORE_PORTS K_JAVA_OPTS
  kafka_node "$1" || return 1
  tb_stop "$K_NAME"
  # A broker on this config that the pid file does not know (started by hand,
  # or the pid file was lost): stop it by its pid, never by a broad name.
  local pids pid alive _
  pids=$(pgrep -f "kafka\.Kafka $K_CONF\$" || true)
  [ -n "$pids" ] || return 0
  for pid in $pids; do
    tb_log "stopping stray $K_NAME (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
  done
  for _ in $(seq 1 300); do
    alive=0
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && return 0
    sleep 0.1
  done
  for pid in $pids; do kill -KILL "$pid" 2>/dev/null || true; done
}

# Readiness: a metadata request on each client listener, and a SCRAM login.
#  - 9092 and 9093 (SASL/PLAIN): kcat -L must list this broker.
#  - 9093 SASL/SCRAM-SHA-512: Debian's kcat links librdkafka 2.0.2, whose SCRAM
#    client-final message Kafka 4.x rejects (librdkafka bug fixed in 2.6.1), so
#    the SCRAM login goes through Kafka's own Java admin client (ClusterTool,
#    about 2 s) and must return this cluster's id.
kafka_kcat_metadata() { # PORT KCAT_ARGS...
  local port=$1; shift
  kcat -b "$TB_HOST:$port" -L -m 2 "$@" 2>/dev/null | grep -q "broker 1 at $TB_HOST:$port"
}

kafka_ready_scram() {
  [ -f "$KAFKA_SCRAM_CLIENT" ] || return 1
  timeout 30 java -Xmx128m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$KAFKA_SRC/tools-log4j2.properties" -cp "$KAFKA_LIB/*" \
    org.apache.kafka.tools.ClusterTool cluster-id \
    --bootstrap-server "$TB_HOST:$TB_KAFKA_SASL_PORT" --command-config "$KAFKA_SCRAM_CLIENT" 2>/dev/null \
    | grep -q "Cluster ID: $KAFKA_CLUSTER_ID"
}

# --- the shared broker (component kafka) --------------------------------------
kafka_write_config() { kafka_node_write_config main; }
kafka_format() { kafka_node_format main; }
kafka_start() { kafka_node_start main; }
kafka_ready() {
  kafka_kcat_metadata "$TB_KAFKA_PORT" &&
    kafka_kcat_metadata "$TB_KAFKA_SASL_PORT" -X security.protocol=SASL_PLAINTEXT \
      -X sasl.mechanisms=PLAIN -X sasl.username="$TB_KAFKA_PLAIN_USER" \
      -X sasl.password="$TB_KAFKA_PLAIN_PASSWORD" &&
    kafka_ready_scram
}
kafka_wait() { tb_wait_until kafka "$KAFKA_WAIT_S" kafka_ready; }
kafka_stop() { kafka_node_stop main; }
kafka_status() { tb_status_line kafka; }

# --- the fault-test broker (component kafka_faults) ---------------------------
kafka_faults_install() { :; } # the same jars and kcat, installed by kafka_install
kafka_faults_start() { kafka_node_start faults; }
kafka_faults_ready() { kafka_kcat_metadata "$TB_KAFKA_FAULTS_PORT"; }
kafka_faults_wait() { tb_wait_until kafka_faults "$KAFKA_WAIT_S" kafka_faults_ready; }
kafka_faults_stop() { kafka_node_stop faults; }
kafka_faults_status() { tb_status_line kafka_faults; }

# kafka_faults_restart: stops the fault-test broker with SIGTERM (as an
# operator's rolling restart would), waits until its ports are closed, starts
# it again on the same data dir and waits until it answers.
kafka_faults_restart() {
  local t0=$SECONDS deadline port
  kafka_faults_stop
  deadline=$((SECONDS + 30))
  for port in "$TB_KAFKA_FAULTS_PORT" "$TB_KAFKA_FAULTS_CONTROLLER_PORT"; do
    while ! tb_port_free "$port"; do
      if [ $SECONDS -ge $deadline ]; then
        tb_fail kafka_faults "port $TB_HOST:$port still open 30 s after the broker stopped"
        return 1
      fi
      sleep 0.1
    done
  done
  kafka_faults_start || return 1
  kafka_faults_wait || return 1
  tb_log "kafka_faults restarted in $((SECONDS - t0))s"
}

# kafka_throttle_consumer BOOTSTRAP CLIENT_ID BYTES_PER_S: a broker quota
# (consumer_byte_rate) for one client id, so a test can make a sync's fetches
# last long enough to inject a fault in the middle; 0 removes it.
kafka_throttle_consumer() {
  local usage="kafka_throttle_consumer BOOTSTRAP CLIENT_ID BYTES_PER_S"
  local bootstrap=${1:?$usage} client=${2:?$usage} rate=${3:?$usage}
  local change=(--add-config "consumer_byte_rate=$rate")
  [ "$rate" != 0 ] || change=(--delete-config consumer_byte_rate)
  kafka_tool kafka.admin.ConfigCommand --bootstrap-server "$bootstrap" \
    --alter --entity-type clients --entity-name "$client" "${change[@]}"
}

# kafka_create_topic NAME PARTITIONS: create a topic (replication factor 1) on
# the running broker; no error if it already exists.
kafka_create_topic() {
  local name=${1:?kafka_create_topic NAME PARTITIONS} partitions=${2:?kafka_create_topic NAME PARTITIONS}
  kafka_tool org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "$TB_HOST:$TB_KAFKA_PORT" \
    --create --if-not-exists --topic "$name" \
    --partitions "$partitions" --replication-factor 1
}
