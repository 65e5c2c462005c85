#!/usr/bin/env bash
# Download the Iceberg jars the Spark reader needs into $TB_CACHE/spark-jars
# (default /work/main/.cache/spark-jars), once. Pinned; idempotent; no network
# when the jars are already there. Prints nothing on success unless -v.
#
#   scripts/readers/fetch_spark_jars.sh        # ensure the jars exist
#   scripts/readers/fetch_spark_jars.sh --list # print the jar paths, comma-separated
#   scripts/readers/fetch_spark_jars.sh --cloud [--list]   also the GCS and Azure SDK bundles
#
# Why 1.10.1: iceberg-spark-runtime-3.5_2.12 is served up to 1.10.2, but
# iceberg-aws-bundle skips 1.10.2 on Maven Central, and both must be the same
# version. 1.10.1 is also the version of the reference REST catalog fixture.
set -euo pipefail

ICEBERG_VERSION=1.10.1
SPARK_SCALA=3.5_2.12
MAVEN_DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.6.1

TB_REPO=${TB_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
TB_CACHE=${TOPICBERG_CACHE:-$TB_REPO/.cache}
JAR_DIR=$TB_CACHE/spark-jars

ARTIFACTS=(
  "org.apache.iceberg:iceberg-spark-runtime-${SPARK_SCALA}:${ICEBERG_VERSION}"
  "org.apache.iceberg:iceberg-aws-bundle:${ICEBERG_VERSION}"
  # The embedded catalog through Iceberg's JdbcCatalog (spark_maintain.py);
  # the same driver version as the reference catalog's (testbed.d/fixture).
  "org.xerial:sqlite-jdbc:3.50.3.0"
)
# The SDKs of Iceberg's GCSFileIO and ADLSFileIO (their classes are in the
# runtime jar), for tables in the test bed's GCS and Azure emulators; only with
# --cloud. 1.10.0: the bundles are not on Maven Central for 1.10.1; they hold
# only the (shaded) Google Cloud / Azure SDKs, no Iceberg classes.
CLOUD_ARTIFACTS=(
  "org.apache.iceberg:iceberg-gcp-bundle:1.10.0"
  "org.apache.iceberg:iceberg-azure-bundle:1.10.0"
)
if [ "${1:-}" = "--cloud" ]; then
  shift
  ARTIFACTS+=("${CLOUD_ARTIFACTS[@]}")
fi

jar_path() { # g:a:v -> $JAR_DIR/a-v.jar
  local a v
  a=$(echo "$1" | cut -d: -f2)
  v=$(echo "$1" | cut -d: -f3)
  echo "$JAR_DIR/$a-$v.jar"
}

mkdir -p "$JAR_DIR"
for art in "${ARTIFACTS[@]}"; do
  jar=$(jar_path "$art")
  [ -s "$jar" ] && continue
  echo "[fetch_spark_jars] downloading $art" >&2
  # dependency:copy needs no pom; it resolves through ~/.m2 and copies the jar.
  tmp=$(mktemp -d "$JAR_DIR/.tmp.XXXXXX")
  if ! (cd "$tmp" && mvn -q -B -Dstyle.color=never "$MAVEN_DEPENDENCY_PLUGIN:copy" \
      -Dartifact="$art" -DoutputDirectory="$tmp" -Dmdep.overWriteReleases=true \
      -Dtransitive=false >&2); then
    rm -rf "$tmp"
    echo "[fetch_spark_jars] FAILED to download $art" >&2
    exit 1
  fi
  mv -f "$tmp/$(basename "$jar")" "$jar" # atomic within the directory
  rm -rf "$tmp"
done

if [ "${1:-}" = "--list" ]; then
  paths=()
  for art in "${ARTIFACTS[@]}"; do paths+=("$(jar_path "$art")"); done
  (IFS=,; echo "${paths[*]}")
fi
