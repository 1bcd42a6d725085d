#!/usr/bin/env python3
"""What the per-request log line costs: loadTable requests/s at 50 connections with
`--log info` (the default: one line per request) against `--log warn` (no request
lines), alternating the two on fresh servers, median of several runs. Log lines are
written to a file, as a log collector would read them.

    python3 bench/logging.py [--runs 5] [--seconds 10]

Needs target/release/floe and wrk, like bench/embedded.py (whose helpers it uses).
"""
import argparse
import statistics
import tempfile

from embedded import SCHEMA, http, start_floe, wrk


def measure(log, seconds):
    with tempfile.TemporaryFile() as log_file:
        server = start_floe(log=log, log_file=log_file)
        try:
            http("POST", f"{server.api}/namespaces", {"namespace": ["bench"]})
            http("POST", f"{server.api}/namespaces/bench/tables", {"name": "t", "schema": SCHEMA})
            url = f"{server.api}/namespaces/bench/tables/t"
            wrk(url, 50, 2)  # warm-up
            return wrk(url, 50, seconds)
        finally:
            server.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=10)
    args = ap.parse_args()
    results = {"info": [], "warn": []}
    for run in range(args.runs):
        for log in ("info", "warn"):
            r = measure(log, args.seconds)
            results[log].append(r)
            print(f"run {run + 1} --log {log}: {r['rps']:.0f} req/s, p50 {r['p50']:.3f} ms, p99 {r['p99']:.3f} ms", flush=True)
    med = {log: statistics.median(r["rps"] for r in rs) for log, rs in results.items()}
    print()
    print("| --log | loadTable req/s (50 conn, median) | p50 ms | p99 ms |")
    print("|---|---|---|---|")
    for log, rs in results.items():
        p50 = statistics.median(r["p50"] for r in rs)
        p99 = statistics.median(r["p99"] for r in rs)
        print(f"| {log} | {med[log]:,.0f} | {p50:.3f} | {p99:.3f} |")
    print(f"\ninfo / warn = {med['info'] / med['warn']:.3f}")


if __name__ == "__main__":
    main()
