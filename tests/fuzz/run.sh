#!/usr/bin/env bash
# Bounded schemathesis fuzz run of the Apache Iceberg REST spec (or another of the OpenAPI
# documents Floe serves) against `floe serve`.
#
#   tests/fuzz/run.sh
#   FUZZ_SPEC=polaris-catalog.json tests/fuzz/run.sh    # generic tables and policies
#
# Steps: (a) the venv .cache/fuzz-venv with tests/fuzz/requirements.txt (reinstalled only
# when that file changes), (b) start "$FLOE_BIN serve" on a free loopback port with a fresh
# data dir, wait for /healthz, log in as the root principal and seed a namespace `fuzz`
# (with a child `fuzz.child`), a table `fuzz.t`, a view `fuzz.v`, a generic table `fuzz.g`
# and a policy `fuzz.p`, (c) run schemathesis on docs/openapi/$FUZZ_SPEC (the copy /openapi
# serves) with a fixed seed and a bounded number of examples, (d) stop the server and judge.
#
# The last line is "N passed, N failed": API operations (plus schemathesis's "Stateful
# tests" group) without / with a failure, read from the JUnit report; a server that died,
# or panicked (see its log), counts as one more failure. Exit status: 0 only if nothing failed.
#
# Environment (all optional):
#   FLOE_BIN             server binary                     (default: target/release/floe)
#   FUZZ_SPEC            document under docs/openapi       (default: iceberg-rest-catalog.json)
#   FUZZ_MAX_EXAMPLES    test cases per operation and phase (default: 100; ~1 min on 2 cores,
#                        500 takes ~3.5 min)
#   FUZZ_SEED            schemathesis/hypothesis seed       (default: 20261123)
#   FUZZ_WORKERS         concurrent schemathesis workers    (default: 1: with more, CPython 3.11's
#                        ast.parse, which hypothesis calls from several threads, fails at random
#                        with "SystemError: AST constructor recursion depth mismatch")
#   FUZZ_PHASES          phases to run                      (default: examples,coverage,fuzzing,stateful)
#   FUZZ_CHECKS          checks, comma-separated            (default: see CHECKS below)
#   FUZZ_TIMEOUT         wall-clock limit of schemathesis, seconds (default: 600)
#   FUZZ_REPORT_DIR      JUnit/NDJSON reports + server log  (default: .cache/fuzz-reports)
#   FUZZ_EXTRA_ARGS      more `st run` arguments (word-split), e.g. "--include-path-regex views"
#   FLOE_FUZZ_AUTH       internal (Floe's default: OAuth2 token of the root principal) or none
#   FLOE_FUZZ_ERRATA=0   fuzz the spec exactly as published (see hooks.py)
#   FLOE_FUZZ_FRESH_KEYS    1 (default): a fresh UUID for every well-formed Idempotency-Key, so
#                        that mutations reach their handlers; 0: keep the generated keys
#                        (most mutations are then refused as a reused key; see hooks.py)
#   HEALTH_TIMEOUT       seconds to wait for /healthz       (default: 60)
#   KEEP_DATA=1          keep the server's data dir
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
FUZZ_DIR="$ROOT/tests/fuzz"
SPEC="$ROOT/docs/openapi/${FUZZ_SPEC:-iceberg-rest-catalog.json}"
REQ="$FUZZ_DIR/requirements.txt"
VENV="$ROOT/.cache/fuzz-venv"

FLOE_BIN="${FLOE_BIN:-$ROOT/target/release/floe}"
MAX_EXAMPLES="${FUZZ_MAX_EXAMPLES:-100}"
SEED="${FUZZ_SEED:-20261123}"
WORKERS="${FUZZ_WORKERS:-1}"
PHASES="${FUZZ_PHASES:-examples,coverage,fuzzing,stateful}"
FUZZ_TIMEOUT="${FUZZ_TIMEOUT:-600}"
REPORT_DIR="${FUZZ_REPORT_DIR:-$ROOT/.cache/fuzz-reports}"
AUTH_MODE="${FLOE_FUZZ_AUTH:-internal}"
HEALTH_TIMEOUT="${HEALTH_TIMEOUT:-60}"

# Checks (schemathesis names):
#   not_a_server_error            no 5xx (and a dropped connection is reported as an error anyway)
#   status_code_conformance       the status is one the spec declares for the operation
#   content_type_conformance      the Content-Type is one the spec declares for that status
#   response_schema_conformance   JSON bodies match the declared schema (errors: {"error":{...}})
#   response_headers_conformance  headers the spec marks required for a response are sent
#   ignored_auth                  (auth on only) the token is really required: the same request
#                                 without it, or with a bad one, is not a 2xx
# Left out on purpose (run them with FUZZ_CHECKS=... to explore):
#   positive_data_acceptance      expects 2xx/404/409 for every schema-valid request; the spec's
#                                 schemas are far looser than the catalog's rules (an empty
#                                 namespace [], a table without a name, a pageToken Floe never
#                                 issued, a key reused for another request, ...) and a 400 there is
#                                 correct, so it only reports noise.
#   negative_data_rejection       expects a 4xx for every schema-violating request; being lenient
#                                 with input (e.g. an unknown `snapshots=` value) is not a spec
#                                 violation of the response, which is what this run guards.
#   ensure_resource_availability  false positives: a namespace is a JSON array in bodies but a
#                                 %1F-joined string in paths, and schemathesis's inferred links
#                                 put the array's repr (%5B'name'%5D) in the path, then report
#                                 the 404 as "created resource not found".
#   object_level_authorization    needs two principals that must not see each other's objects.
# Also enabled, cheap: use_after_free (no 2xx for a deleted resource, stateful phase),
# unsupported_method + allow_header_conformance (405 with Allow for undeclared methods),
# missing_required_header.
DEFAULT_CHECKS="not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance,use_after_free,unsupported_method,allow_header_conformance,missing_required_header"
case "$AUTH_MODE" in
  internal) DEFAULT_CHECKS="$DEFAULT_CHECKS,ignored_auth" ;;
  none) ;;
  *) echo "[fuzz] ERROR: FLOE_FUZZ_AUTH must be internal or none" >&2; exit 2 ;;
esac
CHECKS="${FUZZ_CHECKS:-$DEFAULT_CHECKS}"

log() { printf '[fuzz] %s\n' "$*"; }
die() { printf '[fuzz] ERROR: %s\n' "$*" >&2; echo "0 passed, 1 failed"; exit 1; }

case "$FLOE_BIN" in /*) ;; *) FLOE_BIN="$ROOT/$FLOE_BIN" ;; esac
[[ -x "$FLOE_BIN" ]] || die "server binary not found or not executable: $FLOE_BIN (build it, or set FLOE_BIN)"
[[ -f "$SPEC" ]] || die "spec not found: $SPEC"
command -v python3 >/dev/null 2>&1 || die "python3 not found"

# --- (a) venv ----------------------------------------------------------------
# shellcheck source=../../scripts/venv.sh
source "$ROOT/scripts/venv.sh"
setup_venv() {
  ensure_venv "$VENV" "$REQ" | sed 's/^/[fuzz] /' || return 1
  log "$("$VENV/bin/st" --version)"
}
setup_venv || die "venv setup failed"
PY="$VENV/bin/python"

# --- (b) server --------------------------------------------------------------
rm -rf "$REPORT_DIR"
mkdir -p "$REPORT_DIR"
SERVER_LOG="$REPORT_DIR/floe.log"
DATA_DIR="$(mktemp -d "${TMPDIR:-/tmp}/floe-fuzz.XXXXXX")"
SERVER_PID=""
CLIENT_ID="fuzz-root"
CLIENT_SECRET="fuzz-secret-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"

stop_server() {
  [[ -n "$SERVER_PID" ]] || return 0
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$SERVER_PID" 2>/dev/null && kill -KILL "$SERVER_PID" 2>/dev/null || true
  fi
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}
cleanup() {
  stop_server
  if [[ "${KEEP_DATA:-0}" == 1 ]]; then log "data dir kept: $DATA_DIR"; else rm -rf "$DATA_DIR"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck source=../../scripts/service.sh
source "$ROOT/scripts/service.sh"
healthy() {
  curl -fsS -o /dev/null --max-time 2 "$1" 2>/dev/null
}

started=0
for attempt in 1 2 3; do
  PORT="$(service_free_port)"
  log "starting $FLOE_BIN serve --bind 127.0.0.1:$PORT --data-dir $DATA_DIR --auth $AUTH_MODE --log warn (attempt $attempt)"
  NO_COLOR=1 FLOE_BOOTSTRAP_CREDENTIALS="$CLIENT_ID,$CLIENT_SECRET" \
    "$FLOE_BIN" serve --bind "127.0.0.1:$PORT" --data-dir "$DATA_DIR" --auth "$AUTH_MODE" \
    --fsync false --log warn >>"$SERVER_LOG" 2>&1 &
  SERVER_PID=$!
  deadline=$((SECONDS + HEALTH_TIMEOUT))
  while ((SECONDS < deadline)); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    if healthy "http://127.0.0.1:$PORT/healthz"; then started=1; break; fi
    sleep 0.2
  done
  ((started)) && break
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    tail -n 50 "$SERVER_LOG" || true
    die "server not healthy within ${HEALTH_TIMEOUT}s"
  fi
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
  log "server exited early; retrying"
done
((started)) || { tail -n 50 "$SERVER_LOG" || true; die "server failed to start"; }
BASE="http://127.0.0.1:$PORT"
log "server ready at $BASE (pid $SERVER_PID)"

# Log in (auth on) and seed the resources the fuzzer's path dictionaries name.
export FLOE_FUZZ_TOKEN
SPEC_NAME="$(basename "$SPEC")"
PRINCIPAL_FILE="$REPORT_DIR/principal"
FLOE_FUZZ_TOKEN="$("$PY" - "$BASE" "$AUTH_MODE" "$CLIENT_ID" "$CLIENT_SECRET" "$SPEC_NAME" "$PRINCIPAL_FILE" <<'PY'
import json, sys, urllib.parse, urllib.request, uuid

base, mode, client_id, secret, spec, principal_file = sys.argv[1:7]

def login(client_id, secret):
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": client_id,
                                   "client_secret": secret, "scope": "PRINCIPAL_ROLE:ALL"}).encode()
    with urllib.request.urlopen(urllib.request.Request(base + "/v1/oauth/tokens", data=form), timeout=10) as r:
        return json.load(r)["access_token"]

token = login(client_id, secret) if mode == "internal" else "no-auth"

with urllib.request.urlopen(urllib.request.Request(base + "/v1/config",
        headers={"Authorization": "Bearer " + token}), timeout=10) as r:
    prefix = json.load(r)["overrides"]["prefix"]
if prefix != "default":
    sys.exit(f"/v1/config overrides.prefix is {prefix!r}, schemathesis.toml assumes 'default'")

# `path` under the catalog's REST prefix, or whole when it starts with "/"; the status
# and the parsed body (a 4xx or 5xx raises).
def call(method, path, body):
    url = base + path if path.startswith("/") else f"{base}/v1/{prefix}/{path}"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method=method,
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, json.loads(r.read() or b"null")

def post(path, body):
    status, _ = call("POST", path, body)
    assert status == 200, (path, status)

schema = {"type": "struct", "schema-id": 0, "fields": [
    {"id": 1, "name": "id", "required": True, "type": "long"},
    {"id": 2, "name": "data", "required": False, "type": "string"}]}
post("namespaces", {"namespace": ["fuzz"], "properties": {"owner": "fuzz"}})
post("namespaces", {"namespace": ["fuzz", "child"]})
post("namespaces/fuzz/tables", {"name": "t", "schema": schema})
post("namespaces/fuzz/views", {"name": "v", "schema": schema, "properties": {}, "view-version": {
    "version-id": 1, "timestamp-ms": 1700000000000, "schema-id": 0, "summary": {"engine-name": "fuzz"},
    "default-namespace": ["fuzz"],
    "representations": [{"type": "sql", "sql": "select 1 as id, 'a' as data", "dialect": "spark"}]}})
# Polaris's extensions live beside /v1.
post(f"/api/catalog/polaris/v1/{prefix}/namespaces/fuzz/generic-tables", {"name": "g", "format": "delta"})
post(f"/api/catalog/polaris/v1/{prefix}/namespaces/fuzz/policies", {
    "name": "p", "type": "system.data-compaction", "content": '{"enable": true}'})
# The management API can reset, rotate or drop principals, and schemathesis learns their
# names from responses: fuzzing it as root locks the run out at root's first reset. Its
# run logs in as a principal of its own holding root's principal role, whose name the
# hooks keep out of the mutations (hooks.py, PROTECTED).
if spec == "polaris-management.json" and mode == "internal":
    name = "fuzz-admin-" + uuid.uuid4().hex[:12]
    _, created = call("POST", "/api/management/v1/principals", {"principal": {"name": name}})
    call("PUT", f"/api/management/v1/principals/{name}/principal-roles",
         {"principalRole": {"name": "service_admin"}})
    token = login(created["credentials"]["clientId"], created["credentials"]["clientSecret"])
    with open(principal_file, "w") as f:
        print(name, file=f)
print(token)
PY
)" || die "could not log in / seed the catalog"
export FLOE_FUZZ_PRINCIPAL=""
[[ -s "$PRINCIPAL_FILE" ]] && FLOE_FUZZ_PRINCIPAL="$(cat "$PRINCIPAL_FILE")"
log "seeded namespaces fuzz, fuzz.child, table fuzz.t, view fuzz.v, generic table fuzz.g, policy fuzz.p in catalog 'default'"

# --- (c) schemathesis ----------------------------------------------------------
# The management spec's paths are relative to its server URL; the others' are whole.
case "$SPEC_NAME" in
  polaris-management.json) BASE_PATH=/api/management/v1 ;;
  *) BASE_PATH="" ;;
esac
export SCHEMATHESIS_HOOKS="$FUZZ_DIR/hooks.py"
export FLOE_FUZZ_SPEC="$SPEC_NAME"
export FLOE_FUZZ_FRESH_KEYS="${FLOE_FUZZ_FRESH_KEYS:-1}"
# shellcheck disable=SC2206 # FUZZ_EXTRA_ARGS is split on purpose
st_cmd=(
  "$VENV/bin/st" --config-file "$FUZZ_DIR/schemathesis.toml" run "$SPEC"
  --url "$BASE$BASE_PATH"
  --checks "$CHECKS"
  --phases "$PHASES"
  --max-examples "$MAX_EXAMPLES"
  --seed "$SEED"
  --workers "$WORKERS"
  --request-timeout 10
  --generation-database none
  --suppress-health-check too_slow,filter_too_much,data_too_large
  --report junit,ndjson --report-dir "$REPORT_DIR"
  --no-color
  ${FUZZ_EXTRA_ARGS:-}
)
log "running: ${st_cmd[*]}"
t0=$SECONDS
st_rc=0
timeout --kill-after=30 "$FUZZ_TIMEOUT" "${st_cmd[@]}" || st_rc=$?
log "schemathesis exited with status $st_rc after $((SECONDS - t0))s"

# --- (d) stop and judge --------------------------------------------------------
server_died=0
kill -0 "$SERVER_PID" 2>/dev/null || server_died=1
stop_server
panics="$(grep -c 'panicked at' "$SERVER_LOG" 2>/dev/null || true)"
((panics > 0)) && { log "server log has $panics panic(s):"; grep -m5 -A2 'panicked at' "$SERVER_LOG" || true; }
((server_died)) && log "the server died during the run (log: $SERVER_LOG)"
log "reports and server log in $REPORT_DIR"

read -r passed failed < <("$PY" - "$REPORT_DIR" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
passed = failed = 0
for path in glob.glob(sys.argv[1] + "/junit*.xml"):
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is None:
            passed += 1
print(passed, failed)
PY
) || { passed=0; failed=0; }
((passed + failed > 0)) || { log "no JUnit report: schemathesis did not run to the end"; failed=$((failed + 1)); }
((st_rc != 0 && failed == 0)) && failed=1 # e.g. timeout, or errors outside any operation
((panics > 0 || server_died)) && failed=$((failed + 1))
echo "$passed passed, $failed failed"
((failed == 0))
