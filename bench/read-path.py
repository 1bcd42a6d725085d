#!/usr/bin/env python3
"""How close loadTable comes to the machine's limit: wrk with 50 connections against
`floe serve` with its default settings (`--auth internal`, a bearer token on every
request, `--log info` with the request log going to a file) loading one table, and
against `floe bench static-server` serving that same response body from the same
runtime and HTTP stack with no catalog work at all. The two alternate on fresh servers;
figures are medians of the runs.

    python3 bench/read-path.py [--runs 3] [--seconds 5] [--floe-args "--metadata-cache-mib 0"]

FLOE_BIN=path/to/another/floe measures that build's `floe serve` instead (an A/B of two
builds); the static server is always this checkout's.

Needs target/release/floe and wrk, like bench/embedded.py (whose helpers it uses).
"""
import argparse
import os
import shlex
import statistics
import subprocess
import tempfile
import urllib.request

from auth import CLIENT_ID, SECRET, call, get_token
from embedded import ROOT, SCHEMA, free_port, start_floe, wait_ready, wrk


def floe_run(seconds, extra_args, log_path):
    with open(log_path, "ab") as log:
        server = start_floe(auth="internal", log="info", log_file=log, extra_args=extra_args,
                            env={"FLOE_BOOTSTRAP_CREDENTIALS": f"{CLIENT_ID},{SECRET}"})
    try:
        token = get_token(server.base)
        headers = [f"Authorization: Bearer {token}"]
        api = f"{server.base}/v1/default"
        call("POST", f"{api}/namespaces", {"namespace": ["bench"]}, token)
        call("POST", f"{api}/namespaces/bench/tables", {"name": "t", "schema": SCHEMA}, token)
        url = f"{api}/namespaces/bench/tables/t"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request) as r:
            body = r.read()
        wrk(url, 50, 2, headers=headers)  # warm-up
        return wrk(url, 50, seconds, headers=headers), body
    finally:
        server.stop()  # also removes its data directory


def static_run(seconds, body):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        f.write(body)
    port = free_port()
    proc = subprocess.Popen(
        [str(ROOT / "target/release/floe"), "bench", "static-server", "--bind", f"127.0.0.1:{port}",
         "--body-file", f.name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/v1/default/namespaces/bench/tables/t"
        wait_ready(url, proc)
        wrk(url, 50, 2)  # warm-up
        return wrk(url, 50, seconds)
    finally:
        proc.kill()
        proc.wait()
        os.unlink(f.name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--floe-args", default="", help="extra `floe serve` arguments")
    args = parser.parse_args()
    extra = shlex.split(args.floe_args)
    floe, static = [], []
    # The request log is only there to pay its cost; it grows by about 1 GB a run.
    with tempfile.TemporaryDirectory(prefix="floe-read-path-") as logs:
        log_path = os.path.join(logs, "requests.log")
        for run in range(args.runs):
            result, body = floe_run(args.seconds, extra, log_path)
            floe.append(result)
            static.append(static_run(args.seconds, body))
            os.truncate(log_path, 0)
            print(f"run {run + 1}: floe {floe[-1]['rps']:,.0f} req/s, static {static[-1]['rps']:,.0f} req/s",
                  flush=True)
    median = lambda runs, key: statistics.median(r[key] for r in runs)  # noqa: E731
    f_rps, s_rps = median(floe, "rps"), median(static, "rps")
    print(f"\nbody {len(body)} bytes")
    print("| server | requests/s | p50 (ms) | p99 (ms) |")
    print("|---|---|---|---|")
    print(f"| floe serve (loadTable) | {f_rps:,.0f} | {median(floe, 'p50'):.3f} | {median(floe, 'p99'):.3f} |")
    print(f"| static server (same body) | {s_rps:,.0f} | {median(static, 'p50'):.3f} | {median(static, 'p99'):.3f} |")
    print(f"\nloadTable / static: {f_rps / s_rps:.0%}")


if __name__ == "__main__":
    main()
