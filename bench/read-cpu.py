#!/usr/bin/env python3
"""Server CPU per loadTable request, for an A/B of builds: each binary in turn serves
wrk (50 connections, 6 s after a 2 s warm-up) loading one table with default settings
(`--auth internal`, a bearer token per request, `--log info` to a file), and its CPU
time (utime + stime from /proc) is divided by the requests it answered. Throughput on a
shared 2-core machine moves by ±20% between runs; CPU per request moves far less, so it
shows a change of a few percent that req/s hides.

    python3 bench/read-cpu.py OLD_FLOE NEW_FLOE [--rounds 4]

Needs wrk, like bench/read-path.py (whose helpers it shares).
"""
import argparse
import os
import statistics
import tempfile

from auth import CLIENT_ID, SECRET, call, get_token
from embedded import SCHEMA, start_floe, wrk


def cpu_ticks(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def run(binary, seconds, log_path):
    os.environ["FLOE_BIN"] = binary
    with open(log_path, "ab") as log:
        server = start_floe(auth="internal", log="info", log_file=log,
                            env={"FLOE_BOOTSTRAP_CREDENTIALS": f"{CLIENT_ID},{SECRET}"})
    try:
        token = get_token(server.base)
        api = f"{server.base}/v1/default"
        call("POST", f"{api}/namespaces", {"namespace": ["bench"]}, token)
        call("POST", f"{api}/namespaces/bench/tables", {"name": "t", "schema": SCHEMA}, token)
        url = f"{api}/namespaces/bench/tables/t"
        headers = [f"Authorization: Bearer {token}"]
        wrk(url, 50, 2, headers=headers)  # warm-up
        before = cpu_ticks(server.proc.pid)
        result = wrk(url, 50, seconds, headers=headers)
        cpu_s = (cpu_ticks(server.proc.pid) - before) / os.sysconf("SC_CLK_TCK")
        return result["rps"], cpu_s * 1e6 / (result["rps"] * seconds)
    finally:
        server.stop()  # also removes its data directory


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=6)
    args = parser.parse_args()
    results = {b: [] for b in args.binaries}
    # The request log is only there to pay its cost; it grows by about 1 GB a run.
    with tempfile.TemporaryDirectory(prefix="floe-read-cpu-") as logs:
        log_path = os.path.join(logs, "requests.log")
        for _ in range(args.rounds):
            for binary in args.binaries:  # alternating, so drift hits every build alike
                rps, us = run(binary, args.seconds, log_path)
                results[binary].append((rps, us))
                print(f"{binary}: {rps:,.0f} req/s, {us:.2f} µs CPU/request", flush=True)
                os.truncate(log_path, 0)
    print("\n| build | req/s (median) | server CPU µs/request (median) |")
    print("|---|---|---|")
    for binary, runs in results.items():
        print(f"| {binary} | {statistics.median(r[0] for r in runs):,.0f} | "
              f"{statistics.median(r[1] for r in runs):.2f} |")


if __name__ == "__main__":
    main()
