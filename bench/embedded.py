#!/usr/bin/env python3
"""Single-endpoint latency and throughput of Floe on its embedded store, with Iceberg's
reference REST server (RESTCatalogServer, JDBC catalog on SQLite) measured in the same
run as the peer. Drives both with wrk on loopback; prints a Markdown table.

    python3 bench/embedded.py [--runs 3] [--seconds 5] [--no-peer] [--database-url URL]

With --database-url (a PostgreSQL superuser URL), Floe on PostgreSQL is measured too,
on a fresh database per run.

Needs: target/release/floe (cargo build --release), wrk (apt-get install wrk), and for
the peer a JDK plus the jars tests/rck/run.sh fetches into .cache/rck-lib.
Workloads (each run, in this order, on a fresh server):
  load-1     GET loadTable, 1 connection            -> p50, p99
  load-50    GET loadTable, 50 connections          -> requests/s, p50, p99
  create-1   POST createTable (10 int columns, 10 properties), 1 connection -> p50, p99
  commit-1   POST blind set-properties commit, 1 connection                -> p50, p99
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "identifier-field-ids": [1],
    "fields": [{"id": i, "name": f"column{i}", "type": "int", "required": True} for i in range(1, 11)],
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        raw = r.read()
        return json.loads(raw) if raw else None


def wait_ready(url, proc, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except Exception:
            time.sleep(0.2)
    raise RuntimeError(f"{url} not ready after {timeout}s")


class Server:
    def __init__(self, name, base, proc, data_dir):
        self.name, self.base, self.proc, self.data_dir = name, base, proc, data_dir
        try:
            config = http("GET", f"{base}/v1/config?warehouse=default")
        except urllib.error.HTTPError:  # authentication required: Floe's default catalog
            config = {"overrides": {"prefix": "default"}}
        prefix = {**config.get("defaults", {}), **config.get("overrides", {})}.get("prefix")
        self.api = f"{base}/v1/{prefix}" if prefix else f"{base}/v1"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.data_dir, ignore_errors=True)


def start_floe(database_url=None, log="warn", log_file=None, auth="none", env=None, extra_args=()):
    """Starts `floe serve`; its log lines go to `log_file` (default: discarded). Floe
    serves with `--auth none` here unless `auth` says otherwise (then `env` should carry
    FLOE_BOOTSTRAP_CREDENTIALS)."""
    data = tempfile.mkdtemp(prefix="floe-bench-")
    port = free_port()
    store = []
    if database_url:
        name = f"floe_bench_{os.getpid()}_{int(time.time() * 1000)}"
        subprocess.run(["psql", "-q", database_url, "-c", f"CREATE DATABASE {name}"], check=True)
        store = ["--database-url", database_url.rsplit("/", 1)[0] + "/" + name]
    proc = subprocess.Popen(
        [os.environ.get("FLOE_BIN", str(ROOT / "target/release/floe")), "serve", "--bind", f"127.0.0.1:{port}", "--data-dir", data,
         "--log", log, "--auth", auth, *store, *extra_args],
        stdout=subprocess.DEVNULL, stderr=log_file or subprocess.DEVNULL,
        env=dict(os.environ, **(env or {})))
    wait_ready(f"http://127.0.0.1:{port}/healthz", proc)
    return Server("floe-pg" if database_url else "floe", f"http://127.0.0.1:{port}", proc, data)


def start_reference():
    lib = ROOT / ".cache/rck-lib"
    jars = [str(j) for j in sorted(lib.glob("*.jar"))
            if not re.match(r"junit-(jupiter|platform)", j.name)]
    if not jars or not shutil.which("java"):
        return None
    data = tempfile.mkdtemp(prefix="ref-bench-")
    port = free_port()
    env = dict(os.environ,
               CATALOG_URI=f"jdbc:sqlite:{data}/cat.db", CATALOG_WAREHOUSE=f"file://{data}/wh",
               CATALOG_REST_PORT=str(port), CATALOG_JDBC_STRICT__MODE="true")
    proc = subprocess.Popen(
        ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", ":".join(jars),
         "org.apache.iceberg.rest.RESTCatalogServer"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(f"http://127.0.0.1:{port}/v1/config", proc)
    return Server("reference", f"http://127.0.0.1:{port}", proc, data)


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def parse_wrk(out):
    def ms(text):
        m = re.match(r"([\d.]+)(us|ms|s)", text)
        return float(m.group(1)) * UNITS[m.group(2)]
    p = dict(re.findall(r"^\s+(50|99)%\s+(\S+)", out, re.M))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return {"p50": ms(p["50"]), "p99": ms(p["99"]), "rps": rps,
            "non2xx": int(non2xx.group(1)) if non2xx else 0, "socket_errors": errors.group(1) if errors else ""}


def wrk(url, connections, seconds, script=None, env=None, headers=()):
    threads = min(2, connections)
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency", url]
    for header in headers:
        cmd[1:1] = ["-H", header]
    if script:
        cmd[1:1] = ["-s", str(BENCH / script)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})), check=True).stdout
    result = parse_wrk(out)
    if result["non2xx"]:
        raise RuntimeError(f"{url}: {result['non2xx']} non-2xx responses\n{out}")
    return result


def run_workloads(server, seconds, run_no):
    http("POST", f"{server.api}/namespaces", {"namespace": ["bench"]})
    for name in ("load_me", "commit_me"):
        http("POST", f"{server.api}/namespaces/bench/tables", {"name": name, "schema": SCHEMA})
    table = f"{server.api}/namespaces/bench/tables/load_me"
    return {
        "load-1": wrk(table, 1, seconds),
        "load-50": wrk(table, 50, seconds),
        "create-1": wrk(f"{server.api}/namespaces/bench/tables", 1, seconds, "wrk-create-table.lua",
                        {"FLOE_BENCH_PREFIX": f"r{run_no}"}),
        "commit-1": wrk(f"{server.api}/namespaces/bench/tables/commit_me", 1, seconds, "wrk-commit.lua"),
    }


def median_of(runs, workload, key):
    return statistics.median(r[workload][key] for r in runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--database-url", help="also measure Floe on PostgreSQL (superuser URL)")
    args = ap.parse_args()
    results = {"floe": [], "floe-pg": [], "reference": []}
    for run_no in range(args.runs):
        starters = [("floe", start_floe)]
        if args.database_url:
            starters.append(("floe-pg", lambda: start_floe(args.database_url)))
        if not args.no_peer:
            starters.append(("reference", start_reference))
        for name, start in starters:
            server = start()
            if server is None:
                print(f"(skipping {name}: not available)", file=sys.stderr)
                continue
            try:
                results[name].append(run_workloads(server, args.seconds, run_no))
            finally:
                server.stop()
            print(f"run {run_no + 1}/{args.runs} {name}: done", file=sys.stderr)
    rows = [("load-1", "p50"), ("load-1", "p99"), ("load-50", "rps"), ("load-50", "p50"), ("load-50", "p99"),
            ("create-1", "p50"), ("create-1", "p99"), ("commit-1", "p50"), ("commit-1", "p99")]
    servers = [name for name in ("floe", "floe-pg", "reference") if results[name]]
    have_peer = "reference" in servers
    header = "| workload | figure | " + " | ".join(servers) + " |"
    if have_peer:
        header += "".join(f" {s} vs reference |" for s in servers if s != "reference")
    print(header)
    print("|---|---|" + "---|" * (len(servers) + (len(servers) - 1 if have_peer else 0)))
    for workload, key in rows:
        values = {name: median_of(results[name], workload, key) for name in servers}
        fmt = (lambda v: f"{v:,.0f}") if key == "rps" else (lambda v: f"{v:,.3f}")
        line = f"| {workload} | {key if key == 'rps' else key + ' (ms)'} | " + " | ".join(fmt(values[n]) for n in servers) + " |"
        if have_peer:
            ref = values["reference"]
            for name in servers:
                if name == "reference":
                    continue
                ratio = values[name] / ref if key == "rps" else ref / values[name]
                word = ("higher" if ratio >= 1 else "lower") if key == "rps" else ("faster" if ratio >= 1 else "slower")
                shown = ratio if ratio >= 1 else 1 / ratio
                line += f" {shown:,.1f}× {word} |"
        print(line)
    print(json.dumps(results), file=open(ROOT / ".cache/bench-embedded.json", "w"))


if __name__ == "__main__":
    main()
