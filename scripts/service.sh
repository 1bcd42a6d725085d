# shellcheck shell=bash
# Sourced by the scripts that start the test servers (s3-server.sh, gcs-server.sh,
# azurite.sh, nats-server.sh, kafka-server.sh): the pid, start, wait and stop logic they
# share.
#
#   source "$root/scripts/service.sh"
#   service_port_arg PORT                      # exits 2 unless PORT is a number
#   service_launch [-a] PIDFILE LOG CMD [ARGS...]  # starts CMD in the background
#   service_pid PIDFILE MATCH                  # prints the pid if that server still runs
#   service_wait TIMEOUT PIDFILE MATCH CHECK [ARGS...]   # until CHECK says ready
#   service_stop PIDFILE MATCH [GRACE]         # TERM (then KILL) its process group
#   service_port_open HOST PORT                # true once HOST:PORT accepts a connection
#   service_free_port [TAKEN...]               # prints a free loopback port not in TAKEN
#   service_http_status URL [METHOD]           # prints the HTTP status, 0 for no answer
#   service_fail LOG MESSAGE                   # MESSAGE and the last lines of LOG, to stderr
#   service_npm_install PREFIX PACKAGE VERSION # PACKAGE@VERSION from npm into PREFIX
#
# A server is started by service_launch as the leader of a session (and process group)
# of its own, so that service_stop can signal it with whatever it started. PIDFILE holds
# its pid, written by the process itself before it execs CMD (so no wrapper process stays
# in between). MATCH, an argument that only this server's command line has (a path under
# its directory, say), tells it apart from whatever process later gets a recycled pid:
# a pid counts as running only while that process lives (a zombie does not count) and one
# of its command-line arguments is exactly MATCH.
#
# Needs bash, setsid (util-linux) and /proc; service_free_port and service_http_status
# also python3 (or SERVICE_PYTHON).

# The pid in PIDFILE, if that process still runs and is still ours (see above).
service_pid() {
  local pidfile="$1" match="$2" pid state arg args=()
  [[ -f "$pidfile" ]] || return 1
  pid="$(cat "$pidfile" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" || return 1
  [[ -n "$state" && "$state" != Z ]] || return 1
  # Read in the shell, not by `tr | grep -q`: under a caller's pipefail, grep -q leaving
  # early can fail the pipeline with tr's SIGPIPE, and a running server looks gone.
  mapfile -d '' -t args <"/proc/$pid/cmdline" 2>/dev/null || return 1
  for arg in "${args[@]}"; do
    if [[ "$arg" == "$match" ]]; then
      echo "$pid"
      return 0
    fi
  done
  return 1
}

# Signals the server's process group with TERM, waits up to GRACE seconds (default 10)
# for it to go, then KILLs it and waits up to 5 s more. Does nothing if it does not run.
# Always returns 0.
service_stop() {
  local pidfile="$1" match="$2" grace="${3:-10}" pid i
  pid="$(service_pid "$pidfile" "$match")" || return 0
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    service_pid "$pidfile" "$match" >/dev/null || return 0
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    service_pid "$pidfile" "$match" >/dev/null || return 0
    sleep 0.1
  done
  return 0
}

# Starts CMD in the background with no input and its output in LOG (truncated first;
# appended to with -a), leading a session of its own; the shell writes its own pid to
# PIDFILE, which exec hands on to CMD. Returns once PIDFILE is written (or after 30 s:
# until then nothing can tell a server that is slow to start from one that died. A NATS
# start in CI once failed with nothing at all in the server's log, which fits a shell
# not yet run after the 5 s this waited before, on a loaded 2-core machine: service_wait
# then gave up on a server that had not begun).
service_launch() {
  local append=0 i
  if [[ "$1" == -a ]]; then
    append=1
    shift
  fi
  local pidfile="$1" log="$2"
  shift 2
  rm -f "$pidfile"
  ((append)) || : >"$log"
  # shellcheck disable=SC2016 # expanded by the inner bash, on purpose
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$pidfile" "$@" \
    </dev/null >>"$log" 2>&1 &
  for ((i = 0; i < 300; i++)); do
    [[ -s "$pidfile" ]] && break
    sleep 0.1
  done
}

# Calls CHECK [ARGS...] until it returns 0 (ready: service_wait returns 0). A return of 1
# means not yet: it is called again after a short pause (SERVICE_WAIT_INTERVAL, default
# 0.2 s); any other return gives up at once (service_wait returns 1). Also returns 1 if
# the server stops running or TIMEOUT seconds pass first.
service_wait() {
  local timeout="$1" pidfile="$2" match="$3" rc
  shift 3
  local deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)) && service_pid "$pidfile" "$match" >/dev/null; do
    rc=0
    "$@" || rc=$?
    ((rc == 0)) && return 0
    ((rc == 1)) || return 1
    sleep "${SERVICE_WAIT_INTERVAL:-0.2}"
  done
  return 1
}

# True if LOG has, at line FROM or after (a start's part of a log kept across restarts),
# a line holding TEXT. Read by awk rather than `tail | grep -q`: under pipefail, grep -q
# leaving at the first match while tail still writes kills tail with SIGPIPE, and the
# pipeline fails (status 141) exactly when the text is there and more log follows it,
# which service_wait takes as "give up" (a restarted Kafka broker was given up on so).
service_log_has() {
  awk -v from="$2" -v text="$3" \
    'NR >= from && index($0, text) { found = 1; exit } END { exit !found }' "$1"
}

# True if something accepts a TCP connection on HOST:PORT.
service_port_open() {
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# A port that nothing listens on at 127.0.0.1 just now (the kernel's pick), and that is
# none of the TAKEN ports given.
service_free_port() {
  "${SERVICE_PYTHON:-${PYTHON:-python3}}" - "$@" <<'PY'
import socket, sys
taken = {int(p) for p in sys.argv[1:]}
while True:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    if p not in taken:
        print(p)
        break
PY
}

# The HTTP status that METHOD (default GET) URL gets within 2 s: an HTTP error prints its
# code, no answer at all prints 0.
service_http_status() {
  "${SERVICE_PYTHON:-${PYTHON:-python3}}" - "$1" "${2:-GET}" <<'PY' 2>/dev/null || echo 0
import sys, urllib.error, urllib.request
try:
    req = urllib.request.Request(sys.argv[1], method=sys.argv[2])
    print(urllib.request.urlopen(req, timeout=2).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print(0)
PY
}

# Exits 2 with a message unless PORT is a decimal number.
service_port_arg() {
  [[ "$1" =~ ^[0-9]+$ ]] || { echo "bad port $1" >&2; exit 2; }
}

# MESSAGE and then the last 40 lines of LOG, on stderr.
service_fail() {
  echo "$2; last lines of $1:" >&2
  tail -n 40 "$1" >&2 || true
}

# Installs PACKAGE@VERSION from npm into PREFIX/node_modules (npm's cache and logs under
# PREFIX too), unless exactly that version is there already.
service_npm_install() {
  local prefix="$1" package="$2" version="$3" installed
  installed="$("${SERVICE_PYTHON:-${PYTHON:-python3}}" - "$prefix/node_modules/$package/package.json" <<'PY' 2>/dev/null || true
import json, sys
print(json.load(open(sys.argv[1]))["version"])
PY
)"
  [[ "$installed" == "$version" ]] && return 0
  command -v npm >/dev/null 2>&1 || { echo "npm is needed to install $package" >&2; return 1; }
  echo "installing $package@$version into $prefix" >&2
  mkdir -p "$prefix"
  npm_config_cache="$prefix/npm-cache" npm_config_logs_dir="$prefix/npm-logs" \
    npm_config_update_notifier=false \
    npm install --prefix "$prefix" --save-exact --no-audit --no-fund --loglevel=error \
    "$package@$version" >&2
}
