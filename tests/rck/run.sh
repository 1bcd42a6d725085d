#!/usr/bin/env bash
# Run Apache Iceberg's REST Compatibility Kit (RCK) against a freshly started Floe.
#
#   tests/rck/run.sh
#
# Steps: fetch the RCK jars with Maven (once; cached in .cache/rck-lib), start
# `$FLOE_BIN serve` on a free loopback port with a fresh data dir, wait for
# /healthz, run RESTCompatibilityKitSuite with the JUnit console launcher, stop
# the server, and judge the result.
#
# Environment (all optional):
#   FLOE_BIN            server binary             (default: target/release/floe)
#   MIN_SUCCEEDED       least tests that must pass (default: 144)
#   RCK_LIB             jar cache dir             (default: .cache/rck-lib)
#   RCK_REPORTS_DIR     reports + logs            (default: .cache/rck-reports)
#   HEALTH_TIMEOUT      seconds to wait for /healthz (default: 60)
#   RCK_TIMEOUT         seconds the suite may run  (default: 1800)
#   FLOE_HEALTH_PATH    readiness path            (default: /healthz)
#   RCK_VERBOSE=1       print the launcher's whole test tree
#   RCK_EXTRA_ARGS      extra launcher args, e.g. "--select-method ..." (word-split)
#
# Exit status: 0 only if no test failed and at least MIN_SUCCEEDED succeeded.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

FLOE_BIN="${FLOE_BIN:-$ROOT/target/release/floe}"
MIN_SUCCEEDED="${MIN_SUCCEEDED:-144}"
RCK_LIB="${RCK_LIB:-$ROOT/.cache/rck-lib}"
RCK_REPORTS_DIR="${RCK_REPORTS_DIR:-$ROOT/.cache/rck-reports}"
HEALTH_TIMEOUT="${HEALTH_TIMEOUT:-60}"
RCK_TIMEOUT="${RCK_TIMEOUT:-1800}"
FLOE_HEALTH_PATH="${FLOE_HEALTH_PATH:-/healthz}"
POM="$ROOT/tests/rck/pom.xml"
JUNIT_STANDALONE_NAME="junit-platform-console-standalone-1.14.4.jar"
SUITE_CLASS="org.apache.iceberg.rest.RESTCompatibilityKitSuite"

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
# ones (the console-standalone jar bundles those; two copies break discovery).
CP=""
jar_count=0
for jar in "$RCK_LIB"/*.jar; do
  name="$(basename "$jar")"
  case "$name" in
    junit-platform-console-standalone-*) continue ;; # run with -jar, not on -cp
    junit-jupiter-*|junit-platform-*) continue ;;
  esac
  CP="${CP:+$CP:}$jar"
  jar_count=$((jar_count + 1))
done
((jar_count > 0)) || die "no jars in $RCK_LIB"
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
cleanup() {
  stop_server
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

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

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
  PORT="$(free_port)"
  log "starting $FLOE_BIN serve --bind 127.0.0.1:$PORT --data-dir $DATA_DIR (attempt $attempt)"
  NO_COLOR=1 FLOE_BOOTSTRAP_CREDENTIALS="$RCK_CLIENT_ID,$RCK_CLIENT_SECRET" \
    "$FLOE_BIN" serve --bind "127.0.0.1:$PORT" --data-dir "$DATA_DIR" "${STORE_ARGS[@]}" >>"$SERVER_LOG" 2>&1 &
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

# The suite places tables and views at file:/tmp/... paths it chooses itself. A catalog
# refuses locations outside its allowed ones, so the suite gets its own catalog, created
# through the management API, whose allowed locations include /tmp.
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
if [[ -n "${RCK_EXTRA_ARGS:-}" ]]; then
  # shellcheck disable=SC2206 # word splitting intended
  launcher_args+=(${RCK_EXTRA_ARGS})
fi
log "running $SUITE_CLASS against http://127.0.0.1:$PORT/ (warehouse $RCK_CATALOG)"
log "command: CATALOG_URI=http://127.0.0.1:$PORT/ CATALOG_WAREHOUSE=$RCK_CATALOG java -Drck.local=false -Drck.requires-namespace-create=true -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -jar $RCK_LIB/$JUNIT_STANDALONE_NAME ${launcher_args[*]/#$CP/<CP: $jar_count jars of $RCK_LIB>}"
log "full launcher output: $CONSOLE_LOG"
t0=$SECONDS
launcher_rc=0
CATALOG_URI="http://127.0.0.1:$PORT/" CATALOG_WAREHOUSE="$RCK_CATALOG" \
  CATALOG_CREDENTIAL="$RCK_CLIENT_ID:$RCK_CLIENT_SECRET" CATALOG_SCOPE="PRINCIPAL_ROLE:ALL" \
  timeout --kill-after=30 "$RCK_TIMEOUT" \
  java -Drck.local=false -Drck.requires-namespace-create=true \
  -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
  -jar "$RCK_LIB/$JUNIT_STANDALONE_NAME" "${launcher_args[@]}" \
  >"$CONSOLE_LOG" 2>&1 || launcher_rc=$?
log "launcher finished in $((SECONDS - t0))s with status $launcher_rc"
((launcher_rc == 124 || launcher_rc == 137)) && log "suite timed out after ${RCK_TIMEOUT}s"

server_alive=1
kill -0 "$SERVER_PID" 2>/dev/null || server_alive=0

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
