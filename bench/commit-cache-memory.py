#!/usr/bin/env python3
"""What the commit cache (`--commit-cache-mib`) costs in memory at its worst: many small
tables, one commit each, so the cache fills with models of small documents.

    python3 bench/commit-cache-memory.py BINARY MIB [TABLES]

Starts a fresh embedded `floe serve` (--auth none, --log warn, --commit-cache-mib MIB),
creates 100 namespaces and TABLES (default 60,000) two-column tables over 16 threads,
then commits one `set-properties` to each; prints the server's RSS after the creates and
after the commits, and the cache's lookup counters. Compare against MIB 0 (no cache).
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIN, MIB = sys.argv[1], sys.argv[2]
TABLES = int(sys.argv[3]) if len(sys.argv) > 3 else 60_000
NAMESPACES, THREADS = 100, 16
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [
    {"id": 1, "name": "id", "type": "long", "required": True},
    {"id": 2, "name": "data", "type": "string", "required": False}]}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(conn, method, path, body=None):
    conn.request(method, path, body=None if body is None else json.dumps(body),
                 headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    if response.status >= 300:
        raise RuntimeError(f"{method} {path}: {response.status} {data[:200]!r}")
    return data


def main():
    port = free_port()
    data_dir = tempfile.mkdtemp(prefix="floe-commit-cache-")
    server = subprocess.Popen(
        [BIN, "serve", "--bind", f"127.0.0.1:{port}", "--data-dir", f"{data_dir}/data",
         "--auth", "none", "--log", "warn", "--commit-cache-mib", MIB],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def rss_mib():
        for line in open(f"/proc/{server.pid}/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024

    try:
        for _ in range(100):
            try:
                call(http.client.HTTPConnection("127.0.0.1", port), "GET", "/readyz")
                break
            except OSError:
                time.sleep(0.1)
        conn = http.client.HTTPConnection("127.0.0.1", port)
        for n in range(NAMESPACES):
            call(conn, "POST", "/v1/default/namespaces", {"namespace": [f"n{n}"]})
        failures = []

        def work(kind, first):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port)
                for i in range(first, TABLES, THREADS):
                    tables = f"/v1/default/namespaces/n{i % NAMESPACES}/tables"
                    if kind == "create":
                        call(c, "POST", tables, {"name": f"t{i}", "schema": SCHEMA})
                    else:
                        call(c, "POST", f"{tables}/t{i}", {"requirements": [], "updates": [
                            {"action": "set-properties", "updates": {"k": str(i)}}]})
            except Exception as e:  # reported once all threads are done
                failures.append(e)

        for kind in ("create", "commit"):
            started = time.time()
            threads = [threading.Thread(target=work, args=(kind, t)) for t in range(THREADS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if failures:
                sys.exit(f"{kind}: {failures[0]}")
            print(f"{kind}: {TABLES / (time.time() - started):.0f}/s, RSS {rss_mib()} MiB")
        metrics = call(conn, "GET", "/metrics").decode()
        for line in metrics.splitlines():
            if line.startswith("floe_cache_lookups_total") and '"commit"' in line:
                print(line)
    finally:
        server.terminate()
        server.wait()
        subprocess.run(["rm", "-rf", data_dir])


if __name__ == "__main__":
    main()
