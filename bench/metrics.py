#!/usr/bin/env python3
"""What Prometheus metrics cost loadTable: the same server with `--metrics true` (the
default) and `--metrics false`, alternating, each run on a fresh server; wrk on one
table at 50 connections (requests/s) and at 1 connection (p50). Median of several runs.

    python3 bench/metrics.py [--runs 5] [--seconds 5]

Needs target/release/floe and wrk, like bench/embedded.py (whose helpers it uses).
"""
import argparse
import statistics

from embedded import SCHEMA, http, start_floe, wrk


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5)
    args = ap.parse_args()
    results = {"true": [], "false": []}
    for _ in range(args.runs):
        for metrics in ("true", "false"):
            server = start_floe(extra_args=["--metrics", metrics])
            try:
                http("POST", f"{server.api}/namespaces", {"namespace": ["bench"]})
                http("POST", f"{server.api}/namespaces/bench/tables", {"name": "t", "schema": SCHEMA})
                table = f"{server.api}/namespaces/bench/tables/t"
                wrk(table, 50, 1)  # warm-up
                results[metrics].append({"rps": wrk(table, 50, args.seconds)["rps"],
                                         "p50": wrk(table, 1, args.seconds)["p50"]})
            finally:
                server.stop()
    med = {k: {f: statistics.median(r[f] for r in v) for f in ("rps", "p50")} for k, v in results.items()}
    print("| loadTable | metrics on | metrics off | on vs off |")
    print("|---|---|---|---|")
    print(f"| 50 connections, req/s | {med['true']['rps']:,.0f} | {med['false']['rps']:,.0f} | "
          f"{med['true']['rps'] / med['false']['rps']:.3f}× |")
    print(f"| 1 connection, p50 (ms) | {med['true']['p50']:.3f} | {med['false']['p50']:.3f} | "
          f"{med['true']['p50'] / med['false']['p50']:.3f}× |")
    for k, v in results.items():
        print(f"metrics={k}: " + ", ".join(f"{r['rps']:,.0f} req/s" for r in v))


if __name__ == "__main__":
    main()
