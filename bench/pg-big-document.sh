#!/usr/bin/env bash
# loadTable on PostgreSQL for one table whose metadata document has grown (~24 KB: 150
# set-properties commits fill the metadata log), at 50 connections, for the A/B of the
# PostgreSQL document cache (BENCHMARKS.md, "PostgreSQL nodes keep the documents they
# loaded"):
#
#   DATABASE_URL=postgres://floe@127.0.0.1:PORT/floe bench/pg-big-document.sh BINARY [SERVE_ARGS]
#
# A fresh server (--auth none) and a fresh database per run; SERVE_ARGS is word-split,
# e.g. "--metadata-cache-mib 0". Prints the document's size and the load figures.
set -euo pipefail
# shellcheck source=scripts/service.sh
source "$(dirname "$0")/../scripts/service.sh"
BIN=${1:?binary}
EXTRA=${2:-}
URL=${DATABASE_URL:?a PostgreSQL superuser URL}
port=$(service_free_port)
dir=$(mktemp -d /tmp/floe-big.XXXXXX)
name="floe_big_$RANDOM$RANDOM"
psql -q "$URL" -c "CREATE DATABASE $name"
# shellcheck disable=SC2086
"$BIN" serve --bind "127.0.0.1:$port" --data-dir "$dir/data" --auth none --log warn \
  --database-url "${URL%/*}/$name" $EXTRA >"$dir/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 200); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
BENCH=("$BIN" bench --quiet --url "http://127.0.0.1:$port" endpoint get-table --namespaces 1 --tables-per-namespace 1)
"${BENCH[@]}" --duration 1s >/dev/null # creates the table
python3 - "$port" <<'PY'
import json, sys, urllib.request
root = f"http://127.0.0.1:{sys.argv[1]}/v1/default"
get = lambda path: json.load(urllib.request.urlopen(root + path))
ns = get("/namespaces")["namespaces"][0][0]
table = get(f"/namespaces/{ns}/tables")["identifiers"][0]["name"]
url = f"{root}/namespaces/{ns}/tables/{table}"
for i in range(150):
    update = {"action": "set-properties", "updates": {f"k{i % 20}": "v" * 100 + str(i)}}
    body = json.dumps({"requirements": [], "updates": [update]}).encode()
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request).read()
print(f"document: {len(urllib.request.urlopen(url).read())} bytes", flush=True)
PY
"${BENCH[@]}" --duration 10s
