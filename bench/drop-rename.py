#!/usr/bin/env python3
"""What drops and renames cost, two builds side by side: each client loops create table,
rename it, drop it (in its own namespace), for a fixed time, on a fresh server per run
(embedded, or PostgreSQL with --database-url); old and new alternate, old first in odd
runs. Prints per run the cycles/s and the p50 of the rename and of the drop (ms), then
the medians and the new/old ratios.

    python3 bench/drop-rename.py OLD_BINARY NEW_BINARY [--runs 4] [--seconds 10]
        [--clients 8] [--database-url postgres://...]

Written for the grants-follow-objects change (2026-12-05), whose drops and renames read
the security document's version in their transaction (one more statement on
PostgreSQL). Uses bench/embedded.py's `start_floe`.
"""
import argparse
import json
import os
import statistics
import threading
import time
import urllib.request

from embedded import SCHEMA, start_floe


def call(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()


def client(api, ns, until, out):
    i = 0
    while time.monotonic() < until:
        name, moved = f"t{i}", f"m{i}"
        call("POST", f"{api}/namespaces/{ns}/tables", {"name": name, "schema": SCHEMA})
        start = time.monotonic()
        call("POST", f"{api}/tables/rename",
             {"source": {"namespace": [ns], "name": name},
              "destination": {"namespace": [ns], "name": moved}})
        renamed = time.monotonic()
        call("DELETE", f"{api}/namespaces/{ns}/tables/{moved}")
        out.append(((renamed - start) * 1e3, (time.monotonic() - renamed) * 1e3))
        i += 1


def run(binary, args):
    os.environ["FLOE_BIN"] = binary
    server = start_floe(database_url=args.database_url)
    try:
        api = f"{server.base}/v1/default"
        for c in range(args.clients):
            call("POST", f"{api}/namespaces", {"namespace": [f"c{c}"]})
        # Warm-up: one second of the same loop.
        for seconds, keep in ((1.0, False), (args.seconds, True)):
            results, threads = [], []
            until = time.monotonic() + seconds
            for c in range(args.clients):
                out = []
                results.append(out)
                threads.append(threading.Thread(target=client, args=(api, f"c{c}", until, out)))
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        cycles = [x for out in results for x in out]
        return {"cycles/s": len(cycles) / args.seconds,
                "rename p50": statistics.median(r for r, _ in cycles),
                "drop p50": statistics.median(d for _, d in cycles)}
    finally:
        server.stop()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--database-url")
    args = p.parse_args()
    found = {"old": [], "new": []}
    for i in range(args.runs):
        order = ("old", "new") if i % 2 == 0 else ("new", "old")
        for side in order:
            r = run(getattr(args, side), args)
            found[side].append(r)
            print(f"run {i + 1} {side}: " + ", ".join(f"{k} {v:.2f}" for k, v in r.items()),
                  flush=True)
    for key in found["old"][0]:
        old = statistics.median(r[key] for r in found["old"])
        new = statistics.median(r[key] for r in found["new"])
        print(f"median {key}: old {old:.2f}, new {new:.2f}, new/old {new / old:.3f}")


if __name__ == "__main__":
    main()
