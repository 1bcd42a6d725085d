#!/usr/bin/env python3
"""Floe on S3 (SeaweedFS with STS, from scripts/s3-server.sh), against Floe on its local
file system in the same run: loadTable with and without vended credentials (the
credential cache hit: the first load's STS call is made before measuring), createTable
and commit latency (each writes a new metadata file: a conditional PUT on S3, an fsynced
file locally), and remote-signing requests/s. Median of several runs, each on fresh
servers.

    python3 bench/storage.py [--runs 3] [--seconds 5]

Needs target/release/floe and wrk, like bench/embedded.py (whose helpers it uses).
Workloads:
  load-1, load-50           GET loadTable (no delegation header)         1 / 50 connections
  vended-1, vended-50       GET loadTable, X-Iceberg-Access-Delegation: vended-credentials
  create-1                  POST createTable, 1 connection
  commit-1                  POST set-properties commit, 1 connection
  sign-50                   POST .../sign (a GET of a metadata file), 50 connections (S3 only)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from embedded import SCHEMA, free_port, http, start_floe, wrk

ROOT = Path(__file__).resolve().parent.parent
VENDED = "X-Iceberg-Access-Delegation: vended-credentials"


def start_s3():
    work = tempfile.mkdtemp(prefix="floe-bench-s3-")
    out = subprocess.run(["bash", str(ROOT / "scripts/s3-server.sh"), "start", work, str(free_port())],
                         capture_output=True, text=True, check=True)
    return work, out.stdout.strip().splitlines()[-1]


def run(server, seconds, run_no, s3):
    http("POST", f"{server.api}/namespaces", {"namespace": ["bench"]})
    for name in ("load_me", "commit_me"):
        http("POST", f"{server.api}/namespaces/bench/tables", {"name": name, "schema": SCHEMA})
    table = f"{server.api}/namespaces/bench/tables/load_me"
    metadata_location = http("GET", table)["metadata-location"]
    # Warm the credential cache: the measured loads are cache hits.
    wrk(table, 1, 1, headers=(VENDED,))
    out = {
        "load-1": wrk(table, 1, seconds),
        "load-50": wrk(table, 50, seconds),
        "vended-1": wrk(table, 1, seconds, headers=(VENDED,)),
        "vended-50": wrk(table, 50, seconds, headers=(VENDED,)),
        "create-1": wrk(f"{server.api}/namespaces/bench/tables", 1, seconds, "wrk-create-table.lua",
                        {"FLOE_BENCH_PREFIX": f"r{run_no}"}),
        "commit-1": wrk(f"{server.api}/namespaces/bench/tables/commit_me", 1, seconds, "wrk-commit.lua"),
    }
    if s3:
        key = metadata_location.split("/", 3)[3]
        body = json.dumps({"region": "us-east-1", "uri": f"{s3}/lake/{key}", "method": "GET",
                           "headers": {"x-amz-content-sha256": ["UNSIGNED-PAYLOAD"]}})
        out["sign-50"] = wrk(f"{table}/sign", 50, seconds, "wrk-sign.lua", {"FLOE_BENCH_SIGN_BODY": body})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    args = ap.parse_args()
    s3_dir, endpoint = start_s3()
    results = {"file": [], "s3": []}
    try:
        for run_no in range(args.runs):
            for kind in ("file", "s3"):
                extra, env = [], {}
                if kind == "s3":
                    storage = {"storageType": "S3", "endpoint": endpoint, "pathStyleAccess": True,
                               "region": "us-east-1", "roleArn": "arn:aws:iam::000000000000:role/FloeVended"}
                    extra = ["--warehouse", f"s3://lake/bench-{os.getpid()}-{run_no}",
                             "--storage-config", json.dumps(storage)]
                    env = {"AWS_ACCESS_KEY_ID": "floe-admin", "AWS_SECRET_ACCESS_KEY": "floe-admin-secret"}
                server = start_floe(env=env, extra_args=extra)
                try:
                    results[kind].append(run(server, args.seconds, run_no, endpoint if kind == "s3" else None))
                finally:
                    server.stop()
                print(f"run {run_no + 1}/{args.runs} {kind}: done", file=sys.stderr)
    finally:
        subprocess.run(["bash", str(ROOT / "scripts/s3-server.sh"), "stop", s3_dir])
    rows = [("load-1", "p50"), ("load-50", "rps"), ("vended-1", "p50"), ("vended-50", "rps"),
            ("create-1", "p50"), ("commit-1", "p50"), ("sign-50", "rps"), ("sign-50", "p50")]
    print("| workload | figure | file | s3 | s3 vs file |")
    print("|---|---|---|---|---|")
    for workload, key in rows:
        med = {k: statistics.median(r[workload][key] for r in v) if v and workload in v[0] else None
               for k, v in results.items()}
        fmt = (lambda v: "–" if v is None else f"{v:,.0f}") if key == "rps" else \
              (lambda v: "–" if v is None else f"{v:,.3f}")
        ratio = ""
        if med["file"] and med["s3"]:
            r = med["s3"] / med["file"] if key == "rps" else med["file"] / med["s3"]
            ratio = f"{r:.2f}×"
        print(f"| {workload} | {key if key == 'rps' else key + ' (ms)'} | {fmt(med['file'])} | {fmt(med['s3'])} | {ratio} |")
    json.dump(results, open(ROOT / ".cache/bench-storage.json", "w"))


if __name__ == "__main__":
    main()
