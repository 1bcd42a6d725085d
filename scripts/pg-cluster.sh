#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests: loopback only, under a directory of
# its own, stopped and deleted afterwards.
#
#   scripts/pg-cluster.sh start DIR PORT   # prints the database URL
#   scripts/pg-cluster.sh stop DIR
#   scripts/pg-cluster.sh restart DIR      # fast shutdown and start again (fault tests)
#   scripts/pg-cluster.sh down DIR         # stop, keeping the data (fault tests)
#   scripts/pg-cluster.sh up DIR           # start again after down
#
# Installs Debian's postgresql when no server binaries are found. As root, the cluster
# runs as the 'postgres' user (PostgreSQL refuses to run as root).
set -euo pipefail

cmd="${1:?usage: pg-cluster.sh start DIR PORT | stop DIR | restart DIR}"
dir="${2:?directory required}"

find_bin() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

bin="$(find_bin)"
if [[ -z "$bin" || ! -x "$bin/initdb" ]]; then
  echo "installing PostgreSQL (Debian package postgresql)" >&2
  apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2
  bin="$(find_bin)"
fi

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
    mkdir -p "$dir"
    if [[ "$(id -u)" == 0 ]]; then
      chown postgres:postgres "$dir"
      # The server runs as 'postgres', which must be able to reach the directory: a
      # parent of mode 700 (as `mktemp -d` makes) keeps it out with a cryptic error.
      if ! runuser -u postgres -- test -w "$dir"; then
        echo "pg-cluster.sh: user 'postgres' cannot reach $dir (is a parent directory private, e.g. made by mktemp -d?); use a directory it can reach, such as /tmp/NAME" >&2
        exit 1
      fi
    fi
    as_owner "$bin/initdb" -D "$dir/data" -U floe --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1
    echo "$port" >"$dir/port"
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300" start >&2
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U floe floe
    echo "postgres://floe@127.0.0.1:$port/floe"
    ;;
  stop)
    if [[ -d "$dir/data" ]]; then
      as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >&2 || true
    fi
    rm -rf "$dir"
    ;;
  restart)
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m fast -w -t 60 restart \
      -o "-p $(cat "$dir/port") -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300" >&2
    ;;
  down)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >&2
    ;;
  up)
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-p $(cat "$dir/port") -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300" start >&2
    ;;
  *)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
