#!/usr/bin/env bash
# Userspace instructions per loadTable request, counted by valgrind's callgrind: exact
# and repeatable to ~0.5%, where requests/s and CPU time on a shared 2-core VM move by
# ±15% between runs. It sees no kernel time (about half of a load's CPU here), so it
# measures Floe's own code, hyper and axum, not TCP.
#
#   bench/read-instructions.sh [FLOE_BIN ...]     # default: target/release/floe
#
# Each binary serves with the default settings (`--auth internal`, a bearer token per
# request, `--log info`); one keep-alive client loads one table 200 times (warm-up),
# the counters are zeroed, N more loads (default 2000) are counted. Then the same for
# `floe bench static-server` serving a body of the same size, the floor of the stack.
# Needs valgrind (`apt-get install valgrind`); takes about 10 s per binary.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-2000}
[ $# -gt 0 ] || set -- "$ROOT/target/release/floe"
# shellcheck source=scripts/service.sh
source "$(dirname "$0")/../scripts/service.sh"

# count BIN PORT DIR KIND: drives the server under callgrind, prints instructions/request.
count() {
  local pid=$1 port=$2 dir=$3 kind=$4
  python3 - "$port" "$N" "$pid" "$kind" <<'PY'
import http.client, json, subprocess, sys, time
port, n, pid, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
for _ in range(600):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port); c.connect(); break
    except OSError:
        time.sleep(0.2)
def req(method, path, body=None, headers={}):
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse(); data = r.read(); return r.status, data
path = "/v1/default/namespaces/bench/tables/t"
headers = {}
if kind == "floe":
    while req("GET", "/readyz")[0] != 200:
        time.sleep(0.2)
    form = "grant_type=client_credentials&client_id=bench&client_secret=bench-secret&scope=PRINCIPAL_ROLE:ALL"
    _, body = req("POST", "/v1/oauth/tokens", form, {"content-type": "application/x-www-form-urlencoded"})
    headers = {"Authorization": "Bearer " + json.loads(body)["access_token"]}
    h = dict(headers, **{"content-type": "application/json"})
    req("POST", "/v1/default/namespaces", json.dumps({"namespace": ["bench"]}), h)
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "required": True, "type": "long"}]}
    status, _ = req("POST", "/v1/default/namespaces/bench/tables", json.dumps({"name": "t", "schema": schema}), h)
    assert status == 200, status
for _ in range(200):
    req("GET", path, None, headers)
subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
for _ in range(n):
    status, _ = req("GET", path, None, headers)
    assert status == 200, status
subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
PY
  sleep 1
  kill "$pid"; wait "$pid" 2>/dev/null || true
  local ir
  # The zeroed-then-dumped part is the numbered file (the plain one is written at exit).
  ir=$(cat "$dir"/cg.out.* | awk '/^(summary|totals):/ {print $2; exit}')
  echo $((ir / N))
}

for bin in "$@"; do
  dir=$(mktemp -d /tmp/floe-instr.XXXXXX); port=$(service_free_port)
  FLOE_BOOTSTRAP_CREDENTIALS=bench,bench-secret valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
    "$bin" serve --bind "127.0.0.1:$port" --data-dir "$dir/data" --auth internal --log info >"$dir/log" 2>&1 &
  echo "$bin: $(count $! "$port" "$dir" floe) instructions per loadTable"
  rm -rf "$dir"
done
dir=$(mktemp -d /tmp/floe-instr.XXXXXX); port=$(service_free_port)
head -c 1282 /dev/zero | tr '\0' x >"$dir/body.json"
valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" "$1" bench static-server \
  --bind "127.0.0.1:$port" --body-file "$dir/body.json" >"$dir/log" 2>&1 &
echo "static server ($1): $(count $! "$port" "$dir" static) instructions per request"
rm -rf "$dir"
