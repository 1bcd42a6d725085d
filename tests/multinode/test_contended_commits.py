"""Many clients committing to one table through two nodes at once.

(a) Blind set-properties commits (no requirements): the server must absorb every race
    (queueing inside a node, compare-and-swap plus internal retry across nodes), so all
    succeed and every property is there at the end.
(b) Appends with assert-ref-snapshot-id on main, the way engines commit: a lost race is
    a 409 the client retries on fresh metadata. Never a 5xx; at the end the table's
    history is exactly the acknowledged snapshots, one linear chain.

Both run twice: with the warehouse in a directory, and on S3 (every node with the same
--storage-config; each commit writes its metadata file to the bucket).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

from floe_multinode import Api, assert_complete_metadata, assert_error_model, describe, run_threads

STORAGES = ("file", "s3")  # conftest.py runs this module once per storage

NAMESPACE = ["contended"]
CLIENTS = 20
BLIND_COMMITS = 50  # per client
SNAPSHOTS = 10  # per client
MAX_TRIES_PER_SNAPSHOT = 500
RUN_TIMEOUT = 240.0


def setup_table(cluster, name: str) -> None:
    api = Api(cluster.urls[0])
    r = api.create_namespace("default", NAMESPACE)
    assert r.status_code in (200, 409), describe(r)
    r = api.create_table("default", NAMESPACE, name)
    assert r.status_code == 200, describe(r)


def retry_lines(cluster) -> dict[str, int]:
    return cluster.count_in_logs("retrying")


def test_blind_property_commits_all_succeed(cluster):
    setup_table(cluster, "props")
    retries_before = retry_lines(cluster)
    statuses: Counter = Counter()
    failures: list[str] = []
    lock = threading.Lock()

    def client(i: int):
        api = Api(cluster.urls[i % len(cluster.urls)])
        for j in range(BLIND_COMMITS):
            try:
                r = api.set_properties("default", NAMESPACE, "props", {f"k_{i}_{j}": f"v_{i}_{j}"})
            except Exception as e:
                with lock:
                    failures.append(f"client {i} commit {j}: {e.__class__.__name__}: {e}")
                continue
            with lock:
                statuses[r.status_code] += 1
                if r.status_code != 200:
                    failures.append(f"client {i} commit {j}: {describe(r)}")

    started = time.monotonic()
    run_threads([lambda i=i: client(i) for i in range(CLIENTS)], RUN_TIMEOUT)
    took = time.monotonic() - started
    retries = {k: v - retries_before.get(k, 0) for k, v in retry_lines(cluster).items()}
    print(f"\n  blind commits: {CLIENTS * BLIND_COMMITS} in {took:.2f}s "
          f"({CLIENTS * BLIND_COMMITS / took:.0f}/s); statuses {dict(statuses)}; "
          f"server log lines with 'retrying': {retries}")
    assert not failures, f"{len(failures)} commits failed:\n" + "\n".join(failures[:20])
    assert statuses[200] == CLIENTS * BLIND_COMMITS

    for url in cluster.urls:
        r = Api(url).load_table("default", NAMESPACE, "props")
        assert r.status_code == 200, describe(r)
        props = r.json()["metadata"]["properties"]
        missing = [f"k_{i}_{j}" for i in range(CLIENTS) for j in range(BLIND_COMMITS)
                   if props.get(f"k_{i}_{j}") != f"v_{i}_{j}"]
        assert not missing, f"through {url}: {len(missing)} acknowledged properties missing, e.g. {missing[:10]}"
        assert_complete_metadata(r.json()["metadata-location"])


def main_head(metadata: dict):
    ref = metadata.get("refs", {}).get("main")
    if ref is not None:
        return ref["snapshot-id"]
    current = metadata.get("current-snapshot-id")
    return None if current in (None, -1) else current


def test_appends_with_ref_requirement(cluster):
    setup_table(cluster, "snaps")
    warehouse = cluster.warehouse
    retries_before = retry_lines(cluster)
    lock = threading.Lock()
    acknowledged: list[int] = []
    rejected: set[int] = set()
    unexpected: list[str] = []
    conflicts = Counter()
    deadline = time.monotonic() + RUN_TIMEOUT - 20

    def client(i: int):
        api = Api(cluster.urls[i % len(cluster.urls)])
        rng = random.Random(i * 7919 + int(time.time()))
        for s in range(SNAPSHOTS):
            for attempt in range(MAX_TRIES_PER_SNAPSHOT):
                if time.monotonic() > deadline:
                    with lock:
                        unexpected.append(f"client {i}: out of time at snapshot {s}")
                    return
                r = api.load_table("default", NAMESPACE, "snaps")
                if r.status_code != 200:
                    with lock:
                        unexpected.append(f"client {i} load: {describe(r)}")
                    continue
                meta = r.json()["metadata"]
                head = main_head(meta)
                snap_id = rng.getrandbits(62) or 1
                snapshot = {
                    "snapshot-id": snap_id,
                    "sequence-number": meta["last-sequence-number"] + 1,
                    "timestamp-ms": int(time.time() * 1000),
                    "manifest-list": f"{warehouse}/fake/snap-{snap_id}.avro",
                    "summary": {"operation": "append"},
                    "schema-id": 0,
                }
                if head is not None:
                    snapshot["parent-snapshot-id"] = head
                body = {
                    "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main",
                                      "snapshot-id": head}],
                    "updates": [
                        {"action": "add-snapshot", "snapshot": snapshot},
                        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                         "snapshot-id": snap_id},
                    ],
                }
                try:
                    r = api.commit_table("default", NAMESPACE, "snaps", body)
                except Exception as e:
                    with lock:
                        unexpected.append(f"client {i} commit: {e.__class__.__name__}: {e}")
                    continue
                if r.status_code == 200:
                    with lock:
                        acknowledged.append(snap_id)
                    break
                if r.status_code == 409:
                    try:
                        assert_error_model(r, 409, "CommitFailedException")
                    except AssertionError as e:
                        with lock:
                            unexpected.append(str(e))
                    with lock:
                        rejected.add(snap_id)
                        conflicts[i] += 1
                    time.sleep(rng.uniform(0, 0.005))
                    continue
                with lock:
                    unexpected.append(f"client {i} commit: {describe(r)}")
            else:
                with lock:
                    unexpected.append(f"client {i}: snapshot {s} not committed in "
                                      f"{MAX_TRIES_PER_SNAPSHOT} tries")
                return

    started = time.monotonic()
    run_threads([lambda i=i: client(i) for i in range(CLIENTS)], RUN_TIMEOUT)
    took = time.monotonic() - started
    retries = {k: v - retries_before.get(k, 0) for k, v in retry_lines(cluster).items()}
    total_409 = sum(conflicts.values())
    print(f"\n  appends: {len(acknowledged)} acknowledged in {took:.2f}s; "
          f"{total_409} client retries (409 CommitFailedException), "
          f"{total_409 / max(1, len(acknowledged)):.1f} per snapshot; "
          f"server log lines with 'retrying': {retries}")
    assert not unexpected, f"{len(unexpected)} unexpected outcomes (must be 200 or 409):\n" + \
        "\n".join(unexpected[:20])
    assert len(acknowledged) == CLIENTS * SNAPSHOTS
    assert len(set(acknowledged)) == len(acknowledged)
    acked = set(acknowledged)

    for url in cluster.urls:
        r = Api(url).load_table("default", NAMESPACE, "snaps")
        assert r.status_code == 200, describe(r)
        meta = r.json()["metadata"]
        assert_complete_metadata(r.json()["metadata-location"])
        ids = Counter(s["snapshot-id"] for s in meta.get("snapshots", []))
        dup = [s for s, c in ids.items() if c > 1]
        assert not dup, f"snapshots listed more than once through {url}: {dup[:10]}"
        missing = acked - set(ids)
        assert not missing, f"through {url}: {len(missing)} acknowledged snapshots missing"
        ghosts = set(ids) & rejected
        assert not ghosts, f"through {url}: {len(ghosts)} rejected (409) snapshots present"
        extra = set(ids) - acked
        assert not extra, f"through {url}: {len(extra)} snapshots nobody acknowledged"

        by_id = {s["snapshot-id"]: s for s in meta["snapshots"]}
        chain, cursor = [], main_head(meta)
        for _ in range(len(by_id) + 1):
            if cursor is None:
                break
            assert cursor in by_id, f"main's history names unknown snapshot {cursor}"
            chain.append(cursor)
            cursor = by_id[cursor].get("parent-snapshot-id")
        assert cursor is None, "main's history has a cycle"
        assert len(chain) == len(set(chain)) and set(chain) == acked, (
            f"through {url}: main's history visits {len(chain)} snapshots, "
            f"{len(set(chain) & acked)} of the {len(acked)} acknowledged")
        seqs = [by_id[s]["sequence-number"] for s in reversed(chain)]
        assert seqs == list(range(1, len(chain) + 1)), f"sequence numbers along main: {seqs[:20]}..."
        assert meta["last-sequence-number"] == len(chain)
