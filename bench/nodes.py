#!/usr/bin/env python3
"""Concurrent dataset creation and read/write mixes at 50 in flight, on Floe's embedded
store, on PostgreSQL with one node, and on PostgreSQL with two nodes (connections spread
over both). Prints Markdown tables; raw reports go to .cache/bench-nodes/.

    python3 bench/nodes.py [--depth 8] [--seconds 15]

Needs target/release/floe and a PostgreSQL server: it starts a throwaway cluster with
scripts/pg-cluster.sh (Debian's postgresql).
"""
import argparse
import json
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

# Server start-up helpers shared with the wrk-driven benchmark next to this file.
from embedded import free_port, wait_ready

ROOT = Path(__file__).resolve().parent.parent
FLOE = ROOT / "target/release/floe"
OUT = ROOT / ".cache/bench-nodes"


def start_nodes(count, database_url, work):
    warehouse = work / "warehouse"
    warehouse.mkdir(parents=True, exist_ok=True)
    nodes = []
    for i in range(count):
        port = free_port()
        args = [str(FLOE), "serve", "--bind", f"127.0.0.1:{port}", "--data-dir", str(work / f"node{i}"),
                "--warehouse", f"file://{warehouse}", "--log", "warn", "--auth", "none"]
        if database_url:
            args += ["--database-url", database_url, "--db-pool-size", "20"]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(f"http://127.0.0.1:{port}/healthz", proc)
        nodes.append((f"http://127.0.0.1:{port}", proc))
    return nodes


def bench(nodes, name, *args):
    cmd = [str(FLOE), "bench", "--url", nodes[0][0], "--quiet", "--out", str(OUT), "--name", name]
    for url, _ in nodes[1:]:
        cmd += ["--node", url]
    subprocess.run(cmd + list(args), check=True, stdout=subprocess.DEVNULL)
    return json.load(open(OUT / f"{name}.json"))


def summary(report, label):
    rows = [r for r in report["rows"] if not r.get("group")]
    total = sum(r["count"] for r in rows)
    ok = sum(r["ok"] for r in rows)
    seconds = max(p["seconds"] for p in report["phases"])
    retries = sum(r.get("retries", 0) for r in rows)
    lines = [f"| {label} | {r['request']} | {r['count']} | {r['ko']} | {r['throughput_rps']:,.0f} | "
             f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r.get('retries', 0)} |" for r in rows]
    return lines, total, ok, retries, seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--seconds", type=int, default=15)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    tree = ["--namespace-width", "2", "--namespace-depth", str(args.depth),
            "--tables-per-namespace", "2", "--views-per-namespace", "2"]
    pg_dir = Path(tempfile.mkdtemp(prefix="floe-nodes-pg-"))
    pg_url = subprocess.run(["bash", str(ROOT / "scripts/pg-cluster.sh"), "start", str(pg_dir), str(free_port())],
                            check=True, capture_output=True, text=True).stdout.strip()
    configs = [("embedded", 1, False), ("PostgreSQL, 1 node", 1, True), ("PostgreSQL, 2 nodes", 2, True)]
    tables = []
    try:
        for n, (label, count, pg) in enumerate(configs):
            work = Path(tempfile.mkdtemp(prefix="floe-nodes-"))
            database_url = None
            if pg:
                db = f"bench_nodes_{n}"
                subprocess.run(["psql", "-q", pg_url, "-c", f"CREATE DATABASE {db}"], check=True)
                database_url = pg_url.rsplit("/", 1)[0] + "/" + db
            nodes = start_nodes(count, database_url, work)
            try:
                stem = label.split(",")[0].lower().replace(" ", "-") + f"-{count}"
                for workload, extra in [
                    # The catalog's files in the run's directory, not file:///tmp/polaris.
                    ("create", ["create-tree", *tree, "--base-location", f"file://{work}/warehouse"]),
                    ("mix-99-1", ["read-update", *tree, "--read-write-ratio", "0.99", "--users", "50",
                                  "--duration", f"{args.seconds}s", "--warmup", "2s"]),
                    ("mix-50-50", ["read-update", *tree, "--read-write-ratio", "0.5", "--users", "50",
                                   "--duration", f"{args.seconds}s", "--warmup", "2s"]),
                ]:
                    report = bench(nodes, f"{stem}-{workload}", *extra)
                    tables.append((workload, label, summary(report, label)))
            finally:
                for _, proc in nodes:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(timeout=30)
                shutil.rmtree(work, ignore_errors=True)
    finally:
        subprocess.run(["bash", str(ROOT / "scripts/pg-cluster.sh"), "stop", str(pg_dir)], capture_output=True)
    for workload in ("create", "mix-99-1", "mix-50-50"):
        print(f"\n#### {workload}\n")
        print("| store | request | count | KO | req/s | p50 (ms) | p99 (ms) | retries |")
        print("|---|---|---|---|---|---|---|---|")
        for w, label, (lines, total, ok, retries, seconds) in tables:
            if w == workload:
                print("\n".join(lines))
        for w, label, (lines, total, ok, retries, seconds) in tables:
            if w == workload:
                print(f"\n{label}: {ok}/{total} OK, {total / seconds:,.0f} requests/s overall, {retries} client retries")


if __name__ == "__main__":
    main()
