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
# Each server starts once the disk is quiet (`bench/quiet-disk.sh`). Each run's files are
# kept until the end (or until the disk runs low, then deleted and a minute waited out),
# as `bench/ab-cpu.sh` does: ext4 skips inodes freed in the last minute when it allocates
# one, so a run started just after the last one's files were deleted measured that scan
# (one check: the same build served 11,825 req/s first and 4,879 second).
set -euo pipefail
# shellcheck source=bench/quiet-disk.sh
source "$(dirname "$0")/quiet-disk.sh"
OLD=${1:?old binary}
NEW=${2:?new binary}
RUNS=${3:-3}
RATIO=${4:-0.5}
BENCH="$NEW bench --quiet"
TREE=(--namespace-depth 8 --tables-per-namespace 2 --views-per-namespace 2)

kept=()
cleanup() { if ((${#kept[@]})); then rm -rf "${kept[@]}"; fi; }
trap cleanup EXIT

# shellcheck source=scripts/service.sh
source "$(dirname "$0")/../scripts/service.sh"

run() {
  local bin=$1 tag=$2 extra=$3 port dir pid db=()
  if (( $(df --output=avail -k /tmp | tail -1) < 12 * 1024 * 1024 )); then
    cleanup; kept=(); sync; sleep 65
  fi
  wait_for_quiet_disk
  port=$(service_free_port)
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
  kept+=("$dir")
}

for _ in $(seq "$RUNS"); do
  run "$OLD" old "${OLD_ARGS:-}"
  run "$NEW" new "${NEW_ARGS:-}"
done
