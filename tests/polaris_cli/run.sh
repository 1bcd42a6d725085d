#!/usr/bin/env bash
# The Apache Polaris CLI (PyPI apache-polaris, pinned in requirements.txt) against `floe serve`.
#
#   tests/polaris_cli/run.sh [pytest args...]
#
# (a) the venv .cache/polaris-venv with tests/polaris_cli/requirements.txt (reinstalled only
# when that file changes), (b) pytest tests/polaris_cli, which starts its own server on a
# free loopback port with a fresh data dir (tests/polaris_cli/README.md). The exit status is
# pytest's.
#
# Environment (all optional): FLOE_BIN (default target/release/floe), HEALTH_TIMEOUT,
# KEEP_DATA=1, POLARIS_CLI_TIMEOUT (seconds for the whole pytest run, default 600).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
DIR="$ROOT/tests/polaris_cli"
REQ="$DIR/requirements.txt"
VENV="$ROOT/.cache/polaris-venv"
export FLOE_BIN="${FLOE_BIN:-$ROOT/target/release/floe}"
case "$FLOE_BIN" in /*) ;; *) FLOE_BIN="$ROOT/$FLOE_BIN" ;; esac

log() { printf '[polaris-cli] %s\n' "$*"; }

# shellcheck source=../../scripts/venv.sh
source "$ROOT/scripts/venv.sh"
setup_venv() {
  ensure_venv "$VENV" "$REQ" | sed 's/^/[polaris-cli] /' || return 1
  "$VENV/bin/python" -m pip freeze --disable-pip-version-check \
    | grep -iE '^(apache-polaris|pytest|requests)==' || true
}
setup_venv || { log "venv setup failed"; exit 1; }

rc=0
timeout --kill-after=30 "${POLARIS_CLI_TIMEOUT:-600}" \
  "$VENV/bin/python" -m pytest "$DIR" -ra -p no:cacheprovider "$@" || rc=$?
case "$rc" in
  5) log "pytest collected no tests" ;;
  124 | 137) log "pytest timed out after ${POLARIS_CLI_TIMEOUT:-600}s" ;;
esac
exit "$rc"
