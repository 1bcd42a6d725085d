#!/usr/bin/env python3
"""Change events end to end (`floe bench events`) over NATS JetStream and Kafka, and what
the outbox costs a commit, in one run. Median of several runs, each on a fresh server.

    python3 bench/events.py [--runs 3] [--seconds 10] [--database-url postgres://...]

Starts NATS (scripts/nats-server.sh) and Kafka (scripts/kafka-server.sh) once; needs
target/release/floe. Rows:
  commit-1 off/on           1 committer, 1 table: commit p50 with the outbox off / on (no relay)
  commit-10x100 off/on      10 committers over 100 tables: commits/s with the outbox off / on
  nats-hot, kafka-hot       10 committers on 1 table, relayed: events/s, delivery p50/p99
  nats-100, kafka-100       10 committers over 100 tables, relayed
Events are ~1 KiB (a 512-byte property plus the envelope and the update list).
With --database-url the commit rows run on PostgreSQL too.
"""
import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from embedded import free_port, start_floe

ROOT = Path(__file__).resolve().parent.parent
FLOE = str(ROOT / "target/release/floe")


def start_broker(kind):
    work = tempfile.mkdtemp(prefix=f"floe-bench-{kind}-")
    out = subprocess.run(["bash", str(ROOT / f"scripts/{kind}-server.sh"), "start", work, str(free_port())],
                         capture_output=True, text=True, check=True)
    addr = out.stdout.strip().splitlines()[-1]
    return work, (addr if addr.startswith("nats://") else f"kafka://{addr}")


def stop_broker(kind, work):
    subprocess.run(["bash", str(ROOT / f"scripts/{kind}-server.sh"), "stop", work], capture_output=True)
    shutil.rmtree(work, ignore_errors=True)


def bench(server, sink, tables, users, seconds):
    out = subprocess.run([FLOE, "bench", "--url", server.base, "--quiet", "events", "--sink", sink,
                          "--tables", str(tables), "--users", str(users), "--duration", f"{seconds}s"],
                         capture_output=True, text=True)
    text = out.stdout + out.stderr
    if out.returncode != 0:
        raise SystemExit(f"floe bench events failed:\n{text}")
    num = r"([0-9.]+)"
    fig = {"commits/s": float(re.search(r"commits acknowledged: \d+ \(" + num, text).group(1)),
           "commit p50": float(re.search(r"commit latency ms: p50 " + num, text).group(1))}
    m = re.search(r"events delivered: \d+ of \d+ \(" + num + r" events/s\), (\d+) missing, (\d+) dup", text)
    if m:
        fig["events/s"] = float(m.group(1))
        fig["missing"] = int(m.group(2))
        d = re.search(r"delivery latency ms \(ack -> received\): p50 " + num + ", p99 " + num, text)
        fig["delivery p50"], fig["delivery p99"] = float(d.group(1)), float(d.group(2))
    return fig


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--database-url")
    args = ap.parse_args()
    brokers = {kind: start_broker(kind) for kind in ("nats", "kafka")}
    rows = {}
    stores = [("embedded", None)] + ([("postgres", args.database_url)] if args.database_url else [])
    try:
        for run_no in range(args.runs):
            cases = []
            for store, url in stores:
                for events in ("false", "true"):
                    cases.append((f"{store} commit-1 events={events}", url, ["--events", events], "none", 1, 1))
                    cases.append((f"{store} commit-10x100 events={events}", url, ["--events", events], "none", 100, 10))
            for kind, (_, sink) in brokers.items():
                cases.append((f"{kind}-hot", None, ["--events-sink", sink], sink, 1, 10))
                cases.append((f"{kind}-100", None, ["--events-sink", sink], sink, 100, 10))
            for name, url, extra, sink, tables, users in cases:
                server = start_floe(database_url=url, extra_args=extra)
                try:
                    rows.setdefault(name, []).append(bench(server, sink, tables, users, args.seconds))
                finally:
                    server.stop()
                print(f"run {run_no + 1}/{args.runs} {name}: {rows[name][-1]}", file=sys.stderr)
    finally:
        for kind, (work, _) in brokers.items():
            stop_broker(kind, work)
    keys = ["commits/s", "commit p50", "events/s", "delivery p50", "delivery p99", "missing"]
    print("| case | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for name, runs in rows.items():
        cells = []
        for k in keys:
            vals = [r[k] for r in runs if k in r]
            if not vals:
                cells.append("–")
            elif k == "missing":
                cells.append(str(sum(vals)))
            elif k in ("commits/s", "events/s"):
                cells.append(f"{statistics.median(vals):,.0f}")
            else:
                cells.append(f"{statistics.median(vals):.2f} ms")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
