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

# shellcheck source=scripts/service.sh
source "$root/scripts/service.sh"

# Our Azurite is the process in DIR/azurite.pid whose command line names DIR/data (a
# recycled pid does not count); it leads a session of its own.
stop_server() {
  service_stop "$dir/azurite.pid" "$dir/data"
}

install_azurite() {
  [[ -f "$main" ]] || rm -rf "$prefix/node_modules/azurite"
  service_npm_install "$prefix" azurite "$AZURITE_VERSION"
}

# Starts Azurite in the background, leading a session (and process group) of its own.
launch() {
  rm -rf "$dir/data"
  mkdir -p "$dir/data"
  service_launch "$dir/azurite.pid" "$dir/azurite.log" \
    node "$main" --blobHost 127.0.0.1 --blobPort "$port" --location "$dir/data" \
    --skipApiVersionCheck --disableProductStyleUrl --disableTelemetry
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

# One look for wait_ready: once Azurite says it listens ("successfully listens on" in
# 3.35), makes the container; 0 when it is there, 1 while Azurite does not answer yet,
# 2 (give up) on any other answer.
ready_check() {
  local code
  grep -q 'successfully listen' "$dir/azurite.log" || return 1
  code="$(create_container)"
  [[ "$code" == 201 || "$code" == 409 ]] && return 0
  [[ "$code" == 0 ]] && return 1
  echo "creating the container lake: HTTP $code" >&2
  return 2
}

# Waits until ready_check says so. Fails if Azurite exits or 60 s pass first.
wait_ready() {
  service_wait 60 "$dir/azurite.pid" "$dir/data" ready_check
}

case "$cmd" in
  start)
    port="${3:?port required}"
    service_port_arg "$port"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    # A fresh server each time: whatever an earlier start left here goes.
    stop_server
    rm -rf "$dir/data" "$dir/azurite.pid" "$dir/azurite.log"
    install_azurite || { echo "could not install azurite@$AZURITE_VERSION" >&2; exit 1; }
    launch
    wait_ready && { echo "http://127.0.0.1:$port/$ACCOUNT"; exit 0; }
    stop_server
    service_fail "$dir/azurite.log" "Azurite did not come up on 127.0.0.1:$port"
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
