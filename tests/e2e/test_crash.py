"""Crash safety: kill -9 Floe in the middle of a stream of commits, restart it
on the same data dir, and check that nothing acknowledged was lost and that
no metadata file was left half-written.

Several threads commit over plain HTTP. Two of them share one table (so the
server must serialise concurrent commits to it); the others each own a table.
Every commit is a set-properties update with a unique key; the ones answered
200 are "acknowledged" and must all be visible after the restart.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

import pytest
import requests
from conftest import free_port

ROUNDS = 3
THREADS = 4  # threads 0 and 1 share a table; 2 and 3 own one each
RUN_BEFORE_KILL = (1.0, 2.5)  # seconds of commits before the kill, random in range
MIN_ACKS_PER_ROUND = 20  # the server must make real progress between crashes
NAMESPACE = "crash"

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "payload", "type": "string", "required": False},
    ],
}


def local_path(location: str) -> Path:
    parsed = urlparse(location)
    assert parsed.scheme in ("", "file"), f"expected a local location, got {location!r}"
    return Path(unquote(parsed.path))


class Api:
    """Paths under /v1/{prefix}, the prefix taken from GET /v1/config like a real client."""

    def __init__(self, server):
        self.server = server
        r = requests.get(f"{server.url}/v1/config", params={"warehouse": "default"}, timeout=10)
        assert r.status_code == 200, r.text
        config = r.json()
        prefix = {**config.get("defaults", {}), **config.get("overrides", {})}.get("prefix")
        self.prefix = f"/{quote(prefix, safe='')}" if prefix else ""

    def url(self, path: str) -> str:
        return f"{self.server.url}/v1{self.prefix}{path}"

    def table_url(self, ns: str, table: str) -> str:
        return self.url(f"/namespaces/{quote(ns)}/tables/{quote(table)}")


@dataclass
class Worker:
    index: int
    table: str
    acked: dict = field(default_factory=dict)  # key -> value, answered 200
    attempted: int = 0
    retries_409: int = 0
    unexpected: list = field(default_factory=list)  # (status, body) while the server was up
    connection_errors: int = 0


def commit_stream(api: Api, worker: Worker, round_no: int, stop: threading.Event,
                  killed: threading.Event) -> None:
    session = requests.Session()
    url = api.table_url(NAMESPACE, worker.table)
    i = 0
    while not stop.is_set():
        key = f"k{round_no}_{worker.index}_{i}"
        value = f"v{round_no}_{worker.index}_{i}"
        body = {
            "requirements": [],
            "updates": [{"action": "set-properties", "updates": {key: value}}],
        }
        worker.attempted += 1
        try:
            r = session.post(url, json=body, timeout=10)
        except requests.RequestException:
            worker.connection_errors += 1
            if killed.is_set():
                return
            time.sleep(0.05)
            session = requests.Session()
            continue  # not acknowledged; the same key is retried below with a new index
        if r.status_code == 200:
            worker.acked[key] = value
        elif r.status_code == 409 and not killed.is_set():
            # CommitFailed: a client would refresh and retry. No requirements were
            # given, so the server may not reject this for good.
            worker.retries_409 += 1
            if worker.retries_409 > 1000:
                worker.unexpected.append((409, "more than 1000 conflicts: " + r.text[:300]))
                return
            continue
        elif not killed.is_set():
            worker.unexpected.append((r.status_code, r.text[:300]))
        i += 1


def create_table(api: Api, name: str) -> dict:
    r = requests.post(
        api.url(f"/namespaces/{NAMESPACE}/tables"),
        json={"name": name, "schema": SCHEMA, "properties": {"created-by": "crash-test"}},
        timeout=30,
    )
    assert r.status_code == 200, f"create table {name}: {r.status_code} {r.text}"
    return r.json()


def load_table(api: Api, name: str) -> dict:
    r = requests.get(api.table_url(NAMESPACE, name), timeout=30)
    assert r.status_code == 200, f"load table {name} after restart: {r.status_code} {r.text}"
    return r.json()


def check_table_on_disk(name: str, loaded: dict, expected_uuid: str,
                        expected_props: dict, unnamed_may_be_partial: bool) -> None:
    """With `unnamed_may_be_partial` (the journal), a file no pointer or metadata-log
    entry names may be partial: the journal writes files under their final name unsynced,
    so a kill -9 inside that write (SIGKILL cuts a file write at a page boundary) leaves
    the file of a commit that never landed, as `FileStore::write_new` documents. Every
    file that is named must be complete either way."""
    metadata = loaded["metadata"]
    assert metadata["table-uuid"] == expected_uuid, f"{name}: table uuid changed"

    location = loaded.get("metadata-location")
    assert location, f"{name}: no metadata-location in load response"
    pointer = local_path(location)
    assert pointer.is_file(), f"{name}: metadata-location {location} does not exist on disk"
    on_disk = json.loads(pointer.read_text())
    assert on_disk["table-uuid"] == expected_uuid, f"{name}: uuid in {pointer} differs"

    # every acknowledged property survives, with its value, in the response and
    # in the file the pointer names
    for source, props in (("load response", metadata.get("properties", {})),
                          (str(pointer), on_disk.get("properties", {}))):
        missing = {k: v for k, v in expected_props.items() if props.get(k) != v}
        assert not missing, (
            f"{name}: {len(missing)} of {len(expected_props)} acknowledged properties "
            f"missing from {source}, e.g. {sorted(missing.items())[:5]}"
        )

    # every metadata file the server has written is complete JSON (but see above)
    metadata_dir = local_path(metadata["location"]) / "metadata"
    assert metadata_dir.is_dir(), f"{name}: {metadata_dir} missing"
    json_files = [p for p in metadata_dir.iterdir()
                  if p.name.endswith(".json") and not p.name.startswith(".")]
    assert pointer in json_files or pointer.parent != metadata_dir
    named = {pointer} | {local_path(e["metadata-file"]) for e in metadata.get("metadata-log", [])}
    for path in json_files:
        try:
            doc = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            if unnamed_may_be_partial and path not in named:
                print(f"{name}: unnamed partial file {path.name} ({path.stat().st_size} bytes)")
                continue
            pytest.fail(f"{name}: metadata file {path} is not complete JSON: {e}")
        assert doc.get("table-uuid") == expected_uuid, f"{path}: wrong table-uuid"
        assert "format-version" in doc, f"{path}: no format-version"

    # the metadata log only names files that exist
    for entry in metadata.get("metadata-log", []):
        assert local_path(entry["metadata-file"]).is_file(), (
            f"{name}: metadata-log names a missing file {entry['metadata-file']}"
        )


def wal_checkpoints(server) -> dict[str, float]:
    """The embedded store's WAL checkpoints so far, by place (`floe_wal_checkpoints_total`)."""
    r = requests.get(f"{server.url}/metrics", timeout=10)
    assert r.status_code == 200, r.text
    found = re.findall(r'^floe_wal_checkpoints_total\{place="(\w+)"\} (\S+)$', r.text, re.M)
    return {place: float(n) for place, n in found}


@pytest.mark.parametrize("sync_flags", [
    ["--fsync-journal", "true", "--fsync-journal-interval-ms", "50"],
    ["--fsync-journal", "false"],
    ["--fsync-journal", "false", "--fsync-batch", "true"],
    # The WAL checkpointed every few groups, so that kills land during a background
    # pass, a tail copied by the commit thread, or a WAL starting over.
    ["--fsync-journal", "true", "--fsync-journal-interval-ms", "50",
     "--wal-checkpoint-frames", "50"],
], ids=["journal", "per-file", "batch", "checkpoints"])
def test_acknowledged_commits_survive_kill_9(floe_server_factory, sync_flags):
    """With the metadata files synced by the journal's background rounds (the default;
    each restart restores what the journal still holds), one by one, or in shared rounds;
    and with the database's WAL checkpointed all the time."""
    server = floe_server_factory(["--auth", "none", *sync_flags])
    journal = "--fsync-journal" in sync_flags and "true" in sync_flags
    checkpointing = "--wal-checkpoint-frames" in sync_flags
    if checkpointing and server.database_url:
        # PostgreSQL keeps its own WAL; the flag is the embedded store's.
        pytest.skip("embedded store only")
    tails = 0.0
    api = Api(server)
    r = requests.post(api.url("/namespaces"), json={"namespace": [NAMESPACE]}, timeout=30)
    assert r.status_code == 200, f"create namespace: {r.status_code} {r.text}"

    tables = ["shared", "solo2", "solo3"]
    uuids = {t: create_table(api, t)["metadata"]["table-uuid"] for t in tables}
    expected: dict[str, dict] = {t: {"created-by": "crash-test"} for t in tables}
    rng = random.Random(1234)

    for round_no in range(ROUNDS):
        workers = [Worker(i, "shared" if i < 2 else f"solo{i}") for i in range(THREADS)]
        stop, killed = threading.Event(), threading.Event()
        threads = [threading.Thread(target=commit_stream,
                                    args=(api, w, round_no, stop, killed), daemon=True)
                   for w in workers]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(*RUN_BEFORE_KILL))
        assert server.is_running(), f"server died on its own in round {round_no}"
        if checkpointing:
            # Read before the kill (the counts start over with the process).
            counts = wal_checkpoints(server)
            assert counts.get("background", 0) >= 1, f"round {round_no}: no pass ran: {counts}"
            assert counts.get("failed", 0) == 0, f"round {round_no}: {counts}"
            tails += counts.get("tail", 0)
        killed.set()
        server.kill9()  # mid-stream: commits are in flight
        stop.set()
        for t in threads:
            t.join(timeout=30)
            assert not t.is_alive(), "commit thread hung"

        acks = sum(len(w.acked) for w in workers)
        print(f"round {round_no}: attempted={sum(w.attempted for w in workers)} acked={acks} "
              f"409-retries={sum(w.retries_409 for w in workers)} "
              f"connection-errors={sum(w.connection_errors for w in workers)}")
        unexpected = [u for w in workers for u in w.unexpected]
        assert not unexpected, f"round {round_no}: unexpected responses {unexpected[:5]}"
        assert acks >= MIN_ACKS_PER_ROUND, (
            f"round {round_no}: only {acks} commits acknowledged "
            f"(attempted {sum(w.attempted for w in workers)})"
        )
        for w in workers:
            expected[w.table].update(w.acked)

        server.start()  # same data dir, after kill -9
        api = Api(server)
        for t in tables:
            check_table_on_disk(t, load_table(api, t), uuids[t], expected[t], journal)

        # the restarted server still takes commits and reads its own writes
        probe = {"requirements": [], "updates": [
            {"action": "set-properties", "updates": {f"probe{round_no}": "ok"}}]}
        r = requests.post(api.table_url(NAMESPACE, "shared"), json=probe, timeout=30)
        assert r.status_code == 200, f"commit after restart: {r.status_code} {r.text}"
        expected["shared"][f"probe{round_no}"] = "ok"
        assert load_table(api, "shared")["metadata"]["properties"].get(f"probe{round_no}") == "ok"

    if checkpointing:
        assert tails >= 1, "the commit thread never copied a pass's tail"
    # A clean shutdown (SIGTERM) after all that keeps everything too.
    assert server.terminate() == 0, "server did not exit 0 on SIGTERM"
    server.start()
    api = Api(server)
    for t in tables:
        check_table_on_disk(t, load_table(api, t), uuids[t], expected[t], journal)


def test_sigterm_exits_cleanly(floe_server_factory):
    server = floe_server_factory(["--auth", "none"])
    r = requests.get(server.url + "/v1/config", params={"warehouse": "default"}, timeout=10)
    assert r.status_code == 200
    started = time.monotonic()
    status = server.terminate(timeout=15)
    assert status == 0, f"exit status {status} after SIGTERM"
    assert time.monotonic() - started < 15
    with pytest.raises(requests.ConnectionError):
        requests.get(server.url + "/healthz", timeout=2)


def test_a_second_server_on_one_data_dir_is_refused(floe_server_factory, floe_binary):
    """The embedded store's cache is valid only while one process writes its database:
    a second `floe serve` on the same data directory exits with a clear message, and the
    first one keeps serving."""
    server = floe_server_factory(["--auth", "none"])
    if server.database_url:
        # On PostgreSQL, nodes sharing one database is the supported deployment (the
        # multinode suite covers it); the data directory holds no store to guard.
        pytest.skip("embedded store only")
    second = subprocess.run(
        [str(floe_binary), "serve", "--bind", f"127.0.0.1:{free_port()}",
         "--data-dir", str(server.data_dir), "--auth", "none"],
        capture_output=True, text=True, timeout=60)
    assert second.returncode != 0
    assert "in use by another Floe process" in second.stderr, second.stderr
    r = requests.get(server.url + "/v1/config", params={"warehouse": "default"}, timeout=10)
    assert r.status_code == 200
