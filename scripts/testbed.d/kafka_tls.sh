# shellcheck shell=bash
# Component `kafka_tls`: a third single-node KRaft cluster (node `tls`, the
# same jars and kafka_node_* functions as kafka.sh) with the listeners cloud
# clusters use, a CA and certificates made here with openssl (nothing
# downloaded), and an OAuth 2.0 token endpoint whose JWTs the broker checks:
#   9097 PLAINTEXT  admin and inter-broker (super user: tests create topics
#                   and produce here)
#   9098 SSL        server authentication (certificate for 127.0.0.1/localhost)
#   9099 SSL        mutual TLS: a client certificate signed by the CA required
#   9100 SASL_SSL   PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
#   9101 SASL_SSL   OAUTHBEARER: JWTs (RS256) checked against jwks.json
#   9102 SSL        an expired certificate (for the failure case)
#   9103 SSL        a certificate for another host name (for the failure case)
#   9104            KRaft controller
#   9105 HTTP       token endpoint (client credentials) -> kafka_tls_token.py
# ACLs (StandardAuthorizer, everything allowed where no ACL exists): topics
# and groups starting with `tls_denied` are readable by User:nobody only, so
# every test user is refused there (the authorization failure case).

TB_KAFKA_TLS_ADMIN_PORT=9097
TB_KAFKA_TLS_PORT=9098
TB_KAFKA_MTLS_PORT=9099
TB_KAFKA_SASL_SSL_PORT=9100
TB_KAFKA_OAUTH_PORT=9101
TB_KAFKA_TLS_EXPIRED_PORT=9102
TB_KAFKA_TLS_WRONG_HOST_PORT=9103
TB_KAFKA_TLS_CONTROLLER_PORT=9104
TB_KAFKA_OAUTH_TOKEN_PORT=9105
TB_KAFKA_OAUTH_CLIENT_ID=tb-oauth-client
TB_KAFKA_OAUTH_CLIENT_SECRET=tb-oauth-secret
# shellcheck disable=SC2034 # exported by scripts/testbed env
TB_KAFKA_OAUTH_SCOPE=kafka
TB_KAFKA_OAUTH_AUDIENCE=topicberg-testbed
TB_KAFKA_OAUTH_TTL_S=${TB_KAFKA_OAUTH_TTL_S:-300}
TB_KAFKA_TLS_DENIED_PREFIX=tls_denied

KAFKA_TLS_CONF=$TB_RUN/kafka-tls-server.properties
KAFKA_TLS_DATA=$TB_RUN/kafka-tls-data
# shellcheck disable=SC2034 # read by kafka_node (kafka.sh)
KAFKA_TLS_CLUSTER_ID=VG9waWNiZXJnVExTb25lIQ # "TopicbergTLSone!"
KAFKA_TLS_PKI=$TB_RUN/kafka-tls-pki
KAFKA_TLS_ISSUER=http://$TB_HOST:$TB_KAFKA_OAUTH_TOKEN_PORT

# _kafka_tls_sign NAME CA SUBJECT SAN [START END]: key NAME.key, certificate
# NAME.crt signed by CA (CA.crt, CA.key), NAME.pem = key + certificate + CA
# (Kafka's PEM key store). START/END (YYYYMMDDHHMMSSZ) set the validity.
_kafka_tls_sign() {
  local name=$1 ca=$2 subject=$3 san=$4 start=${5:-} end=${6:-} d=$KAFKA_TLS_PKI
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$d/$name.key" 2>/dev/null
  openssl req -new -key "$d/$name.key" -subj "$subject" -out "$d/$name.csr"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n%s' \
    "${san:+subjectAltName=$san}" >"$d/$name.ext"
  if [ -n "$start" ]; then
    # `openssl ca` is the only openssl 3.0 command that takes explicit dates.
    mkdir -p "$d/$ca.db"
    : >"$d/$ca.db/index.txt"
    cat >"$d/$ca.db/ca.cnf" <<CNF
[ca]
default_ca = tb
[tb]
database = $d/$ca.db/index.txt
new_certs_dir = $d/$ca.db
certificate = $d/$ca.crt
private_key = $d/$ca.key
serial = $d/$ca.db/serial
default_md = sha256
policy = any
unique_subject = no
[any]
commonName = supplied
CNF
    openssl rand -hex 8 >"$d/$ca.db/serial"
    openssl ca -batch -config "$d/$ca.db/ca.cnf" -notext -startdate "$start" -enddate "$end" \
      -extfile "$d/$name.ext" -in "$d/$name.csr" -out "$d/$name.crt" 2>/dev/null
  else
    openssl x509 -req -in "$d/$name.csr" -CA "$d/$ca.crt" -CAkey "$d/$ca.key" -CAcreateserial \
      -days 3650 -sha256 -extfile "$d/$name.ext" -out "$d/$name.crt" 2>/dev/null
  fi
  cat "$d/$name.key" "$d/$name.crt" "$d/$ca.crt" >"$d/$name.pem"
  rm -f "$d/$name.csr" "$d/$name.ext"
}

# kafka_tls_pki: the CA, the broker's certificates, the client certificates
# and the JWT signing key, made once (kept in $KAFKA_TLS_PKI).
kafka_tls_pki() {
  local d=$KAFKA_TLS_PKI ca
  [ -f "$d/.complete" ] && return 0
  tb_log "making the kafka_tls CA and certificates in $d"
  rm -rf "$d"
  mkdir -p "$d"
  for ca in ca rogue-ca; do
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/$ca.key" -out "$d/$ca.crt" -days 3650 \
      -subj "/O=topicberg test bed/CN=topicberg $ca" -sha256 \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
  done
  local san="DNS:localhost,IP:$TB_HOST"
  _kafka_tls_sign broker ca "/O=topicberg test bed/CN=localhost" "$san"
  _kafka_tls_sign broker-expired ca "/O=topicberg test bed/CN=localhost" "$san" 20200101000000Z 20200201000000Z
  _kafka_tls_sign broker-wrong-host ca "/O=topicberg test bed/CN=wrong.example.com" "DNS:wrong.example.com"
  _kafka_tls_sign client ca "/O=topicberg test bed/CN=topicberg-client" ""
  _kafka_tls_sign rogue-client rogue-ca "/O=topicberg test bed/CN=rogue-client" ""
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$d/jwt.key" 2>/dev/null
  "$TB_PYTHON" "$TB_REPO/scripts/testbed.d/kafka_tls_jwks.py" "$d/jwt.key" >"$d/jwks.json"
  touch "$d/.complete"
}

# kafka_tls_write_config: the node's server.properties (called by kafka_node_start).
kafka_tls_write_config() {
  local d=$KAFKA_TLS_PKI h=$TB_HOST
  local sasl_jaas=org.apache.kafka.common.security.plain.PlainLoginModule
  local scram_jaas=org.apache.kafka.common.security.scram.ScramLoginModule
  local oauth=org.apache.kafka.common.security.oauthbearer
  mkdir -p "$TB_RUN" "$KAFKA_TLS_DATA"
  cat >"$KAFKA_TLS_CONF.tmp" <<PROPS
# Generated by scripts/testbed.d/kafka_tls.sh; rewritten on every start.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$h:$TB_KAFKA_TLS_CONTROLLER_PORT
controller.listener.names=CONTROLLER
listeners=ADMIN://$h:$TB_KAFKA_TLS_ADMIN_PORT,TLS://$h:$TB_KAFKA_TLS_PORT,MTLS://$h:$TB_KAFKA_MTLS_PORT,SASL://$h:$TB_KAFKA_SASL_SSL_PORT,OAUTH://$h:$TB_KAFKA_OAUTH_PORT,EXPIRED://$h:$TB_KAFKA_TLS_EXPIRED_PORT,WRONGHOST://$h:$TB_KAFKA_TLS_WRONG_HOST_PORT,CONTROLLER://$h:$TB_KAFKA_TLS_CONTROLLER_PORT
advertised.listeners=ADMIN://$h:$TB_KAFKA_TLS_ADMIN_PORT,TLS://$h:$TB_KAFKA_TLS_PORT,MTLS://$h:$TB_KAFKA_MTLS_PORT,SASL://$h:$TB_KAFKA_SASL_SSL_PORT,OAUTH://$h:$TB_KAFKA_OAUTH_PORT,EXPIRED://$h:$TB_KAFKA_TLS_EXPIRED_PORT,WRONGHOST://$h:$TB_KAFKA_TLS_WRONG_HOST_PORT
listener.security.protocol.map=ADMIN:PLAINTEXT,TLS:SSL,MTLS:SSL,SASL:SASL_SSL,OAUTH:SASL_SSL,EXPIRED:SSL,WRONGHOST:SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=ADMIN

# TLS: PEM key stores (key + certificate + CA), one per listener kind.
ssl.keystore.type=PEM
ssl.keystore.location=$d/broker.pem
ssl.truststore.type=PEM
ssl.truststore.location=$d/ca.crt
listener.name.mtls.ssl.client.auth=required
listener.name.expired.ssl.keystore.location=$d/broker-expired.pem
listener.name.wronghost.ssl.keystore.location=$d/broker-wrong-host.pem
# A client certificate's principal is its CN (User:topicberg-client).
ssl.principal.mapping.rules=RULE:^.*CN=([^,]*).*\$/\$1/,DEFAULT

# SASL: PLAIN users in the JAAS line, SCRAM users in the metadata log
# ('StorageTool format --add-scram'), OAUTHBEARER JWTs checked against jwks.json.
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
listener.name.sasl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl.plain.sasl.jaas.config=$sasl_jaas required user_$TB_KAFKA_PLAIN_USER="$TB_KAFKA_PLAIN_PASSWORD";
listener.name.sasl.scram-sha-256.sasl.jaas.config=$scram_jaas required;
listener.name.sasl.scram-sha-512.sasl.jaas.config=$scram_jaas required;
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=$oauth.OAuthBearerLoginModule required;
listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=$oauth.OAuthBearerValidatorCallbackHandler
sasl.oauthbearer.jwks.endpoint.url=file://$d/jwks.json
sasl.oauthbearer.expected.audience=$TB_KAFKA_OAUTH_AUDIENCE
sasl.oauthbearer.expected.issuer=$KAFKA_TLS_ISSUER

# ACLs: allowed where none exist; tls_denied* topics and groups have some.
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=true
super.users=User:ANONYMOUS

log.dirs=$KAFKA_TLS_DATA
auto.create.topics.enable=false
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
log.segment.bytes=16777216
PROPS
  mv "$KAFKA_TLS_CONF.tmp" "$KAFKA_TLS_CONF"
}

kafka_tls_install() { :; } # the jars and kcat of kafka_install; openssl; the venv's cryptography

kafka_tls_start() {
  kafka_tls_pki || return 1
  tb_start_bg kafka_tls_token "$TB_PYTHON" "$TB_REPO/scripts/testbed.d/kafka_tls_token.py" \
    "$TB_KAFKA_OAUTH_TOKEN_PORT" "$KAFKA_TLS_PKI/jwt.key" "$TB_KAFKA_OAUTH_CLIENT_ID" \
    "$TB_KAFKA_OAUTH_CLIENT_SECRET" "$TB_KAFKA_OAUTH_AUDIENCE" "$KAFKA_TLS_ISSUER" "$TB_KAFKA_OAUTH_TTL_S"
  kafka_node_start tls
}

kafka_tls_ready() {
  kafka_kcat_metadata "$TB_KAFKA_TLS_ADMIN_PORT" &&
    kafka_kcat_metadata "$TB_KAFKA_TLS_PORT" -X security.protocol=SSL \
      -X ssl.ca.location="$KAFKA_TLS_PKI/ca.crt" &&
    curl -fsS "http://$TB_HOST:$TB_KAFKA_OAUTH_TOKEN_PORT/health" >/dev/null
}

# kafka_tls_acls: the authorization failure case's ACLs (idempotent).
kafka_tls_acls() {
  local t
  for t in topic group; do
    kafka_tool org.apache.kafka.tools.AclCommand --bootstrap-server "$TB_HOST:$TB_KAFKA_TLS_ADMIN_PORT" \
      --add --allow-principal User:nobody --operation All --"$t" "$TB_KAFKA_TLS_DENIED_PREFIX" \
      --resource-pattern-type prefixed >/dev/null || return 1
  done
}

kafka_tls_wait() {
  tb_wait_until kafka_tls "$KAFKA_WAIT_S" kafka_kcat_metadata "$TB_KAFKA_TLS_ADMIN_PORT" || return 1
  kafka_tls_acls || { tb_fail kafka_tls "could not add the ACLs"; return 1; }
  tb_wait_until kafka_tls "$KAFKA_WAIT_S" kafka_tls_ready
}

kafka_tls_stop() {
  tb_stop kafka_tls_token
  kafka_node_stop tls
}
kafka_tls_status() { tb_status_line kafka_tls; }
