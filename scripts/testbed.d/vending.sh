# shellcheck shell=bash
# Two emulations of production REST catalog contracts, each Iceberg's reference REST
# catalog (the fixture's servlet) behind fixture/VendingRestCatalog.java, and the S3
# gateway whose temporary credentials they vend. Emulations of the contracts, not the
# products (Apache Polaris and Databricks Unity Catalog do not run here).
#
#   vending_s3  a second SeaweedFS S3 gateway (`weed s3` on the same filer as component
#               seaweed) on $TB_VENDING_S3_PORT with SeaweedFS' STS: AssumeRole answers
#               temporary credentials (key, secret, session token) that expire after
#               $TB_VENDING_TTL_S seconds, enforced by the gateway itself (403 after).
#               Its only long-lived key is the catalogs' own ($TB_VENDING_ADMIN_KEY, never
#               exported); buckets $TB_VENDING_BUCKET and $TB_UNITY_BUCKET live here.
#   vending     the "vended credentials" contract, shaped like Polaris': uri
#               http://127.0.0.1:$TB_VENDING_PORT/api/catalog, OAuth2 client credentials
#               at .../v1/oauth/tokens (scope PRINCIPAL_ROLE:ALL), warehouse = catalog
#               name $TB_VENDING_WAREHOUSE (prefix the same), tables in s3://$TB_VENDING_BUCKET/.
#   unity       Unity Catalog's contract as issue #15 describes it: uri
#               http://127.0.0.1:$TB_UNITY_PORT/api/2.1/unity-catalog/iceberg-rest, a static
#               bearer token only (OAuth2 refused), warehouse = catalog name
#               $TB_UNITY_WAREHOUSE (prefix catalogs/<name>), format v3 only, commits adding
#               position (non-DV) or equality delete files refused; tables in s3://$TB_UNITY_BUCKET/.
#
# Both catalogs vend on create/load table when asked (X-Iceberg-Access-Delegation:
# vended-credentials): config + storage-credentials with s3.access-key-id,
# s3.secret-access-key, s3.session-token, s3.session-token-expires-at-ms, s3.endpoint,
# s3.path-style-access, client.region, scoped (STS session policy) to the table's
# location; GET .../tables/{t}/credentials answers fresh ones.
#
# TB_VENDING_TTL_S (default 120) is the gateway's STS token lifetime, read when the
# gateway starts: a changed value needs `scripts/testbed down` + `up` (or stopping
# vending_s3 alone: kill the pid in $TB_RUN/vending_s3.pid).

TB_VENDING_S3_PORT=${TB_VENDING_S3_PORT:-8334}        # vending S3 gateway (gRPC +10000)
TB_VENDING_PORT=${TB_VENDING_PORT:-8183}              # vending catalog
TB_UNITY_PORT=${TB_UNITY_PORT:-8184}                  # unity catalog
TB_VENDING_TTL_S=${TB_VENDING_TTL_S:-120}
TB_VENDING_BUCKET=vending
TB_UNITY_BUCKET=unity
TB_VENDING_WAREHOUSE=vending
TB_UNITY_WAREHOUSE=unity
TB_VENDING_CONTEXT=/api/catalog
TB_UNITY_CONTEXT=/api/2.1/unity-catalog/iceberg-rest
TB_VENDING_CLIENT_ID=tb-vending
TB_VENDING_CLIENT_SECRET=tb-vending-secret
TB_VENDING_SCOPE=PRINCIPAL_ROLE:ALL
TB_UNITY_TOKEN=dapi-tb-unity-0123456789abcdef
# The catalogs' own key on the vending gateway (not exported, never vended).
TB_VENDING_ADMIN_KEY=tb-vending-catalog
TB_VENDING_ADMIN_SECRET=tb-vending-catalog-secret
TB_VENDING_ROLE_ARN=arn:aws:iam::000000000000:role/TopicbergVendedTable
# Signs the STS session tokens (test-only; fixed so tokens survive a gateway restart).
TB_VENDING_STS_KEY=dGItdmVuZGluZy1zdHMtc2lnbmluZy1rZXktMzItYnl0ZXMh

TB_VENDING_S3_URL=http://$TB_HOST:$TB_VENDING_S3_PORT
TB_VENDING_URI=http://$TB_HOST:$TB_VENDING_PORT$TB_VENDING_CONTEXT
TB_UNITY_URI=http://$TB_HOST:$TB_UNITY_PORT$TB_UNITY_CONTEXT
VENDING_S3_DIR=$TB_RUN/vending_s3
VENDING_MAIN=topicberg.testbed.VendingRestCatalog

# --- vending_s3: the S3 gateway with STS -------------------------------------

vending_s3_install() { seaweed_install; }

# The identities file (the catalogs' key, Admin on this gateway only) and the
# advanced IAM file (STS lifetime and signing key; one role, trusted by any
# principal of this gateway, allowed s3:* on the two buckets; each vend narrows it
# to one table with a session policy).
_vending_s3_config() {
  mkdir -p "$VENDING_S3_DIR"
  cat >"$VENDING_S3_DIR/identities.json" <<JSON
{"identities": [{"name": "vending-catalog",
  "credentials": [{"accessKey": "$TB_VENDING_ADMIN_KEY", "secretKey": "$TB_VENDING_ADMIN_SECRET"}],
  "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
JSON
  cat >"$VENDING_S3_DIR/iam.json" <<JSON
{
  "sts": {"tokenDuration": "${TB_VENDING_TTL_S}s", "maxSessionLength": "12h",
          "issuer": "topicberg-testbed-vending", "signingKey": "$TB_VENDING_STS_KEY"},
  "policy": {"defaultEffect": "Deny", "storeType": "memory"},
  "roles": [{"roleName": "TopicbergVendedTable", "roleArn": "$TB_VENDING_ROLE_ARN",
    "trustPolicy": {"Version": "2012-10-17", "Statement": [
      {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": ["sts:AssumeRole"]}]},
    "attachedPolicies": ["TopicbergVendingBuckets"]}],
  "policies": [{"name": "TopicbergVendingBuckets", "document": {"Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": [
      "arn:aws:s3:::$TB_VENDING_BUCKET", "arn:aws:s3:::$TB_VENDING_BUCKET/*",
      "arn:aws:s3:::$TB_UNITY_BUCKET", "arn:aws:s3:::$TB_UNITY_BUCKET/*"]}]}}]
}
JSON
  echo "$TB_VENDING_TTL_S" >"$VENDING_S3_DIR/ttl"
}

vending_s3_start() {
  local sock extra=()
  if tb_pid vending_s3 >/dev/null; then
    tb_log "vending_s3 already running (pid $(tb_pid vending_s3))"
    return 0
  fi
  local p
  for p in "$TB_VENDING_S3_PORT" $((TB_VENDING_S3_PORT + 10000)); do
    if ! tb_port_free "$p"; then
      tb_fail vending_s3 "port $p on $TB_HOST is taken by another process"
      return 1
    fi
  done
  _vending_s3_config
  sock=$VENDING_S3_DIR/s3.sock
  [ ${#sock} -lt 100 ] && extra+=("-localSocket=$sock")
  mkdir -p "$VENDING_S3_DIR/tmp"
  TMPDIR=$VENDING_S3_DIR/tmp GOMEMLIMIT=256MiB \
    tb_start_bg vending_s3 "$TB_WEED" s3 \
    -filer="$TB_HOST:$TB_SEAWEED_FILER_PORT" \
    -ip.bind="$TB_HOST" \
    -port="$TB_VENDING_S3_PORT" \
    -port.grpc=$((TB_VENDING_S3_PORT + 10000)) \
    -port.iceberg=0 \
    -port.lance=0 \
    -config="$VENDING_S3_DIR/identities.json" \
    -iam.config="$VENDING_S3_DIR/iam.json" \
    "${extra[@]}"
}

# curl, SigV4-signed with the catalogs' key on the vending gateway.
_vending_s3() {
  curl -sS --max-time 10 --aws-sigv4 "aws:amz:$TB_S3_REGION:s3" \
    --user "$TB_VENDING_ADMIN_KEY:$TB_VENDING_ADMIN_SECRET" "$@"
}

_vending_s3_code() { _vending_s3 -o /dev/null -w '%{http_code}' "$@"; }

# Ready iff both buckets answer a signed HEAD with the catalogs' key.
vending_s3_ready() {
  local b
  for b in "$TB_VENDING_BUCKET" "$TB_UNITY_BUCKET"; do
    [ "$(_vending_s3_code -I "$TB_VENDING_S3_URL/$b")" = 200 ] || return 1
  done
}

# Answers at all (403/404 are answers), then create the buckets (idempotent).
_vending_s3_up() { [ "$(curl -s -o /dev/null -w '%{http_code}' -m 5 "$TB_VENDING_S3_URL/")" != 000 ]; }

_vending_s3_buckets() {
  local b code
  for b in "$TB_VENDING_BUCKET" "$TB_UNITY_BUCKET"; do
    code=$(_vending_s3_code -X PUT "$TB_VENDING_S3_URL/$b") || return 1
    case $code in
      200 | 409) ;;
      *) tb_log "vending_s3: creating bucket $b answered HTTP $code"; return 1 ;;
    esac
  done
}

vending_s3_wait() {
  tb_wait_until vending_s3 60 _vending_s3_up || return 1
  tb_wait_until vending_s3 30 _vending_s3_buckets || return 1
  tb_wait_until vending_s3 10 vending_s3_ready
}

vending_s3_stop() { tb_stop vending_s3; }

vending_s3_status() { tb_status_line vending_s3; }

# --- vending, unity: the catalogs --------------------------------------------

vending_install() { fixture_install; }
unity_install() { fixture_install; }

# _vending_catalog_start NAME PORT MODE CONTEXT WAREHOUSE_NAME BUCKET [VAR=VALUE...]
_vending_catalog_start() {
  local name=$1 port=$2 mode=$3 context=$4 warehouse=$5 bucket=$6
  shift 6
  if tb_pid "$name" >/dev/null; then
    tb_log "$name already running (pid $(tb_pid "$name"))"
    return 0
  fi
  if ! tb_port_free "$port"; then
    tb_fail "$name" "port $port on $TB_HOST is taken by another process"
    return 1
  fi
  mkdir -p "$TB_RUN/$name"
  # CATALOG_X__Y_Z is catalog property x-y.z (LoopbackRestCatalog.java); testbed.*
  # properties are VendingRestCatalog's own. One JDBC connection: see fixture.sh.
  tb_start_bg "$name" env \
    CATALOG_CATALOG__IMPL=org.apache.iceberg.jdbc.JdbcCatalog \
    CATALOG_CATALOG_NAME="$name" \
    CATALOG_URI="jdbc:sqlite:$TB_RUN/$name/catalog.db?journal_mode=WAL&busy_timeout=10000" \
    CATALOG_JDBC_USER=user \
    CATALOG_JDBC_PASSWORD=password \
    CATALOG_JDBC_SCHEMA__VERSION=V1 \
    CATALOG_CLIENTS=1 \
    CATALOG_WAREHOUSE="s3://$bucket/" \
    CATALOG_IO__IMPL=org.apache.iceberg.aws.s3.S3FileIO \
    CATALOG_S3_ENDPOINT="$TB_VENDING_S3_URL" \
    CATALOG_S3_PATH__STYLE__ACCESS=true \
    CATALOG_S3_ACCESS__KEY__ID="$TB_VENDING_ADMIN_KEY" \
    CATALOG_S3_SECRET__ACCESS__KEY="$TB_VENDING_ADMIN_SECRET" \
    CATALOG_CLIENT_REGION="$TB_S3_REGION" \
    CATALOG_REST_HOST="$TB_HOST" \
    CATALOG_REST_PORT="$port" \
    CATALOG_TESTBED_MODE="$mode" \
    CATALOG_TESTBED_CONTEXT__PATH="$context" \
    CATALOG_TESTBED_WAREHOUSE__NAME="$warehouse" \
    CATALOG_TESTBED_VEND_ENDPOINT="$TB_VENDING_S3_URL" \
    CATALOG_TESTBED_VEND_REGION="$TB_S3_REGION" \
    CATALOG_TESTBED_VEND_ACCESS__KEY__ID="$TB_VENDING_ADMIN_KEY" \
    CATALOG_TESTBED_VEND_SECRET__ACCESS__KEY="$TB_VENDING_ADMIN_SECRET" \
    CATALOG_TESTBED_STS_ROLE__ARN="$TB_VENDING_ROLE_ARN" \
    "$@" \
    AWS_REGION="$TB_S3_REGION" \
    AWS_EC2_METADATA_DISABLED=true \
    java -Xms64m -Xmx384m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
    -cp "$FIXTURE_CLASSES:$FIXTURE_LIB/*" "$VENDING_MAIN"
}

vending_start() {
  _vending_catalog_start vending "$TB_VENDING_PORT" vending "$TB_VENDING_CONTEXT" \
    "$TB_VENDING_WAREHOUSE" "$TB_VENDING_BUCKET" \
    CATALOG_TESTBED_CLIENT__ID="$TB_VENDING_CLIENT_ID" \
    CATALOG_TESTBED_CLIENT__SECRET="$TB_VENDING_CLIENT_SECRET"
}

unity_start() {
  _vending_catalog_start unity "$TB_UNITY_PORT" unity "$TB_UNITY_CONTEXT" \
    "$TB_UNITY_WAREHOUSE" "$TB_UNITY_BUCKET" \
    CATALOG_TESTBED_TOKEN="$TB_UNITY_TOKEN"
}

# Ready iff GET /v1/config?warehouse=... answers 200 with the mode's credentials
# (vending: a token from the client-credentials exchange; unity: the static token)
# and names the prefix, and the namespaces under it answer 200 (the SQLite catalog).
vending_ready() {
  local body token
  body=$(curl -fsS -m 5 -X POST "$TB_VENDING_URI/v1/oauth/tokens" \
    --data-urlencode grant_type=client_credentials \
    --data-urlencode client_id="$TB_VENDING_CLIENT_ID" \
    --data-urlencode client_secret="$TB_VENDING_CLIENT_SECRET" \
    --data-urlencode scope="$TB_VENDING_SCOPE") || return 1
  token=$(printf '%s' "$body" | sed -n 's/.*"access_token"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p')
  [ -n "$token" ] || return 1
  _vending_catalog_ready "$TB_VENDING_URI" "$token" "$TB_VENDING_WAREHOUSE" "$TB_VENDING_WAREHOUSE"
}

unity_ready() {
  _vending_catalog_ready "$TB_UNITY_URI" "$TB_UNITY_TOKEN" "$TB_UNITY_WAREHOUSE" \
    "catalogs/$TB_UNITY_WAREHOUSE"
}

_vending_catalog_ready() {
  local uri=$1 token=$2 warehouse=$3 prefix=$4 body
  body=$(curl -fsS -m 5 -H "Authorization: Bearer $token" "$uri/v1/config?warehouse=$warehouse") || return 1
  case $body in *"\"prefix\":\"$prefix\""*) ;; *) return 1 ;; esac
  curl -fsS -m 5 -o /dev/null -H "Authorization: Bearer $token" "$uri/v1/$prefix/namespaces"
}

vending_wait() { tb_wait_until vending 90 vending_ready; }
unity_wait() { tb_wait_until unity 90 unity_ready; }
vending_stop() { tb_stop vending; }
unity_stop() { tb_stop unity; }
vending_status() { tb_status_line vending; }
unity_status() { tb_status_line unity; }
