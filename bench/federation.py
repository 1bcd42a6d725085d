#!/usr/bin/env python3
"""What a federated catalog adds to a request: loadTable of one table read from a Floe
server directly (the remote, `--auth internal`, a bearer token on every request) and
through another Floe server whose catalog `fed` is served from that remote (the
forwarding server, `--auth none`: its own checks stay out of the figure, so what is
left is the forwarding itself: its privilege check on the path, a cached OAuth token,
one more HTTP hop, the answer read whole and scrubbed of storage credentials). Both
servers run with `--log warn`; wrk at 1 and at 50 connections, the two paths
alternating on the same pair of servers, medians of the runs.

    python3 bench/federation.py [--runs 3] [--seconds 5]

All processes share this machine's cores: at 50 connections a forwarded load costs the
machine two servers' work, so its requests/s measure both servers' CPU per load, not
the hop's latency alone (the 1-connection p50 says that).

FLOE_BIN=path/to/another/floe runs that build as both servers. Needs
target/release/floe and wrk, like bench/embedded.py (whose helpers it uses).
"""
import argparse
import statistics

from auth import CLIENT_ID, SECRET, call, get_token
from embedded import SCHEMA, start_floe, wrk


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    args = parser.parse_args()
    remote = start_floe(auth="internal", env={"FLOE_BOOTSTRAP_CREDENTIALS": f"{CLIENT_ID},{SECRET}"})
    local = None
    try:
        local = start_floe()
        token = get_token(remote.base)
        api = f"{remote.base}/v1/default"
        call("POST", f"{api}/namespaces", {"namespace": ["bench"]}, token)
        call("POST", f"{api}/namespaces/bench/tables", {"name": "t", "schema": SCHEMA}, token)
        call("POST", f"{local.base}/api/management/v1/catalogs", {"catalog": {
            "name": "fed", "type": "EXTERNAL",
            "properties": {"default-base-location": f"file://{local.data_dir}/fed"},
            "connectionConfigInfo": {
                "connectionType": "ICEBERG_REST", "uri": remote.base, "remoteCatalogName": "default",
                "authenticationParameters": {
                    "authenticationType": "OAUTH", "clientId": CLIENT_ID, "clientSecret": SECRET,
                    "scopes": ["PRINCIPAL_ROLE:ALL"]}}}})
        paths = {
            "direct": (f"{api}/namespaces/bench/tables/t", [f"Authorization: Bearer {token}"]),
            "federated": (f"{local.base}/v1/fed/namespaces/bench/tables/t", []),
        }
        results = {(path, c): [] for path in paths for c in (1, 50)}
        for url, headers in paths.values():
            wrk(url, 50, 2, headers=headers)  # warm-up (and the forwarder's token)
        for run in range(args.runs):
            # Alternate which path goes first, so neither always runs on a warmer machine.
            order = list(paths) if run % 2 == 0 else list(reversed(paths))
            for connections in (1, 50):
                for path in order:
                    url, headers = paths[path]
                    results[(path, connections)].append(wrk(url, connections, args.seconds, headers=headers))
            print(f"run {run + 1}: " + ", ".join(
                f"{p} x{c} {results[(p, c)][-1]['rps']:,.0f} req/s" for p, c in results), flush=True)
    finally:
        if local:
            local.stop()
        remote.stop()
    med = lambda path, c, key: statistics.median(r[key] for r in results[(path, c)])  # noqa: E731
    print("\n| connections | path | requests/s | p50 (ms) | p99 (ms) |")
    print("|---|---|---|---|---|")
    for c in (1, 50):
        for path in paths:
            print(f"| {c} | {path} | {med(path, c, 'rps'):,.0f} | {med(path, c, 'p50'):.3f} | {med(path, c, 'p99'):.3f} |")
    for c in (1, 50):
        print(f"\n{c} connection(s): federated / direct requests/s "
              f"{med('federated', c, 'rps') / med('direct', c, 'rps'):.2f}, p50 "
              f"+{med('federated', c, 'p50') - med('direct', c, 'p50'):.3f} ms")


if __name__ == "__main__":
    main()
