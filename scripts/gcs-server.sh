#!/usr/bin/env bash
# A throwaway Google Cloud Storage emulator for the tests: fake-gcs-server, loopback
# only, plain HTTP, in memory, under a directory of its own, stopped and deleted
# afterwards.
#
#   scripts/gcs-server.sh start DIR PORT   # prints the endpoint, http://127.0.0.1:PORT
#   scripts/gcs-server.sh stop DIR         # kills it and deletes DIR; idempotent
#
# What the server has: the bucket 'lake' (empty), and no authentication at all. It
# answers both the JSON API (/storage/v1/b/lake/o, which the tests use to look at the
# bucket) and the XML API (/lake/<object>, which the Rust object_store crate, and so
# Floe, uses).
#
# A client such as object_store reaches it with a service-account file holding its test
# fields (no OAuth, another base URL), e.g. for Floe's FLOE_STORAGE_<NAME>_SERVICE_ACCOUNT_PATH:
#   {"gcs_base_url": "http://127.0.0.1:PORT", "disable_oauth": true,
#    "client_email": "", "private_key_id": "", "private_key": ""}
#
# Upstream fake-gcs-server does not implement the XML API's object upload (PUT
# /<bucket>/<object>, with x-goog-if-generation-match for conditional creates:
# fsouza/fake-gcs-server#331; the pull requests that add it, #1164 and #2092, are not
# merged). So PORT is served by a small front (DIR/gcs-front.py, Python's standard
# library only) that turns such a PUT into the JSON API's media upload
# (POST /upload/storage/v1/b/<bucket>/o?uploadType=media&name=...&ifGenerationMatch=...),
# whose preconditions fake-gcs-server does enforce, and answers it the XML way (ETag and
# x-goog-generation headers, 412 when the precondition fails). Every other request goes
# through unchanged to fake-gcs-server, which listens on a second loopback port that the
# kernel hands out at start (DIR/backend-port). The front starts fake-gcs-server as its
# child and leads a session of its own: stop signals the whole group. Nothing else
# listens, and nothing is sent anywhere (no Pub/Sub events: the FAKE_GCS_* environment
# is cleared).
#
# The binary comes from `go install github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION`
# into .cache/go-bin at the repository root, with GOPATH, GOCACHE, GOMODCACHE and Go's
# telemetry under .cache/go (so nothing lands in $HOME; the directory goes once the
# binary is built, as nothing else needs its 1 GB). It is reinstalled only when the
# version stamp next to it (.cache/go-bin/fake-gcs-server.version) differs from the pin.
# Needs python3, and go to install: fake-gcs-server 1.56 asks for go 1.26, which an older
# go fetches by itself through the module proxy (GOTOOLCHAIN=auto, the default).
set -euo pipefail

FAKE_GCS_VERSION=v1.56.1

cmd="${1:?usage: gcs-server.sh start DIR PORT | stop DIR}"
dir="${2:?directory required}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/.cache/go-bin/fake-gcs-server"
python="${PYTHON:-python3}"

# shellcheck source=scripts/service.sh
source "$root/scripts/service.sh"

# Our front is the process in DIR/gcs.pid whose command line names DIR/gcs-front.py (a
# recycled pid does not count); it leads a session of its own, and fake-gcs-server is in
# its process group: service_stop signals the group.
stop_server() {
  service_stop "$dir/gcs.pid" "$dir/gcs-front.py"
}

# go install, with everything Go keeps under .cache/go; only when the binary is missing
# or is another version.
install_fake_gcs() {
  [[ -x "$bin" && "$(cat "$bin.version" 2>/dev/null)" == "$FAKE_GCS_VERSION" ]] && return 0
  command -v go >/dev/null 2>&1 || { echo "go is needed to install fake-gcs-server" >&2; return 1; }
  echo "installing fake-gcs-server $FAKE_GCS_VERSION into $root/.cache/go-bin" >&2
  mkdir -p "$root/.cache/go" "$root/.cache/go-bin"
  rm -f "$bin.version"
  # GOENV=off: no user go.env; XDG_CONFIG_HOME: Go's telemetry counters stay here too.
  GOBIN="$root/.cache/go-bin" GOPATH="$root/.cache/go" GOMODCACHE="$root/.cache/go/pkg/mod" \
    GOCACHE="$root/.cache/go/build-cache" GOENV=off GOFLAGS=-modcacherw \
    XDG_CONFIG_HOME="$root/.cache/go/config" \
    go install "github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION" >&2 || return 1
  echo "$FAKE_GCS_VERSION" >"$bin.version"
  # The module and build caches (over 1 GB) only serve this install; the binary stays.
  rm -rf "$root/.cache/go"
}

write_front() {
  cat >"$dir/gcs-front.py" <<'PY'
"""The front of scripts/gcs-server.sh: serves the XML API's object upload (which
fake-gcs-server lacks) by way of its JSON media upload, and passes everything else on.

    python3 gcs-front.py PORT BACKEND_PORT -- fake-gcs-server ARGS...
"""
import http.client
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.parse

port, backend_port = int(sys.argv[1]), int(sys.argv[2])
child_argv = sys.argv[sys.argv.index("--") + 1:]
HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
       "trailer", "transfer-encoding", "upgrade"}
# Paths of the JSON API and fake-gcs-server's own: never a bucket.
NOT_BUCKETS = {"storage", "upload", "download", "batch", "_internal"}

local = threading.local()


def backend() -> http.client.HTTPConnection:
    conn = getattr(local, "conn", None)
    if conn is None:
        conn = local.conn = http.client.HTTPConnection("127.0.0.1", backend_port, timeout=60)
    return conn


def forward(method, target, headers, body):
    """One request to fake-gcs-server on this thread's connection (sent again on a new
    one only if a kept-alive connection turns out closed); returns (status, headers,
    body)."""
    while True:
        conn = backend()
        reused = conn.sock is not None
        try:
            conn.request(method, target, body=body, headers=headers)
            r = conn.getresponse()
            data = r.read()
            return r.status, r.getheaders(), data
        except (http.client.HTTPException, ConnectionError):
            conn.close()
            local.conn = None
            if not reused:
                raise


class Front(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "floe-gcs-front"

    def log_message(self, fmt, *args):
        sys.stderr.write("front: %s\n" % (fmt % args))

    def body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def reply(self, status, headers, data):
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in HOP and k.lower() not in ("content-length", "date", "server"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)

    def xml_error(self, status, code, message):
        data = ("<?xml version='1.0' encoding='UTF-8'?><Error><Code>%s</Code>"
                "<Message>%s</Message></Error>" % (code, message)).encode()
        self.reply(status, [("Content-Type", "application/xml")], data)

    def xml_object_put(self, bucket, name, query, body):
        if "x-goog-copy-source" in {k.lower() for k in self.headers.keys()}:
            return self.xml_error(501, "NotImplemented", "copies are not emulated")
        if "uploadId" in query or "partNumber" in query or "uploads" in query:
            return self.xml_error(501, "NotImplemented", "multipart uploads are not emulated")
        params = {"uploadType": "media", "name": name}
        for header, param in (("x-goog-if-generation-match", "ifGenerationMatch"),
                              ("x-goog-if-metageneration-match", "ifMetagenerationMatch")):
            if self.headers.get(header) is not None:
                params[param] = self.headers[header].strip()
        headers = {"Host": self.headers.get("Host", "127.0.0.1:%d" % port),
                   "Content-Type": self.headers.get("Content-Type",
                                                    "application/octet-stream"),
                   "Content-Length": str(len(body))}
        target = "/upload/storage/v1/b/%s/o?%s" % (
            urllib.parse.quote(bucket, safe=""), urllib.parse.urlencode(params))
        try:
            status, _, data = forward("POST", target, headers, body)
        except (http.client.HTTPException, OSError) as e:
            return self.xml_error(502, "BadGateway", "fake-gcs-server: %s" % e)
        if status == 412:
            return self.xml_error(412, "PreconditionFailed",
                                  "At least one of the pre-conditions you specified did not hold.")
        if status == 404:
            return self.xml_error(404, "NoSuchBucket", "The specified bucket does not exist.")
        if status != 200:
            return self.xml_error(status, "InternalError", data.decode(errors="replace")[:500])
        meta = json.loads(data)
        self.reply(200, [("ETag", '"%s"' % meta.get("etag", meta.get("md5Hash", ""))),
                         ("x-goog-generation", str(meta.get("generation", ""))),
                         ("x-goog-metageneration", str(meta.get("metageneration", "1"))),
                         ("x-goog-stored-content-length", str(meta.get("size", len(body))))],
                   b"")

    def handle_any(self):
        body = self.body()
        split = urllib.parse.urlsplit(self.path)
        parts = split.path.split("/", 2)
        query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        if (self.command == "PUT" and len(parts) == 3 and parts[1] and parts[2]
                and parts[1] not in NOT_BUCKETS and "uploadType" not in query
                and "X-Goog-Algorithm" not in query
                and "multipart/form-data" not in self.headers.get("Content-Type", "")):
            return self.xml_object_put(urllib.parse.unquote(parts[1]),
                                       urllib.parse.unquote(parts[2]), query, body)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        headers["Content-Length"] = str(len(body))
        if not body and self.command in ("GET", "HEAD", "DELETE"):
            del headers["Content-Length"]
        try:
            status, rheaders, data = forward(self.command, self.path, headers, body or None)
        except (http.client.HTTPException, OSError) as e:
            return self.xml_error(502, "BadGateway", "fake-gcs-server: %s" % e)
        if self.command == "HEAD":
            length = dict((k.lower(), v) for k, v in rheaders).get("content-length", "0")
            self.send_response(status)
            for k, v in rheaders:
                if k.lower() not in HOP and k.lower() not in ("date", "server"):
                    self.send_header(k, v)
            if not any(k.lower() == "content-length" for k, _ in rheaders):
                self.send_header("Content-Length", length)
            self.end_headers()
            return
        self.reply(status, rheaders, data)

    do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = do_HEAD = handle_any


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    # PORT first: if it is taken, nothing else starts.
    httpd = Server(("127.0.0.1", port), Front)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_GCS_")}
    child = subprocess.Popen(child_argv, env=env, stdin=subprocess.DEVNULL)

    def stop(*_):
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def watch():
        child.wait()
        sys.stderr.write("front: fake-gcs-server exited with %s\n" % child.returncode)
        stop()

    try:
        threading.Thread(target=watch, daemon=True).start()
        httpd.serve_forever()
    finally:
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
    sys.exit(0 if child.returncode in (0, -signal.SIGTERM, None) else 1)


main()
PY
}

# Starts the front (which starts fake-gcs-server, on a free loopback port other than
# PORT) in the background, leading a session (and process group) of its own.
launch() {
  local backend_port
  backend_port="$(service_free_port "$port")"
  echo "$backend_port" >"$dir/backend-port"
  rm -rf "$dir/seed"
  # -data loads a bucket per directory at start: the bucket 'lake', empty.
  mkdir -p "$dir/seed/lake"
  service_launch "$dir/gcs.pid" "$dir/gcs.log" \
    "$python" "$dir/gcs-front.py" "$port" "$backend_port" -- \
    "$bin" -scheme http -host 127.0.0.1 -port "$backend_port" \
    -public-host "127.0.0.1:$port" -external-url "http://127.0.0.1:$port" \
    -backend memory -data "$dir/seed" -log-level info \
    -event.pubsub-project-id "" -event.pubsub-topic ""
}

# One look for wait_ready: 0 once the bucket answers through the front
# (GET /storage/v1/b/lake: 200), which needs both processes up and the seed loaded.
ready_check() {
  [[ "$(service_http_status "http://127.0.0.1:$port/storage/v1/b/lake")" == 200 ]]
}

# Waits until ready_check says so. Fails if the front exits or 60 s pass.
wait_ready() {
  service_wait 60 "$dir/gcs.pid" "$dir/gcs-front.py" ready_check
}

case "$cmd" in
  start)
    port="${3:?port required}"
    service_port_arg "$port"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    # A fresh server each time: whatever an earlier start left here goes.
    stop_server
    rm -rf "$dir/seed" "$dir/gcs.pid" "$dir"/gcs.log* "$dir/backend-port"
    install_fake_gcs || { echo "could not install fake-gcs-server $FAKE_GCS_VERSION" >&2; exit 1; }
    write_front
    # Another process may take the backend port before fake-gcs-server binds it: then a
    # new one is tried (but PORT itself is the caller's).
    for attempt in 1 2 3; do
      launch
      wait_ready && { echo "http://127.0.0.1:$port"; exit 0; }
      stop_server
      if ((attempt < 3)) && grep -q 'address already in use' "$dir/gcs.log" \
        && ! grep -q 'Errno 98' "$dir/gcs.log"; then
        mv "$dir/gcs.log" "$dir/gcs.log.$attempt"
        continue
      fi
      break
    done
    service_fail "$dir/gcs.log" "fake-gcs-server did not come up on 127.0.0.1:$port"
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
