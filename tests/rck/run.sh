#!/usr/bin/env bash
# Run Apache Iceberg's REST Compatibility Kit (RCK) against a freshly started Floe.
#
#   tests/rck/run.sh                  # tables on the local file system
#   RCK_STORAGE=s3 tests/rck/run.sh   # tables on S3, with vended credentials
#
# Steps: fetch the RCK jars with Maven (once; cached in .cache/rck-lib), start
# `$FLOE_BIN serve` on a free loopback port with a fresh data dir, wait for
# /healthz, run RESTCompatibilityKitSuite with the JUnit console launcher, stop
# the server, and judge the result.
#
# S3 mode (RCK_STORAGE=s3): a throwaway SeaweedFS with STS (scripts/s3-server.sh, on a
# free port under a temporary directory, stopped on exit) holds the server's default
# catalog (--warehouse s3://lake/rck-<random>, --storage-config of type S3 with the role
# to assume); only the server gets the S3 admin keys. The suite runs against that
# catalog with no AWS_* variables in its environment and no AWS profile or instance
# metadata to fall back on, so every file it reads or writes (the manifests and
# manifest lists of its appends) goes through S3FileIO with the credentials Floe vends
# in loadTable/createTable (asked for with X-Iceberg-Access-Delegation:
# vended-credentials, which Iceberg 1.11's REST client sends only when configured to,
# here with -Dheader.X-Iceberg-Access-Delegation=...). Afterwards the bucket is listed
# (tests/rck/s3_list.py) to show that the suite's own files are there. Tests that
# hard-code local locations (file:/tmp/... or JUnit temporary directories) or move
# metadata files with java.nio are excluded there (RCK_S3_EXCLUDES below: they cannot
# be placed in an S3 catalog, whose allowed locations are on S3 only), so MIN_SUCCEEDED
# is lower by default.
#
# Environment (all optional):
#   FLOE_BIN            server binary             (default: target/release/floe)
#   RCK_STORAGE         file or s3                (default: file)
#   MIN_SUCCEEDED       least tests that must pass (default: 144; 130 with RCK_STORAGE=s3)
#   RCK_LIB             jar cache dir             (default: .cache/rck-lib)
#   RCK_REPORTS_DIR     reports + logs            (default: .cache/rck-reports, or
#                       .cache/rck-reports-s3 with RCK_STORAGE=s3)
#   HEALTH_TIMEOUT      seconds to wait for /healthz (default: 60)
#   RCK_TIMEOUT         seconds the suite may run  (default: 1800)
#   FLOE_HEALTH_PATH    readiness path            (default: /readyz)
#   RCK_VERBOSE=1       print the launcher's whole test tree
#   RCK_EXTRA_ARGS      extra launcher args, e.g. "--select-method ..." (word-split)
#   RCK_S3_EXCLUDE=0    S3 mode: run the tests with local locations too (they fail there)
#   KEEP_DATA=1         keep the server's data dir (the S3 server is stopped and its
#                       directory deleted regardless; its log is copied to the reports)
#
# Exit status: 0 only if no test failed and at least MIN_SUCCEEDED succeeded.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

FLOE_BIN="${FLOE_BIN:-$ROOT/target/release/floe}"
RCK_STORAGE="${RCK_STORAGE:-file}"
case "$RCK_STORAGE" in
  file) MIN_SUCCEEDED="${MIN_SUCCEEDED:-144}" ;;
  s3) MIN_SUCCEEDED="${MIN_SUCCEEDED:-130}" ;;
  *) printf '[rck] ERROR: RCK_STORAGE must be file or s3, not %s\n' "$RCK_STORAGE" >&2; exit 2 ;;
esac
RCK_LIB="${RCK_LIB:-$ROOT/.cache/rck-lib}"
if [[ "$RCK_STORAGE" == s3 ]]; then
  RCK_REPORTS_DIR="${RCK_REPORTS_DIR:-$ROOT/.cache/rck-reports-s3}"
else
  RCK_REPORTS_DIR="${RCK_REPORTS_DIR:-$ROOT/.cache/rck-reports}"
fi
HEALTH_TIMEOUT="${HEALTH_TIMEOUT:-60}"
RCK_TIMEOUT="${RCK_TIMEOUT:-1800}"
FLOE_HEALTH_PATH="${FLOE_HEALTH_PATH:-/readyz}"
POM="$ROOT/tests/rck/pom.xml"
JUNIT_STANDALONE_NAME="junit-platform-console-standalone-1.14.4.jar"
SUITE_CLASS="org.apache.iceberg.rest.RESTCompatibilityKitSuite"
S3_SCRIPT="$ROOT/scripts/s3-server.sh"
# The S3 server's fixed setup (see the header of scripts/s3-server.sh).
S3_BUCKET=lake
S3_ADMIN_KEY=floe-admin
S3_ADMIN_SECRET=floe-admin-secret
S3_ROLE_ARN="arn:aws:iam::000000000000:role/FloeVended"
# S3 mode only: tests that place tables or views at local paths the suite chooses
# (CatalogTests.baseTableLocation is file:/tmp/<ns>/<table>, ViewCatalogTests.viewLocation
# a JUnit @TempDir) or that move a table's metadata file with java.nio.file. Floe refuses
# such locations in an S3 catalog (403, outside its allowed locations), and they would
# not touch S3 anyway. Class name, then method names (JUnit --exclude-methodname regex).
RCK_S3_EXCLUDES=(
  "RESTCompatibilityKitCatalogTests#(testLoadTable|testCompleteCreateTable|testCompleteCreateTransaction|testCompleteCreateTransactionMultipleSchemas|testCompleteCreateTransactionV2|testCompleteReplaceTransaction|testCompleteCreateOrReplaceTransactionCreate|testCompleteCreateOrReplaceTransactionReplace|testCreateTableWithDefaultColumnValue|testLoadTableWithMissingMetadataFile)"
  "RESTCompatibilityKitViewCatalogTests#(completeCreateView|createAndReplaceViewWithLocation|createViewWithCustomMetadataLocation|updateViewLocation)"
)

log() { printf '[rck] %s\n' "$*"; }
die() { printf '[rck] ERROR: %s\n' "$*" >&2; exit 1; }

for tool in java mvn python3; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found (scripts/test-all.sh installs it)"
done
case "$FLOE_BIN" in /*) ;; *) FLOE_BIN="$ROOT/$FLOE_BIN" ;; esac
[[ -x "$FLOE_BIN" ]] || die "server binary not found or not executable: $FLOE_BIN (build it, or set FLOE_BIN)"

# --- (a) RCK jars ------------------------------------------------------------
# The stamp holds the pom's checksum: a changed pom or a half-finished download
# (no stamp) fetches again.
pom_sum="$(sha256sum "$POM" | cut -d' ' -f1)"
stamp="$RCK_LIB/.complete"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$pom_sum" && -f "$RCK_LIB/$JUNIT_STANDALONE_NAME" ]]; then
  log "RCK jars already in $RCK_LIB"
else
  log "fetching RCK jars into $RCK_LIB (Maven Central)"
  rm -rf "$RCK_LIB"
  mkdir -p "$RCK_LIB"
  t0=$SECONDS
  mvn -q -B -Dstyle.color=never -f "$POM" dependency:copy-dependencies -DoutputDirectory="$RCK_LIB" \
    || die "Maven could not fetch the RCK dependencies"
  [[ -f "$RCK_LIB/$JUNIT_STANDALONE_NAME" ]] || die "$JUNIT_STANDALONE_NAME missing after download"
  printf '%s\n' "$pom_sum" >"$stamp"
  log "fetched $(find "$RCK_LIB" -name '*.jar' | wc -l) jars in $((SECONDS - t0))s"
fi

# Class path: every jar except the non-standalone junit-jupiter / junit-platform
# ones (the console-standalone jar bundles those; two copies break discovery), and
# except the AWS SDK bundle unless the tables are on S3 (the file mode's class path
# stays what it always was).
CP=""
jar_count=0
for jar in "$RCK_LIB"/*.jar; do
  name="$(basename "$jar")"
  case "$name" in
    junit-platform-console-standalone-*) continue ;; # run with -jar, not on -cp
    junit-jupiter-*|junit-platform-*) continue ;;
    iceberg-aws-bundle-*) [[ "$RCK_STORAGE" == s3 ]] || continue ;;
  esac
  CP="${CP:+$CP:}$jar"
  jar_count=$((jar_count + 1))
done
((jar_count > 0)) || die "no jars in $RCK_LIB"
if [[ "$RCK_STORAGE" == s3 && "$CP" != *iceberg-aws-bundle-* ]]; then
  die "iceberg-aws-bundle missing from $RCK_LIB (S3FileIO needs it); delete $RCK_LIB and run again"
fi
log "class path: $jar_count jars"

# --- (b) start the server ----------------------------------------------------
# Authentication is on (Floe's default): the server's root principal gets these
# credentials, and the suite logs in with them (CATALOG_CREDENTIAL / CATALOG_SCOPE).
RCK_CLIENT_ID="rck-root"
RCK_CLIENT_SECRET="rck-secret-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
rm -rf "$RCK_REPORTS_DIR"
mkdir -p "$RCK_REPORTS_DIR"
SERVER_LOG="$RCK_REPORTS_DIR/floe.log"
CONSOLE_LOG="$RCK_REPORTS_DIR/console.txt"
DATA_DIR="$(mktemp -d "${TMPDIR:-/tmp}/floe-rck.XXXXXX")"
SERVER_PID=""
S3_DIR=""

stop_server() {
  [[ -n "$SERVER_PID" ]] || return 0
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$SERVER_PID" 2>/dev/null; then
      log "server did not exit 10s after SIGTERM; sending SIGKILL"
      kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
  fi
  local status=0
  wait "$SERVER_PID" 2>/dev/null || status=$?
  log "server stopped (exit status $status)"
  SERVER_PID=""
}
stop_s3() {
  [[ -n "$S3_DIR" ]] || return 0
  cp "$S3_DIR/weed.log" "$RCK_REPORTS_DIR/s3.log" 2>/dev/null || true
  bash "$S3_SCRIPT" stop "$S3_DIR" || log "could not stop the S3 server in $S3_DIR"
  S3_DIR=""
}
cleanup() {
  stop_server
  stop_s3
  if [[ "${KEEP_DATA:-0}" == 1 ]]; then
    log "data dir kept: $DATA_DIR"
  else
    rm -rf "$DATA_DIR"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

server_log_tail() {
  echo "----- last 100 lines of $SERVER_LOG -----"
  tail -n 100 "$SERVER_LOG" 2>/dev/null || true
  echo "----- end of server log -----"
}

# shellcheck source=../../scripts/service.sh
source "$ROOT/scripts/service.sh"

http_ok() { # exit 0 if GET $1 answers 2xx
  if command -v curl >/dev/null 2>&1; then
    curl -fsS -o /dev/null --max-time 2 "$1" 2>/dev/null
  else
    python3 - "$1" <<'PY' 2>/dev/null
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
    sys.exit(0 if 200 <= r.status < 300 else 1)
PY
  fi
}

# --- S3 mode: the object store, and the server's default catalog on it -------------
# The server's environment: no AWS_* from the caller, only the S3 admin keys (S3 mode).
# The suite's environment: no AWS_* at all in S3 mode (and unchanged in file mode).
SERVER_ENV=()
JAVA_ENV=()
JAVA_S3_OPTS=()
STORAGE_ARGS=()
if [[ "$RCK_STORAGE" == s3 ]]; then
  for var in $(compgen -e | grep '^AWS_' || true); do
    SERVER_ENV+=(-u "$var")
    JAVA_ENV+=(-u "$var")
  done
  SERVER_ENV+=("AWS_ACCESS_KEY_ID=$S3_ADMIN_KEY" "AWS_SECRET_ACCESS_KEY=$S3_ADMIN_SECRET")
  # Iceberg 1.11's REST client sends no X-Iceberg-Access-Delegation header unless told
  # to (header.* catalog properties; RCKUtils takes system properties as catalog
  # properties). No shared credentials/config file and no instance metadata for the
  # AWS SDK either: only what the catalog vends.
  JAVA_S3_OPTS=(-Dheader.X-Iceberg-Access-Delegation=vended-credentials
    -Daws.sharedCredentialsFile=/nonexistent/floe-rck-credentials
    -Daws.configFile=/nonexistent/floe-rck-config -Daws.disableEc2Metadata=true)
  S3_DIR="$(mktemp -d "${TMPDIR:-/tmp}/floe-rck-s3.XXXXXX")"
  S3_ENDPOINT=""
  t0=$SECONDS
  for attempt in 1 2 3; do
    s3_port="$(service_free_port)"
    log "starting the S3 server (scripts/s3-server.sh) on 127.0.0.1:$s3_port under $S3_DIR (attempt $attempt)"
    if S3_ENDPOINT="$(bash "$S3_SCRIPT" start "$S3_DIR" "$s3_port")"; then
      S3_ENDPOINT="$(printf '%s\n' "$S3_ENDPOINT" | tail -n 1)"
      break
    fi
    S3_ENDPOINT=""
  done
  [[ -n "$S3_ENDPOINT" ]] || die "the S3 server did not start"
  S3_PREFIX="rck-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
  S3_WAREHOUSE="s3://$S3_BUCKET/$S3_PREFIX"
  storage_config='{"storageType":"S3","endpoint":"'"$S3_ENDPOINT"'","pathStyleAccess":true,"region":"us-east-1","roleArn":"'"$S3_ROLE_ARN"'"}'
  STORAGE_ARGS=(--warehouse "$S3_WAREHOUSE" --storage-config "$storage_config")
  log "S3 server ready at $S3_ENDPOINT in $((SECONDS - t0))s; default catalog at $S3_WAREHOUSE"
fi

# With FLOE_TEST_DATABASE_URL, the server keeps its state in a fresh PostgreSQL database.
STORE_ARGS=()
if [[ -n "${FLOE_TEST_DATABASE_URL:-}" ]]; then
  rck_db="floe_rck_$(date +%s)_$$"
  psql -q "$FLOE_TEST_DATABASE_URL" -c "CREATE DATABASE $rck_db" || die "could not create database $rck_db"
  STORE_ARGS=(--database-url "${FLOE_TEST_DATABASE_URL%/*}/$rck_db")
  log "store: PostgreSQL database $rck_db"
fi

# A free port can be taken between probing and binding: try a few ports.
started=0
for attempt in 1 2 3; do
  PORT="$(service_free_port)"
  log "starting $FLOE_BIN serve --bind 127.0.0.1:$PORT --data-dir $DATA_DIR${STORAGE_ARGS[*]:+ ${STORAGE_ARGS[*]}} (attempt $attempt)"
  env "${SERVER_ENV[@]}" NO_COLOR=1 FLOE_BOOTSTRAP_CREDENTIALS="$RCK_CLIENT_ID,$RCK_CLIENT_SECRET" \
    "$FLOE_BIN" serve --bind "127.0.0.1:$PORT" --data-dir "$DATA_DIR" "${STORE_ARGS[@]}" \
    "${STORAGE_ARGS[@]}" >>"$SERVER_LOG" 2>&1 &
  SERVER_PID=$!
  deadline=$((SECONDS + HEALTH_TIMEOUT))
  while ((SECONDS < deadline)); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      break
    fi
    if http_ok "http://127.0.0.1:$PORT$FLOE_HEALTH_PATH"; then
      started=1
      break
    fi
    sleep 0.2
  done
  ((started)) && break
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    server_log_tail
    die "server not healthy within ${HEALTH_TIMEOUT}s (GET $FLOE_HEALTH_PATH)"
  fi
  wait "$SERVER_PID" 2>/dev/null && rc=0 || rc=$?
  SERVER_PID=""
  log "server exited early (status $rc)"
done
if ((!started)); then
  server_log_tail
  die "server failed to start"
fi
log "server ready on port $PORT (pid $SERVER_PID)"

# File mode: the suite places tables and views at file:/tmp/... paths it chooses itself.
# A catalog refuses locations outside its allowed ones, so the suite gets its own
# catalog, created through the management API, whose allowed locations include /tmp.
# S3 mode: the suite uses the server's default catalog, on S3.
if [[ "$RCK_STORAGE" == s3 ]]; then
  RCK_CATALOG=default
  log "catalog: the default catalog, at $S3_WAREHOUSE"
else
RCK_CATALOG=rck
create_body='{"catalog":{"type":"INTERNAL","name":"'"$RCK_CATALOG"'","properties":{"default-base-location":"file://'"$DATA_DIR"'/rck"},"storageConfigInfo":{"storageType":"FILE","allowedLocations":["file:///tmp/"]}}}'
python3 - "http://127.0.0.1:$PORT" "$create_body" "$RCK_CLIENT_ID" "$RCK_CLIENT_SECRET" <<'PY' || die "could not create the RCK catalog"
import json, sys, urllib.parse, urllib.request
base, body, client_id, secret = sys.argv[1:5]
form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": client_id,
                               "client_secret": secret, "scope": "PRINCIPAL_ROLE:ALL"}).encode()
with urllib.request.urlopen(urllib.request.Request(base + "/v1/oauth/tokens", data=form), timeout=10) as r:
    token = json.load(r)["access_token"]
req = urllib.request.Request(base + "/api/management/v1/catalogs", data=body.encode(), method="POST",
                             headers={"Content-Type": "application/json", "Authorization": "Bearer " + token})
with urllib.request.urlopen(req, timeout=10) as r:
    sys.exit(0 if r.status == 201 else 1)
PY
log "created catalog $RCK_CATALOG (allowed locations: file:///tmp/)"
fi

# --- (c) run the suite -------------------------------------------------------
# Exact command, for reproducing by hand (CP = class path above):
#   CATALOG_URI=http://127.0.0.1:$PORT/ CATALOG_WAREHOUSE=$RCK_CATALOG \
#   java -Drck.local=false -Drck.requires-namespace-create=true \
#     -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
#     -jar $RCK_LIB/junit-platform-console-standalone-1.14.4.jar execute -cp "$CP" \
#     --select-class org.apache.iceberg.rest.RESTCompatibilityKitSuite \
#     --details=tree --disable-banner --disable-ansi-colors --reports-dir $RCK_REPORTS_DIR
launcher_args=(
  execute
  -cp "$CP"
  --select-class "$SUITE_CLASS"
  --details=tree
  --disable-banner
  --disable-ansi-colors
  --reports-dir "$RCK_REPORTS_DIR"
)
if [[ "$RCK_STORAGE" == s3 && "${RCK_S3_EXCLUDE:-1}" != 0 ]]; then
  excluded_methods=()
  for entry in "${RCK_S3_EXCLUDES[@]}"; do
    cls="${entry%%#*}"
    methods="${entry#*#}"
    # JUnit matches Class#method, with "(parameter types)" only for methods that have any.
    launcher_args+=(--exclude-methodname "^org\.apache\.iceberg\.rest\.$cls#$methods(\(.*\))?\$")
    excluded_methods+=("$cls: ${methods//|/, }")
  done
  log "S3 mode: excluded (local locations):"
  for entry in "${excluded_methods[@]}"; do log "  $entry"; done
fi
if [[ -n "${RCK_EXTRA_ARGS:-}" ]]; then
  # shellcheck disable=SC2206 # word splitting intended
  launcher_args+=(${RCK_EXTRA_ARGS})
fi
log "running $SUITE_CLASS against http://127.0.0.1:$PORT/ (warehouse $RCK_CATALOG)"
log "command: ${JAVA_ENV[*]:+env ${JAVA_ENV[*]} }CATALOG_URI=http://127.0.0.1:$PORT/ CATALOG_WAREHOUSE=$RCK_CATALOG java ${JAVA_S3_OPTS[*]:+${JAVA_S3_OPTS[*]} }-Drck.local=false -Drck.requires-namespace-create=true -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -jar $RCK_LIB/$JUNIT_STANDALONE_NAME ${launcher_args[*]/#$CP/<CP: $jar_count jars of $RCK_LIB>}"
log "full launcher output: $CONSOLE_LOG"
t0=$SECONDS
launcher_rc=0
env "${JAVA_ENV[@]}" \
  CATALOG_URI="http://127.0.0.1:$PORT/" CATALOG_WAREHOUSE="$RCK_CATALOG" \
  CATALOG_CREDENTIAL="$RCK_CLIENT_ID:$RCK_CLIENT_SECRET" CATALOG_SCOPE="PRINCIPAL_ROLE:ALL" \
  timeout --kill-after=30 "$RCK_TIMEOUT" \
  java "${JAVA_S3_OPTS[@]}" -Drck.local=false -Drck.requires-namespace-create=true \
  -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
  -jar "$RCK_LIB/$JUNIT_STANDALONE_NAME" "${launcher_args[@]}" \
  >"$CONSOLE_LOG" 2>&1 || launcher_rc=$?
log "launcher finished in $((SECONDS - t0))s with status $launcher_rc"
((launcher_rc == 124 || launcher_rc == 137)) && log "suite timed out after ${RCK_TIMEOUT}s"

server_alive=1
kill -0 "$SERVER_PID" 2>/dev/null || server_alive=0

# S3 mode: what the suite left in the bucket, listed from outside with the admin key.
# Avro files are manifests and manifest lists, which only the suite writes (through
# S3FileIO with vended credentials: it has no keys of its own). None at all means the
# suite's appends did not go to S3, which fails the run.
S3_AVRO_COUNT=""
if [[ "$RCK_STORAGE" == s3 ]]; then
  S3_LISTING="$RCK_REPORTS_DIR/s3-objects.txt"
  if python3 "$ROOT/tests/rck/s3_list.py" "$S3_ENDPOINT" "$S3_BUCKET" "$S3_PREFIX/" \
    "$S3_ADMIN_KEY" "$S3_ADMIN_SECRET" >"$S3_LISTING"; then
    S3_AVRO_COUNT="$(grep -c '\.avro$' "$S3_LISTING" || true)"
    log "S3 objects under $S3_WAREHOUSE after the suite: $(grep -c . "$S3_LISTING" || true)" \
      "($(grep -c '\.metadata\.json$' "$S3_LISTING" || true) metadata files written by Floe," \
      "$S3_AVRO_COUNT manifests and manifest lists written by the suite); list: $S3_LISTING"
  else
    log "could not list the bucket"
    S3_AVRO_COUNT=0
  fi
fi

# --- (d) stop the server -----------------------------------------------------
stop_server

# --- (e) judge ----------------------------------------------------------------
if [[ "${RCK_VERBOSE:-0}" == 1 ]]; then
  cat "$CONSOLE_LOG"
fi

# Summary from the launcher's closing table, failure details from the XML report.
verdict=0
python3 - "$CONSOLE_LOG" "$RCK_REPORTS_DIR" "$MIN_SUCCEEDED" <<'PY' || verdict=$?
import glob, os, re, sys
import xml.etree.ElementTree as ET

console_path, reports_dir, min_ok = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(console_path, encoding="utf-8", errors="replace").read()

counts = {}
for key in ("found", "skipped", "started", "aborted", "successful", "failed"):
    m = re.search(r"\[\s*(\d+) tests %s\s*\]" % key, text)
    counts[key] = int(m.group(1)) if m else None
m = re.search(r"\[\s*(\d+) containers failed\s*\]", text)
containers_failed = int(m.group(1)) if m else None

summary = re.search(r"^Test run finished.*?tests failed\s*\]", text, re.S | re.M)
print("===== RCK summary =====")
if summary:
    print(summary.group(0).rstrip())
else:
    print("(no summary in launcher output; last 60 lines follow)")
    print("\n".join(text.splitlines()[-60:]))

failures = []
for path in sorted(glob.glob(os.path.join(reports_dir, "*.xml"))):
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        print(f"(could not parse {path}: {e})")
        continue
    for case in root.iter("testcase"):
        for tag in ("failure", "error"):
            for el in case.findall(tag):
                msg = (el.get("message") or "").strip()
                if not msg:
                    msg = (el.text or "").strip().splitlines()[0] if (el.text or "").strip() else ""
                item = (case.get("classname", "?"), case.get("name", "?"), el.get("type", tag), msg)
                if item not in failures:  # the suite and jupiter reports may both list it
                    failures.append(item)

if failures:
    print(f"===== failed tests ({len(failures)}) =====")
    for cls, name, typ, msg in failures:
        short = cls.rsplit(".", 1)[-1]
        msg = " ".join(msg.split())
        if len(msg) > 600:
            msg = msg[:600] + " ..."
        print(f"- {short} > {name}\n    {typ}: {msg}")

ok, failed = counts["successful"], counts["failed"]
problems = []
if ok is None or failed is None:
    problems.append("could not read the test counts from the launcher output")
else:
    if failed:
        problems.append(f"{failed} tests failed")
    if ok < min_ok:
        problems.append(f"only {ok} tests succeeded; at least {min_ok} required")
if containers_failed:
    problems.append(f"{containers_failed} containers failed (setup/teardown errors)")
print("===== RCK verdict =====")
print(f"succeeded={ok} failed={failed} aborted={counts['aborted']} skipped={counts['skipped']} "
      f"found={counts['found']} (minimum succeeded: {min_ok})")
if problems:
    print("FAIL: " + "; ".join(problems))
    sys.exit(1)
print("PASS")
PY

if ((server_alive == 0)); then
  log "the server died during the suite"
  verdict=1
fi
if [[ "$RCK_STORAGE" == s3 && "$S3_AVRO_COUNT" == 0 ]]; then
  log "S3 mode: no manifest or manifest list of the suite's appends is on S3"
  verdict=1
fi
if ((verdict != 0)); then
  if [[ "${RCK_VERBOSE:-0}" != 1 ]]; then
    echo "----- last 80 lines of launcher output ($CONSOLE_LOG) -----"
    tail -n 80 "$CONSOLE_LOG"
  fi
  server_log_tail
  log "reports: $RCK_REPORTS_DIR"
  exit 1
fi
log "RCK passed; reports in $RCK_REPORTS_DIR"
