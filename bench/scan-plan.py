#!/usr/bin/env python3
"""Server-side scan planning against PyIceberg's own planning, on one table, in one run.

    bench/scan-plan.py [--files 2000] [--appends 200] [--runs 7] [--floe BINARY]

(more than 10,000 files make the whole-table plan come in plan tasks: `--files 30000
--appends 300` measures them.)

Starts `target/release/floe serve` (embedded store, auth off) on a free loopback port
with a fresh data dir, creates a table partitioned by identity(`part`) with PyIceberg and
appends `--appends` batches of `--files / --appends` partitions each (so each append adds
one manifest and that many data files), then times, `--runs` times each, alternating:
  - `POST …/plan` over HTTP (the whole table, and a filter on one partition): the
    server reads the manifest list and every manifest and answers with every file;
  - PyIceberg's `scan().plan_files()` with `scan-planning-mode=client` (it reads the
    same manifests itself, from the same local disk) and with `=server` (the same
    request as above, plus PyIceberg's parsing of the answer);
  - an incremental plan of the last 10 appends over HTTP, and PyIceberg's own
    `incremental_append_scan(...).plan_files()` of the same range (client-side).
Prints the median and the spread of each, and the ratios to client-side planning.
Needs PyIceberg 0.12 (tests/e2e/requirements.txt).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# bench/logging.py would shadow the standard library's `logging` for what is imported below.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import pyarrow as pa  # noqa: E402
import requests  # noqa: E402
from pyiceberg.catalog import load_catalog  # noqa: E402
from pyiceberg.expressions import EqualTo  # noqa: E402
from pyiceberg.partitioning import PartitionField, PartitionSpec  # noqa: E402
from pyiceberg.schema import Schema  # noqa: E402
from pyiceberg.transforms import IdentityTransform  # noqa: E402
from pyiceberg.types import LongType, NestedField  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--appends", type=int, default=200)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--floe", default=str(ROOT / "target/release/floe"),
                    help="the server binary (default: target/release/floe)")
    args = ap.parse_args()
    per_append = max(1, args.files // args.appends)

    data = Path(tempfile.mkdtemp(prefix="floe-scan-plan-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [args.floe, "serve", "--bind", f"127.0.0.1:{port}",
         "--data-dir", str(data), "--auth", "none", "--log", "warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                if requests.get(url + "/healthz", timeout=1).ok:
                    break
            except requests.ConnectionError:
                time.sleep(0.1)
        props = dict(type="rest", uri=url, warehouse="default")
        client = load_catalog("client", **props, **{"scan-planning-mode": "client"})
        server_side = load_catalog("server", **props, **{"scan-planning-mode": "server"})
        client.create_namespace("bench")
        schema = Schema(NestedField(1, "id", LongType(), required=False),
                        NestedField(2, "part", LongType(), required=False))
        spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "part"))
        table = client.create_table(("bench", "t"), schema=schema, partition_spec=spec)
        arrow = pa.schema([pa.field("id", pa.int64()), pa.field("part", pa.int64())])
        t0 = time.perf_counter()
        for a in range(args.appends):
            parts = range(a * per_append, (a + 1) * per_append)
            table.append(pa.Table.from_pylist([{"id": p, "part": p} for p in parts], schema=arrow))
        print(f"created {args.appends * per_append} files in {args.appends} appends "
              f"in {time.perf_counter() - t0:.0f} s")

        plan_url = f"{url}/v1/default/namespaces/bench/tables/t/plan"
        one = {"filter": {"type": "eq", "term": "part", "value": 7}}
        session = requests.Session()

        def http(body):
            r = session.post(plan_url, json=body, timeout=600)
            r.raise_for_status()
            return r.json()

        def every_page(body):
            """The plan and every plan task it hands out, one after another: the tasks."""
            answer = http(body)
            tasks = len(answer["file-scan-tasks"])
            pending = list(answer.get("plan-tasks", []))
            while pending:
                r = session.post(plan_url.removesuffix("/plan") + "/tasks",
                                 json={"plan-task": pending.pop()}, timeout=600)
                r.raise_for_status()
                page = r.json()
                tasks += len(page["file-scan-tasks"])
                pending.extend(page.get("plan-tasks", []))
            return tasks

        assert every_page({}) == args.appends * per_append
        assert len(http(one)["file-scan-tasks"]) == 1
        local_t = client.load_table(("bench", "t"))
        remote_t = server_side.load_table(("bench", "t"))
        # The last 10 appends, as a reader following the table's appends asks for them.
        ids = [s.snapshot_id for s in local_t.snapshots()]
        recent = {"start-snapshot-id": ids[-11], "end-snapshot-id": ids[-1]}
        assert len(http(recent)["file-scan-tasks"]) == 10 * per_append
        # A transform term (Spark sends these for `system.truncate(10, part) = 70`), and
        # the column range it is rewritten to: the same 10 files.
        truncated = {"filter": {"type": "eq", "value": 70, "term": {
            "type": "transform", "transform": "truncate[10]", "term": "part"}}}
        ranged = {"filter": {"type": "and",
                             "left": {"type": "gt-eq", "term": "part", "value": 70},
                             "right": {"type": "lt", "term": "part", "value": 80}}}
        assert len(http(truncated)["file-scan-tasks"]) == 10
        assert len(http(ranged)["file-scan-tasks"]) == 10
        cases = {
            "HTTP POST /plan, whole table": lambda: http({}),
            "HTTP POST /plan and its plan tasks, whole table": lambda: every_page({}),
            "HTTP POST /plan, one partition": lambda: http(one),
            "PyIceberg client-side plan_files, whole table": lambda: list(local_t.scan().plan_files()),
            "PyIceberg client-side plan_files, one partition":
                lambda: list(local_t.scan(row_filter=EqualTo("part", 7)).plan_files()),
            "PyIceberg server-side plan_files, whole table": lambda: list(remote_t.scan().plan_files()),
            "PyIceberg server-side plan_files, one partition":
                lambda: list(remote_t.scan(row_filter=EqualTo("part", 7)).plan_files()),
            "HTTP POST /plan, truncate[10](part) = 70 (transform term)": lambda: http(truncated),
            "HTTP POST /plan, 70 <= part < 80 (the same as a column range)": lambda: http(ranged),
            "HTTP POST /plan, last 10 appends (incremental)": lambda: http(recent),
            "PyIceberg client-side incremental, last 10 appends": lambda: list(
                local_t.incremental_append_scan(from_snapshot_id_exclusive=ids[-11],
                                                to_snapshot_id_inclusive=ids[-1]).plan_files()),
        }
        times = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, fn in cases.items():
                times[name].append(timed(fn))
        print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
              f"{args.runs} runs each, alternating; ms")
        medians = {name: statistics.median(v) for name, v in times.items()}
        for name, v in times.items():
            print(f"  {name:62s} median {medians[name]:8.1f}  min {min(v):8.1f}  max {max(v):8.1f}")
        for scope in ("whole table", "one partition"):
            local = medians[f"PyIceberg client-side plan_files, {scope}"]
            remote = medians[f"PyIceberg server-side plan_files, {scope}"]
            print(f"  {scope}: PyIceberg server-side / client-side = {remote / local:.2f}")
        incremental = medians["HTTP POST /plan, last 10 appends (incremental)"]
        print(f"  last 10 appends: HTTP /plan / PyIceberg client-side incremental = "
              f"{incremental / medians['PyIceberg client-side incremental, last 10 appends']:.2f}")
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
