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
# Servers as `bench/ab-server.sh` starts them (a fresh one per run, once the disk is
# quiet, each run's files kept until the end).
set -euo pipefail
# shellcheck source=bench/ab-server.sh
source "$(dirname "$0")/ab-server.sh"
OLD=${1:?old binary}
NEW=${2:?new binary}
RUNS=${3:-3}
RATIO=${4:-0.5}
BENCH="$NEW bench --quiet"
TREE=(--namespace-depth 8 --tables-per-namespace 2 --views-per-namespace 2)

run() {
  ab_server_start "$1" "$3"
  # The catalog's files under the run's directory (not the default file:///tmp/polaris).
  $BENCH --url "http://127.0.0.1:$AB_PORT" create-tree "${TREE[@]}" \
    --base-location "file://$AB_DIR/warehouse" >/dev/null
  echo "== $2"
  $BENCH --url "http://127.0.0.1:$AB_PORT" read-update "${TREE[@]}" --read-write-ratio "$RATIO" \
    --users 50 --duration 10s | grep -E '^\[(Read|Write)\]'
  ab_server_stop
}

for _ in $(seq "$RUNS"); do
  run "$OLD" old "${OLD_ARGS:-}"
  run "$NEW" new "${NEW_ARGS:-}"
done
