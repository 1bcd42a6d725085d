"""`floe bench` against a server with authentication on: it logs in with client
credentials, and keeps working across token expiry (a 4 s token lifetime, refreshed every
2 s), with every request answered OK; a wrong secret makes it stop with an error instead
of measuring a wall of 401s.
"""

from __future__ import annotations

import json
import subprocess

TREE = ["--namespace-depth", "3", "--tables-per-namespace", "2", "--views-per-namespace", "1"]


def bench(server, out, name: str, *args: str, secret: str | None = None):
    return subprocess.run(
        [str(server.binary), "bench", "--url", server.url,
         "--client-id", server.client_id, "--client-secret", secret or server.client_secret,
         "--token-refresh", "2s", "--quiet", "--out", str(out), "--name", name, *args],
        capture_output=True, text=True, timeout=120,
    )


def test_bench_logs_in_and_refreshes_across_expiry(floe_server_factory, tmp_path):
    server = floe_server_factory(["--token-lifetime", "4", "--log", "warn"])
    # The catalog's files in the test's directory, not the default file:///tmp/polaris.
    created = bench(server, tmp_path, "create", "create-tree", *TREE, "--users", "4",
                    "--base-location", f"file://{tmp_path}/warehouse")
    assert created.returncode == 0, created.stdout + created.stderr
    run = bench(server, tmp_path, "mix", "read-update", *TREE, "--read-write-ratio", "0.9",
                "--users", "4", "--duration", "9s")
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((tmp_path / "mix.json").read_text())
    # 9 s of load with 4 s tokens: the token was fetched again, and nothing failed.
    assert int(report["meta"]["tokens fetched"]) >= 3, report["meta"]
    rows = [r for r in report["rows"] if not r["group"]]
    assert rows and all(r["ko"] == 0 for r in rows), [(r["request"], r["ko"]) for r in rows]
    assert sum(r["ok"] for r in rows) > 100


def test_bench_with_a_wrong_secret_fails_fast(floe_server_factory, tmp_path):
    server = floe_server_factory(["--log", "warn"])
    bad = bench(server, tmp_path, "bad", "create-tree", *TREE, "--users", "1",
                secret="not-the-secret")
    assert bad.returncode != 0
    assert "401" in bad.stdout + bad.stderr or "unauthorized" in (bad.stdout + bad.stderr).lower()
