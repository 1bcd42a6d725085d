"""`floe serve --worker-nice N` on the embedded store runs its request threads N steps below
the commit thread that every write waits for (src/runtime.rs); by default (0), and always
on PostgreSQL, every thread keeps the process's priority. Linux only (/proc)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import ApiClient, access_token, floe_bin

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc")


def nice_by_thread(pid: int) -> dict[str, set[int]]:
    """Each thread name's nice values (field 19 of /proc/PID/task/TID/stat)."""
    found: dict[str, set[int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        comm = (task / "comm").read_text().strip()
        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        found.setdefault(comm, set()).add(int(fields[16]))
    return found


def some_writes(server) -> None:
    """Writes and reads, so that the runtime has started whatever threads it uses."""
    api = ApiClient(server.url, access_token(server.url))
    for i in range(5):
        r = api.call("POST", "/v1/default/namespaces", {"namespace": [f"prio_{i}"]})
        assert r.status_code == 200, r.text
        assert api.call("GET", f"/v1/default/namespaces/prio_{i}").status_code == 200


def test_request_threads_run_below_the_commit_thread(floe_server_factory):
    server = floe_server_factory(["--worker-nice", "10"])
    some_writes(server)
    threads = nice_by_thread(server.proc.pid)
    base = threads["floe"]
    assert len(base) == 1, threads
    (base_nice,) = base
    if server.database_url:
        # PostgreSQL: no commit thread in this process, nothing lowered.
        assert "floe-sqlite-com" not in threads, threads
        assert threads["tokio-rt-worker"] == {base_nice}, threads
    else:
        assert threads["floe-sqlite-com"] == {base_nice}, threads
        assert threads["tokio-rt-worker"] == {min(base_nice + 10, 19)}, threads


def test_by_default_every_thread_keeps_one_priority(floe_server_factory):
    server = floe_server_factory()
    some_writes(server)
    threads = nice_by_thread(server.proc.pid)
    assert set().union(*threads.values()) == threads["floe"], threads


@pytest.mark.parametrize("flag,value", [
    ("--worker-nice", "20"), ("--worker-nice", "-1"),
    ("--commit-gather-us", "10001"), ("--commit-gather-us", "-5"),
])
def test_out_of_range_settings_stop_the_start(tmp_path, flag, value):
    out = subprocess.run([str(floe_bin()), "serve", "--data-dir", str(tmp_path / "data"),
                          f"{flag}={value}"],
                         capture_output=True, text=True, timeout=30,
                         env={**os.environ, "NO_COLOR": "1"})
    assert out.returncode == 2, (flag, value, out.returncode, out.stderr)
    assert flag in out.stderr, out.stderr
    assert not (tmp_path / "data").exists()
