#!/usr/bin/env bash
# A throwaway PgBouncer in transaction pooling mode in front of a test cluster, to prove
# Floe works behind it.
#
#   scripts/pgbouncer.sh start DIR PORT PG_PORT   # prints the database URL through it
#   scripts/pgbouncer.sh stop DIR
#
# Installs Debian's pgbouncer when missing. As root it runs as 'postgres' (PgBouncer
# refuses to run as root).
set -euo pipefail

cmd="${1:?usage: pgbouncer.sh start DIR PORT PG_PORT | stop DIR}"
dir="${2:?directory required}"

if ! command -v pgbouncer >/dev/null 2>&1 && [[ ! -x /usr/sbin/pgbouncer ]]; then
  echo "installing PgBouncer (Debian package pgbouncer)" >&2
  apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q pgbouncer >&2
fi
bin="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"

as_owner() {
  if [[ "$(id -u)" == 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

case "$cmd" in
  start)
    port="${3:?port required}"
    pg_port="${4:?PostgreSQL port required}"
    mkdir -p "$dir"
    cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$pg_port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir = $dir
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
    echo '"floe" ""' >"$dir/userlist.txt"
    [[ "$(id -u)" == 0 ]] && chown -R postgres:postgres "$dir"
    as_owner "$bin" -d "$dir/pgbouncer.ini"
    for _ in $(seq 1 50); do
      if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "postgres://floe@127.0.0.1:$port/floe"
        exit 0
      fi
      sleep 0.1
    done
    echo "PgBouncer did not start; see $dir/pgbouncer.log" >&2
    exit 1
    ;;
  stop)
    if [[ -f "$dir/pgbouncer.pid" ]]; then
      kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
