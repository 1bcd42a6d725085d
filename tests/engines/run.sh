#!/usr/bin/env bash
# Spark and DuckDB end to end against `floe serve` with authentication on.
#
#   tests/engines/run.sh [PYTEST ARGS...]
#
# Steps: (a) the venv .cache/engines-venv with tests/engines/requirements.txt (pyspark,
# duckdb and its iceberg/avro/httpfs extensions as PyPI packages, pyiceberg, pytest),
# reinstalled only when that file changes; (b) the Iceberg Spark runtime jar and the
# iceberg-aws-bundle jar (S3FileIO with the AWS SDK, for the tables on S3) from Maven
# Central into .cache/engines-jars/ (once per version); (c) pytest tests/engines, which
# starts one Floe server per test module (--auth internal, short token lifetime), one
# Spark session for the run, and for test_s3.py an S3 server (scripts/s3-server.sh, which
# installs SeaweedFS into .cache/s3-venv on first use) (tests/engines/README.md).
#
# Exit status: pytest's (0 only if every test passed); its summary line is the last line.
#
# Environment (all optional):
#   FLOE_BIN                 server binary                     (default: target/release/floe)
#   ENGINES_ICEBERG_VERSION  iceberg-spark-runtime-3.5_2.12 and iceberg-aws-bundle (default: 1.12.0)
#   ENGINES_TIMEOUT          wall-clock limit of pytest, seconds (default: 900)
#   ENGINES_PYTEST_ARGS      more pytest arguments (word-split), e.g. "-k duckdb -x"
#   KEEP_DATA=1              keep the servers' data dirs and logs (path printed at the end)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
SUITE="$ROOT/tests/engines"
REQ="$SUITE/requirements.txt"
VENV="$ROOT/.cache/engines-venv"
JARS="$ROOT/.cache/engines-jars"
# Spark 3.5 (pyspark in requirements.txt) with Scala 2.12, as pyspark's jars are built.
ICEBERG_VERSION="${ENGINES_ICEBERG_VERSION:-1.12.0}"
ICEBERG_ARTIFACT="org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:$ICEBERG_VERSION"
ICEBERG_JAR="$JARS/iceberg-spark-runtime-3.5_2.12-$ICEBERG_VERSION.jar"
ICEBERG_AWS_ARTIFACT="org.apache.iceberg:iceberg-aws-bundle:$ICEBERG_VERSION"
ICEBERG_AWS_JAR="$JARS/iceberg-aws-bundle-$ICEBERG_VERSION.jar"
FLOE_BIN="${FLOE_BIN:-$ROOT/target/release/floe}"

log() { printf '[engines] %s\n' "$*"; }
die() { printf '[engines] ERROR: %s\n' "$*" >&2; echo "0 passed, 1 failed"; exit 1; }

for tool in java mvn python3; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found (scripts/test-all.sh installs it)"
done
case "$FLOE_BIN" in /*) ;; *) FLOE_BIN="$ROOT/$FLOE_BIN" ;; esac
# The binary may be being rebuilt (replaced) right now: give it a moment to reappear.
for _ in $(seq 1 60); do
  [[ -x "$FLOE_BIN" ]] && break
  sleep 2
done
[[ -x "$FLOE_BIN" ]] || die "server binary not found or not executable: $FLOE_BIN (build it, or set FLOE_BIN)"
export FLOE_BIN

# --- (a) venv ----------------------------------------------------------------
# shellcheck source=../../scripts/venv.sh
source "$ROOT/scripts/venv.sh"
setup_venv() {
  ensure_venv "$VENV" "$REQ" || return 1
  log "$("$VENV/bin/python" -m pip freeze --disable-pip-version-check \
    | grep -iE '^(pyspark|duckdb|duckdb.extension.iceberg|pyiceberg|pytest)==' | tr '\n' ' ')"
}
setup_venv || die "venv setup failed"

# --- (b) the Iceberg jars ------------------------------------------------------------
# fetch_jar ARTIFACT JAR: ARTIFACT (group:artifact:version) from Maven Central to the path
# JAR, unless it is there already.
fetch_jar() {
  local artifact="$1" jar="$2" tmp
  [[ -s "$jar" ]] && return 0
  log "fetching $artifact from Maven Central into $JARS"
  mkdir -p "$JARS"
  # Written under a temporary name and moved, so an interrupted download is not taken for
  # the jar next time.
  tmp="$(mktemp -d "$JARS/.fetch.XXXXXX")"
  # (sed: Maven 3.8 prints colour resets even with style.color=never)
  mvn -q -B -Dstyle.color=never org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
    -Dartifact="$artifact" -DoutputDirectory="$tmp" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' \
    || { rm -rf "$tmp"; die "Maven could not fetch $artifact"; }
  mv "$tmp/$(basename "$jar")" "$jar" || { rm -rf "$tmp"; die "jar missing after download"; }
  rm -rf "$tmp"
}
fetch_jar "$ICEBERG_ARTIFACT" "$ICEBERG_JAR"
fetch_jar "$ICEBERG_AWS_ARTIFACT" "$ICEBERG_AWS_JAR"
export ENGINES_ICEBERG_JAR="$ICEBERG_JAR" ENGINES_ICEBERG_AWS_JAR="$ICEBERG_AWS_JAR"
log "java $(java -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n1); $(basename "$ICEBERG_JAR"), $(basename "$ICEBERG_AWS_JAR")"

# --- (c) pytest ----------------------------------------------------------------
# The suite runs Floe on its embedded store; a PostgreSQL URL meant for other suites must
# not leak into the servers it starts.
unset FLOE_DATABASE_URL
rc=0
# shellcheck disable=SC2086 # ENGINES_PYTEST_ARGS is split on purpose
timeout --kill-after=30 "${ENGINES_TIMEOUT:-900}" \
  "$VENV/bin/python" -m pytest "$SUITE" -ra ${ENGINES_PYTEST_ARGS:-} "$@" || rc=$?
case "$rc" in
  5) log "pytest collected no tests" ;;
  124 | 137) log "pytest timed out after ${ENGINES_TIMEOUT:-900}s" ;;
esac
exit "$rc"
