#!/usr/bin/env python3
"""What authentication costs: loadTable p50 (1 connection) and requests/s at 50
connections with `--auth internal` (a bearer token on every request) against
`--auth none`, alternating on fresh servers, median of several runs; and the token
endpoint's requests/s (client credentials, 50 connections).

    python3 bench/auth.py [--runs 3] [--seconds 8]

Needs target/release/floe and wrk, like bench/embedded.py (whose helpers it uses).
"""
import argparse
import json
import statistics
import urllib.parse
import urllib.request

from embedded import SCHEMA, start_floe, wrk

CLIENT_ID, SECRET = "bench-root", "bench-root-secret-0123456789"


def call(method, url, body=None, token=None):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        raw = r.read()
        return json.loads(raw) if raw else None


def get_token(base):
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": CLIENT_ID,
                                   "client_secret": SECRET, "scope": "catalog"}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{base}/v1/oauth/tokens", data=form)) as r:
        return json.load(r)["access_token"]


def measure(auth, seconds):
    server = start_floe(auth=auth, env={"FLOE_BOOTSTRAP_CREDENTIALS": f"{CLIENT_ID},{SECRET}"})
    try:
        token = get_token(server.base) if auth == "internal" else None
        headers = [f"Authorization: Bearer {token}"] if token else []
        api = f"{server.base}/v1/default"
        call("POST", f"{api}/namespaces", {"namespace": ["bench"]}, token)
        call("POST", f"{api}/namespaces/bench/tables", {"name": "t", "schema": SCHEMA}, token)
        url = f"{api}/namespaces/bench/tables/t"
        wrk(url, 50, 2, headers=headers)  # warm-up
        result = {"load-1": wrk(url, 1, seconds, headers=headers),
                  "load-50": wrk(url, 50, seconds, headers=headers)}
        if token:
            result["token-50"] = wrk(f"{server.base}/v1/oauth/tokens", 50, seconds, "auth-token.lua",
                                     {"FLOE_BENCH_CLIENT_ID": CLIENT_ID, "FLOE_BENCH_CLIENT_SECRET": SECRET})
        return result
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=8)
    args = ap.parse_args()
    runs = {"none": [], "internal": []}
    for n in range(args.runs):
        for auth in ("none", "internal"):
            r = measure(auth, args.seconds)
            runs[auth].append(r)
            print(f"run {n + 1} --auth {auth}: load-1 p50 {r['load-1']['p50']:.3f} ms, "
                  f"load-50 {r['load-50']['rps']:.0f} req/s"
                  + (f", token-50 {r['token-50']['rps']:.0f} req/s" if "token-50" in r else ""), flush=True)
    med = lambda auth, w, k: statistics.median(r[w][k] for r in runs[auth])
    print("\n| --auth | loadTable p50, 1 conn (ms) | loadTable req/s, 50 conn | token endpoint req/s, 50 conn |")
    print("|---|---|---|---|")
    for auth in ("none", "internal"):
        token = f"{med(auth, 'token-50', 'rps'):,.0f}" if auth == "internal" else "-"
        print(f"| {auth} | {med(auth, 'load-1', 'p50'):.3f} | {med(auth, 'load-50', 'rps'):,.0f} | {token} |")
    print(f"\ninternal / none (load-50 req/s) = {med('internal', 'load-50', 'rps') / med('none', 'load-50', 'rps'):.3f}")
    print(f"internal / none (load-1 p50)     = {med('internal', 'load-1', 'p50') / med('none', 'load-1', 'p50'):.3f}")


if __name__ == "__main__":
    main()
