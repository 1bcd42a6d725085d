#!/usr/bin/env bash
# Two builds of Floe, side by side, on the Polaris benchmark's dataset creation:
#
#   bench/ab-create.sh OLD_BINARY NEW_BINARY [RUNS] [USERS]
#
# For each run (default 3) and each binary, alternating: a fresh server
# (`bench/ab-server.sh`), then `floe bench create-tree` (depth 8, 2 tables and 2 views
# per namespace: 255 namespaces, 256 tables, 256 views) with USERS users (default 1).
# Prints the Create Namespace, Create Table and Create View lines of each run (columns as
# `floe bench` prints them: count, OK, KO, retry, mean, min, p50, p75, p99, max in ms,
# then req/s). The load generator is NEW_BINARY's `floe bench` for both. Used for
# BENCHMARKS.md's figures on what a create's location checks cost.
#
# Environment: OLD_ARGS, NEW_ARGS (more `serve` arguments for each side, word-split),
# DATABASE_URL (PostgreSQL instead of the embedded store; `bench/ab-server.sh`).
set -euo pipefail
# shellcheck source=bench/ab-server.sh
source "$(dirname "$0")/ab-server.sh"
OLD=${1:?old binary}
NEW=${2:?new binary}
RUNS=${3:-3}
USERS=${4:-1}
TREE=(--namespace-depth 8 --tables-per-namespace 2 --views-per-namespace 2)

run() {
  ab_server_start "$1" "$3"
  echo "== $2"
  "$NEW" bench --quiet --url "http://127.0.0.1:$AB_PORT" create-tree "${TREE[@]}" \
    --users "$USERS" --base-location "file://$AB_DIR/warehouse" \
    | grep -E '^Create (Namespace|Table|View) '
  ab_server_stop
}

for _ in $(seq "$RUNS"); do
  run "$OLD" old "${OLD_ARGS:-}"
  run "$NEW" new "${NEW_ARGS:-}"
done
