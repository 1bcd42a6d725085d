#!/usr/bin/env bash
# A throwaway Azure Blob Storage emulator for the tests: Azurite's blob service only,
# loopback only, plain HTTP, under a directory of its own, stopped and deleted afterwards.
#
#   scripts/azurite.sh start DIR PORT   # prints the blob endpoint, http://127.0.0.1:PORT/devstoreaccount1
#   scripts/azurite.sh stop DIR         # kills it and deletes DIR; idempotent
#
# What the server has: Azurite's well-known development account, devstoreaccount1, with
# its well-known key (below; Shared Key authentication), and in it the container 'lake'
# (empty). Addresses are path-style: http://127.0.0.1:PORT/devstoreaccount1/lake/<blob>.
# The Rust object_store crate (and so Floe) reaches it with use_emulator
# (AZURE_STORAGE_USE_EMULATOR=true, or Floe's FLOE_STORAGE_<NAME>_USE_EMULATOR=true) and
# AZURITE_BLOB_STORAGE_URL=http://127.0.0.1:PORT.
#
# Azurite runs with --skipApiVersionCheck (clients may send a newer x-ms-version than it
# knows), --disableProductStyleUrl (the account is always the first path segment) and
# --disableTelemetry (it collects usage data by default); only the blob service runs, so
# PORT is the only port it opens. Data and the access log (DIR/azurite.log) live under
# DIR, the pid in DIR/azurite.pid.
#
# Azurite comes from npm, pinned below, installed with `npm install --prefix` into
# .cache/azurite at the repository root (npm's cache under .cache/azurite too), again
# only when the installed version differs from the pin. 3.35.0 is the newest release
# that still runs on Node.js 20 (3.36 needs 21, 3.37 needs 22). Needs node, npm and
# python3 (to create the container).
set -euo pipefail

AZURITE_VERSION=3.35.0
ACCOUNT=devstoreaccount1
# Azurite's published development key: not a secret.
ACCOUNT_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

cmd="${1:?usage: azurite.sh start DIR PORT | stop DIR}"
dir="${2:?directory required}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="$root/.cache/azurite"
main="$prefix/node_modules/azurite/dist/src/blob/main.js"
python="${PYTHON:-python3}"

# The pid in DIR/azurite.pid, if that process still runs (a zombie does not count) and
# is still our Azurite (its command line names DIR/data: a recycled pid does not count).
running_pid() {
  local pid state
  [[ -f "$dir/azurite.pid" ]] || return 1
  pid="$(cat "$dir/azurite.pid")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" || return 1
  [[ -n "$state" && "$state" != Z ]] || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF "$dir/data" || return 1
  echo "$pid"
}

stop_server() {
  local pid i
  if pid="$(running_pid)"; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      running_pid >/dev/null || break
      sleep 0.1
    done
    if running_pid >/dev/null; then
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        running_pid >/dev/null || break
        sleep 0.1
      done
    fi
  fi
}

installed_version() {
  "$python" - "$prefix/node_modules/azurite/package.json" <<'PY' 2>/dev/null || true
import json, sys
print(json.load(open(sys.argv[1]))["version"])
PY
}

install_azurite() {
  [[ -f "$main" && "$(installed_version)" == "$AZURITE_VERSION" ]] && return 0
  command -v npm >/dev/null 2>&1 || { echo "npm is needed to install Azurite" >&2; return 1; }
  echo "installing azurite@$AZURITE_VERSION into $prefix" >&2
  mkdir -p "$prefix"
  npm_config_cache="$prefix/npm-cache" npm_config_logs_dir="$prefix/npm-logs" \
    npm_config_update_notifier=false \
    npm install --prefix "$prefix" --save-exact --no-audit --no-fund --loglevel=error \
    "azurite@$AZURITE_VERSION" >&2
}

# Starts Azurite in the background, leading a session (and process group) of its own;
# the shell writes its own pid, which exec hands on.
launch() {
  rm -rf "$dir/data" "$dir/azurite.pid"
  mkdir -p "$dir/data"
  setsid bash -c 'echo $$ >"$1/azurite.pid"; shift; exec "$@"' _ "$dir" \
    node "$main" --blobHost 127.0.0.1 --blobPort "$port" --location "$dir/data" \
    --skipApiVersionCheck --disableProductStyleUrl --disableTelemetry \
    </dev/null >"$dir/azurite.log" 2>&1 &
  local i
  for ((i = 0; i < 50; i++)); do
    [[ -s "$dir/azurite.pid" ]] && break
    sleep 0.1
  done
}

# PUT /devstoreaccount1/lake?restype=container with Shared Key authentication; prints
# the status (201 made, 409 already there, 0 no answer).
create_container() {
  "$python" - "http://127.0.0.1:$port" "$ACCOUNT" "$ACCOUNT_KEY" lake <<'PY' 2>/dev/null || echo 0
import base64, email.utils, hashlib, hmac, sys, urllib.error, urllib.request
endpoint, account, key, container = sys.argv[1:]
headers = {"x-ms-date": email.utils.formatdate(usegmt=True), "x-ms-version": "2021-08-06"}
# Verb, Content-Encoding, -Language, -Length (empty for 0), -MD5, -Type, Date, If-Modified-
# Since, If-Match, If-None-Match, If-Unmodified-Since, Range; then x-ms-* and the resource.
string_to_sign = "\n".join(
    ["PUT", "", "", "", "", "application/octet-stream"] + [""] * 6
    + [f"{k}:{v}" for k, v in sorted(headers.items())]
    + [f"/{account}/{account}/{container}\nrestype:container"])
signature = base64.b64encode(hmac.new(base64.b64decode(key), string_to_sign.encode(),
                                      hashlib.sha256).digest()).decode()
headers["Authorization"] = f"SharedKey {account}:{signature}"
headers["Content-Type"] = "application/octet-stream"
req = urllib.request.Request(f"{endpoint}/{account}/{container}?restype=container",
                             method="PUT", headers=headers, data=b"")
try:
    print(urllib.request.urlopen(req, timeout=5).status)
except urllib.error.HTTPError as e:
    print(e.code)
PY
}

# Waits until Azurite says it listens ("successfully listens on" in 3.35), then makes the container. Fails if Azurite exits
# or 60 s pass first.
wait_ready() {
  local deadline=$((SECONDS + 60)) code
  while ((SECONDS < deadline)) && running_pid >/dev/null; do
    if grep -q 'successfully listen' "$dir/azurite.log"; then
      code="$(create_container)"
      [[ "$code" == 201 || "$code" == 409 ]] && return 0
      [[ "$code" == 0 ]] || { echo "creating the container lake: HTTP $code" >&2; return 1; }
    fi
    sleep 0.2
  done
  return 1
}

case "$cmd" in
  start)
    port="${3:?port required}"
    [[ "$port" =~ ^[0-9]+$ ]] || { echo "bad port $port" >&2; exit 2; }
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    # A fresh server each time: whatever an earlier start left here goes.
    stop_server
    rm -rf "$dir/data" "$dir/azurite.pid" "$dir/azurite.log"
    install_azurite || { echo "could not install azurite@$AZURITE_VERSION" >&2; exit 1; }
    launch
    wait_ready && { echo "http://127.0.0.1:$port/$ACCOUNT"; exit 0; }
    stop_server
    echo "Azurite did not come up on 127.0.0.1:$port; last lines of $dir/azurite.log:" >&2
    tail -n 40 "$dir/azurite.log" >&2 || true
    exit 1
    ;;
  stop)
    [[ -d "$dir" ]] || exit 0
    dir="$(cd "$dir" && pwd)"
    stop_server
    rm -rf "$dir"
    ;;
  *)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
