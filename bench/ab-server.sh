#!/usr/bin/env bash
# Sourced by `bench/ab-read-update.sh` and `bench/ab-create.sh`: one fresh server per run.
#
#   ab_server_start BINARY "EXTRA SERVE ARGS"   # sets AB_PORT, AB_PID, AB_DIR
#   ab_server_stop                              # stops it; its files are kept until exit
#
# A fresh embedded server (--auth none, --log warn) under a new directory in /tmp, or with
# DATABASE_URL (a PostgreSQL superuser URL) a fresh database there. It starts once the
# disk is quiet (`bench/quiet-disk.sh`). Each run's files are kept until the script ends
# (or until the disk runs low, then deleted and a minute waited out): ext4 skips inodes
# freed in the last minute when it allocates one, so a run started just after the last
# one's files were deleted measured that scan (one check: the same build served 11,825
# req/s first and 4,879 second).
set -euo pipefail
# shellcheck source=bench/quiet-disk.sh
source "$(dirname "${BASH_SOURCE[0]}")/quiet-disk.sh"
# shellcheck source=scripts/service.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/service.sh"

AB_KEPT=()
AB_PID=
# On exit, a failed run's server too (a workload that printed nothing stops the script).
ab_cleanup() {
  if [[ -n $AB_PID ]]; then
    kill "$AB_PID" 2>/dev/null || true
    wait "$AB_PID" 2>/dev/null || true
    AB_KEPT+=("$AB_DIR")
  fi
  if ((${#AB_KEPT[@]})); then rm -rf "${AB_KEPT[@]}"; fi
}
trap ab_cleanup EXIT

ab_server_start() {
  local bin=$1 extra=$2 db=()
  if (( $(df --output=avail -k /tmp | tail -1) < 12 * 1024 * 1024 )); then
    ab_cleanup; AB_KEPT=(); sync; sleep 65
  fi
  wait_for_quiet_disk
  AB_PORT=$(service_free_port)
  AB_DIR=$(mktemp -d /tmp/floe-ab.XXXXXX)
  if [[ -n "${DATABASE_URL:-}" ]]; then
    local name="floe_ab_$RANDOM$RANDOM"
    psql -q "$DATABASE_URL" -c "CREATE DATABASE $name"
    db=(--database-url "${DATABASE_URL%/*}/$name")
  fi
  # shellcheck disable=SC2086
  "$bin" serve --bind "127.0.0.1:$AB_PORT" --data-dir "$AB_DIR/data" --auth none --log warn \
    "${db[@]}" $extra >"$AB_DIR/log" 2>&1 &
  AB_PID=$!
  for _ in $(seq 200); do
    curl -sf "http://127.0.0.1:$AB_PORT/readyz" >/dev/null && break
    sleep 0.1
  done
}

ab_server_stop() {
  kill "$AB_PID"; wait "$AB_PID" 2>/dev/null || true
  AB_PID=
  AB_KEPT+=("$AB_DIR")
}
