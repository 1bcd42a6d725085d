#!/usr/bin/env python3
"""Scale: loadTable and list-page latency as one catalog grows from 10^3 to 10^6 tables,
with the server's memory and database size at each scale (issue #12, "Scale").

    python3 bench/scale.py [--scales 1000,10000,100000,1000000] [--seconds 20]
                           [--users 50] [--tables-per-namespace 1000] [--runs 1]
                           [--database-url postgres://SUPERUSER@HOST:PORT/DB]

Each run starts a fresh `floe serve` on the embedded store (or, with --database-url, on a
fresh PostgreSQL database created there for the run and dropped after it) with its defaults (token
authentication on, metadata cache 64 MiB, request log at `warn`) and one
`floe bench ycsb --preset read-only,scan --scale ...` against it: the load phase grows the
catalog to each scale in turn (createTable, namespaces of --tables-per-namespace tables),
then at that scale `read-only` loads tables for --seconds (Zipfian keys over all of them)
and `scan` lists one namespace page by page. On each progress line of a scale's read
phases this script reads the server's RSS and peak RSS (/proc) and the database's size;
the last reading stands for the scale (on PostgreSQL the database's size is
pg_database_size, and RSS is Floe's alone, not PostgreSQL's). Prints one Markdown table per run, then the medians when --runs > 1.

Needs target/release/floe (cargo build --release) or FLOE_BIN.
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOE = Path(os.environ.get("FLOE_BIN", ROOT / "target/release/floe"))
CLIENT_ID, CLIENT_SECRET = "bench", "bench-secret"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def memory_mib(pid):
    """(RSS, peak RSS) of a process, in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def database_mib(data_dir, database_url=None):
    if database_url:
        size = psql(database_url, "SELECT pg_database_size(current_database())")
        return int(size) / 2**20
    return sum(p.stat().st_size for p in Path(data_dir).glob("catalog.db*")) / 2**20


def psql(url, sql):
    return subprocess.run(["psql", "-qAt", url, "-c", sql], check=True, text=True,
                          capture_output=True).stdout.strip()


def fresh_database(admin_url):
    """A new database next to admin_url's, for one run; returns its URL."""
    name = f"floe_scale_{os.getpid()}_{int(time.time())}"
    psql(admin_url, f"CREATE DATABASE {name}")
    return admin_url.rsplit("/", 1)[0] + "/" + name


def run_once(args, work):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    data = Path(work) / "data"
    database = fresh_database(args.database_url) if args.database_url else None
    server = subprocess.Popen(
        [str(FLOE), "serve", "--data-dir", str(data), "--bind", f"127.0.0.1:{port}",
         "--bootstrap-credentials", f"{CLIENT_ID},{CLIENT_SECRET}", "--log", "warn"]
        + (["--database-url", database] if database else []),
        stdout=subprocess.DEVNULL, stderr=open(Path(work) / "floe.log", "w"))
    try:
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/readyz", timeout=2)
                break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    sys.exit(f"floe did not start; see {work}/floe.log")
                time.sleep(0.1)
        scales = args.scales.split(",")
        bench = subprocess.Popen(
            [str(FLOE), "bench", "ycsb", "--url", url, "--client-id", CLIENT_ID,
             "--client-secret", CLIENT_SECRET, "--preset", "read-only,scan",
             "--scale", args.scales, "--tables-per-namespace", str(args.tables_per_namespace),
             "--users", str(args.users), "--duration", f"{args.seconds}s",
             "--out", str(work), "--name", "scale"],
            # Progress lines go to stderr: both streams are read here.
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        memory = {}
        started = time.time()
        for line in bench.stdout:
            sys.stderr.write(line)
            # The bench prints its summaries only at the end, so memory is sampled on each
            # progress line of a scale's read phases: the last sample (10-20 s into its
            # scan phase) stands for the scale.
            m = re.match(r"\[(?:read-only|scan) at (\d+)\]", line)
            if m:
                memory[m.group(1)] = (*memory_mib(server.pid), database_mib(data, database))
        if bench.wait() != 0:
            sys.exit(f"floe bench failed (exit {bench.returncode})")
        report = json.loads((Path(work) / "scale.json").read_text())
    finally:
        server.terminate()
        server.wait(timeout=30)
        if database:
            psql(args.database_url, f"DROP DATABASE IF EXISTS {database.rsplit('/', 1)[1]}")
    rows = {}
    for scale in scales:
        by = {(r["phase"], r["request"]): r for r in report["rows"]}
        load = by.get((f"load to {scale}", "Create Table"))
        read = by[(f"run read-only at {scale}", "read (load table)")]
        scan = by[(f"run scan at {scale}", "scan page (list tables)")]
        errors = sum(r["ko"] for r in report["rows"] if r["phase"].endswith(f" {scale}"))
        rss, hwm, db = memory.get(scale, (float("nan"),) * 3)
        rows[scale] = {
            "create/s": load["throughput_rps"] if load else float("nan"),
            "load req/s": read["throughput_rps"], "load p50": read["p50_ms"], "load p99": read["p99_ms"],
            "list req/s": scan["throughput_rps"], "list p50": scan["p50_ms"], "list p99": scan["p99_ms"],
            "RSS MiB": rss, "peak RSS MiB": hwm, "DB MiB": db, "errors": errors,
        }
    return rows, time.time() - started


COLUMNS = ["create/s", "load req/s", "load p50", "load p99", "list req/s", "list p50", "list p99",
           "RSS MiB", "peak RSS MiB", "DB MiB", "errors"]


def table(rows, title):
    first = next(iter(rows.values()))
    print(f"\n{title}\n")
    print("| tables | " + " | ".join(COLUMNS) + " | load p99 vs first | list p99 vs first |")
    print("|" + "---|" * (len(COLUMNS) + 3))
    for scale, r in rows.items():
        cells = [f"{r[c]:.2f}" if c.endswith(("p50", "p99")) else f"{r[c]:,.0f}" for c in COLUMNS]
        print(f"| {int(scale):,} | " + " | ".join(cells)
              + f" | {r['load p99'] / first['load p99']:.2f}× | {r['list p99'] / first['list p99']:.2f}× |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", default="1000,10000,100000,1000000")
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--tables-per-namespace", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--database-url", help="a PostgreSQL superuser URL: run on PostgreSQL")
    args = parser.parse_args()
    print(f"floe: {FLOE}; {os.cpu_count()} CPUs; {args.users} users, {args.seconds} s per phase, "
          f"{args.tables_per_namespace} tables per namespace; "
          + ("PostgreSQL" if args.database_url else "embedded store"))
    runs = []
    for n in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="floe-scale.") as work:
            rows, took = run_once(args, work)
            runs.append(rows)
            # Printed before the data directory is removed: at 10^6 tables that takes minutes.
            table(rows, f"Run {n + 1} ({took / 60:.1f} min)")
            sys.stdout.flush()
    if args.runs > 1:
        medians = {s: {c: statistics.median(run[s][c] for run in runs) for c in COLUMNS} for s in runs[0]}
        table(medians, f"Median of {args.runs} runs")


if __name__ == "__main__":
    main()
