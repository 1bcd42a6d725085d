#!/usr/bin/env bash
# loadTable at one scale, on a fresh embedded server, optionally under `perf`:
#
#   bench/load-at-scale.sh [BINARY] [SCALE] [TABLES_PER_NAMESPACE]
#
# Starts `floe serve` with bench/scale.py's settings (token authentication on, defaults
# otherwise, `--log warn`), then `floe bench ycsb --preset read-only` at SCALE tables
# (default 100000; namespaces of TABLES_PER_NAMESPACE, default 1000; 50 users, Zipfian
# keys over all the tables, run phase of DURATION, default 30s, at least 25s). From the
# run phase's first progress line (~10 s in) it reads the server's CPU time for 10 s
# (and, with PERF=1, records `perf` call graphs to PERF_OUT, default perf.data). Prints
# the server's cores busy and the run phase's loadTable req/s, p50 and p99 (ms). The quick probe behind BENCHMARKS.md's fix of the
# existence check's watches; bench/scale.py is the full benchmark.
set -euo pipefail
# shellcheck source=scripts/service.sh
source "$(dirname "$0")/../scripts/service.sh"
BIN=${1:-target/release/floe}
SCALE=${2:-100000}
TPN=${3:-1000}
port=$(service_free_port)
dir=$(mktemp -d /tmp/floe-load-at-scale.XXXXXX)
"$BIN" serve --bind "127.0.0.1:$port" --data-dir "$dir/data" \
  --bootstrap-credentials bench,bench-secret --log warn >"$dir/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 200); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
"$BIN" bench ycsb --url "http://127.0.0.1:$port" --client-id bench --client-secret bench-secret \
  --preset read-only --scale "$SCALE" --tables-per-namespace "$TPN" --users 50 \
  --duration "${DURATION:-30s}" --out "$dir" --name run >"$dir/bench.out" 2>&1 &
bench=$!
until grep -q "read-only at" "$dir/bench.out" 2>/dev/null; do
  kill -0 $bench 2>/dev/null || { cat "$dir/bench.out"; exit 1; }
  sleep 0.5
done
ticks() { awk '{print $14+$15}' "/proc/$pid/stat"; }
t0=$(ticks)
if [ -n "${PERF:-}" ]; then
  perf record -F 999 -g -o "${PERF_OUT:-perf.data}" -p $pid -- sleep 10 >/dev/null 2>&1
else
  sleep 10
fi
t1=$(ticks)
wait $bench
echo "server: $(python3 -c "print(f'{($t1 - $t0) / 100 / 10:.2f}')") cores busy"
python3 - "$dir/run.json" <<'PY'
import json, sys
for row in json.load(open(sys.argv[1]))["rows"]:
    if row["phase"].startswith("run"):
        print(f"{row['phase']}: {row['throughput_rps']:,.0f} req/s, p50 {row['p50_ms']:.2f} ms, p99 {row['p99_ms']:.2f} ms")
PY
