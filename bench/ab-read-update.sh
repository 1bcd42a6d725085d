#!/usr/bin/env bash
# Two builds of Floe, side by side, on the Polaris benchmark's read/write mix:
#
#   bench/ab-read-update.sh OLD_BINARY NEW_BINARY [RUNS] [RATIO]
#
# For each run (default 3) and each binary, alternating: a fresh embedded server
# (--auth none), `floe bench create-tree` (depth 8, 2 tables and 2 views per namespace),
# then `floe bench read-update` at read/write ratio RATIO (default 0.5) with 50 users for
# 10 s. Prints the [Read] and [Write] lines of each run (columns: count, ok, failed, ...,
# mean, min, p50, p90, p99, p99.9, max in ms, then ops/s). The load generator is
# NEW_BINARY's `floe bench` for both. Used for BENCHMARKS.md's group-commit figures.
#
# Environment: OLD_ARGS, NEW_ARGS (more `serve` arguments for each side, word-split; the
# same binary twice with different flags compares settings), DATABASE_URL (a PostgreSQL
# superuser URL: each server then gets a fresh database there instead of the embedded
# store).
#
# Each server starts once the disk is quiet (`bench/quiet-disk.sh`): the run before it
# deleted its files just now. The minute in which ext4 then skips those inodes is not
# waited out (`bench/ab-cpu.sh` keeps its runs' files for that reason; this script does
# not yet), so the second side of a pair may still measure slower.
set -euo pipefail
# shellcheck source=bench/quiet-disk.sh
source "$(dirname "$0")/quiet-disk.sh"
OLD=${1:?old binary}
NEW=${2:?new binary}
RUNS=${3:-3}
RATIO=${4:-0.5}
BENCH="$NEW bench --quiet"
TREE=(--namespace-depth 8 --tables-per-namespace 2 --views-per-namespace 2)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() {
  local bin=$1 tag=$2 extra=$3 port dir pid db=()
  wait_for_quiet_disk
  port=$(free_port)
  dir=$(mktemp -d /tmp/floe-ab.XXXXXX)
  if [[ -n "${DATABASE_URL:-}" ]]; then
    local name="floe_ab_$RANDOM$RANDOM"
    psql -q "$DATABASE_URL" -c "CREATE DATABASE $name"
    db=(--database-url "${DATABASE_URL%/*}/$name")
  fi
  # shellcheck disable=SC2086
  "$bin" serve --bind "127.0.0.1:$port" --data-dir "$dir/data" --auth none --log warn "${db[@]}" $extra \
    >"$dir/log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
  # The catalog's files under the run's directory (not the default file:///tmp/polaris).
  $BENCH --url "http://127.0.0.1:$port" create-tree "${TREE[@]}" \
    --base-location "file://$dir/warehouse" >/dev/null
  echo "== $tag"
  $BENCH --url "http://127.0.0.1:$port" read-update "${TREE[@]}" --read-write-ratio "$RATIO" \
    --users 50 --duration 10s | grep -E '^\[(Read|Write)\]'
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
}

for _ in $(seq "$RUNS"); do
  run "$OLD" old "${OLD_ARGS:-}"
  run "$NEW" new "${NEW_ARGS:-}"
done
