"""The Polaris benchmark's concurrent dataset creation, scaled down, over two nodes.

50 client threads, each bound to one node (round-robin), create 10 catalogs at once;
then, in one catalog, a complete binary namespace tree of depth 7 (127 namespaces),
level by level, each client creating different children; then 2 tables and 2 views on
every leaf. Every request must succeed the first time (no client retries), every
create must be readable at once through the OTHER node, and listing through either
node must give exactly the entities created.

It runs twice: with the warehouse in a directory, and on S3 (every node with the same
--storage-config; the metadata files go to the bucket). On S3 the read back through the
other node also asks for vended credentials (X-Iceberg-Access-Delegation), which must
come scoped to the table's location, and afterwards every acknowledged metadata file
must be in the bucket.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

from floe_multinode import Api, bench_schema, describe, list_all, ns_path, run_threads

STORAGES = ("file", "s3")  # conftest.py runs this module once per storage
VENDED = {"X-Iceberg-Access-Delegation": "vended-credentials"}

CLIENTS = 50
CATALOGS = 10
DEPTH = 7  # levels; 2**7 - 1 = 127 namespaces, 64 leaves
TABLES_PER_LEAF = 2
VIEWS_PER_LEAF = 2
PHASE_TIMEOUT = 180.0  # seconds per phase, for slow CI machines
TREE_CATALOG = "C_1"


def ns_levels(n: int) -> list[str]:
    """The identifier of tree node n: the names on the path from the root NS_0."""
    path = []
    while True:
        path.append(f"NS_{n}")
        if n == 0:
            return list(reversed(path))
        n = (n - 1) // 2


def tree_level(level: int) -> range:
    return range(2**level - 1, 2 ** (level + 1) - 1)


class Workload:
    """Clients, the log of every request, and the failures (no retries anywhere)."""

    def __init__(self, urls: list[str]):
        n = len(urls)
        # Client i talks to node i % n, and reads back through node (i + 1) % n.
        self.writers = [Api(urls[i % n]) for i in range(CLIENTS)]
        self.readers = [Api(urls[(i + 1) % n]) for i in range(CLIENTS)]
        self.lock = threading.Lock()
        self.failures: list[str] = []
        self.statuses: Counter = Counter()
        self.requests = 0

    def record(self, what: str, r, expected: int) -> bool:
        with self.lock:
            self.requests += 1
            self.statuses[(what, r.status_code)] += 1
            if r.status_code != expected:
                self.failures.append(f"{what}: expected {expected}, got {describe(r)}")
                return False
        return True

    def fail(self, message: str) -> None:
        with self.lock:
            self.failures.append(message)

    def phase(self, name: str, tasks) -> float:
        """Runs tasks (callables taking a client index): client i does tasks[i::CLIENTS]."""
        def worker(i: int):
            for task in tasks[i::CLIENTS]:
                try:
                    task(i)
                except Exception as e:  # a transport error is a failure too, not a retry
                    self.fail(f"{name}: client {i}: {e.__class__.__name__}: {e}")

        started = time.monotonic()
        run_threads([lambda i=i: worker(i) for i in range(min(CLIENTS, len(tasks)))],
                    PHASE_TIMEOUT)
        took = time.monotonic() - started
        print(f"  {name}: {len(tasks)} creates in {took:.2f}s")
        return took


def test_concurrent_dataset_creation(cluster):
    w = Workload(cluster.urls)
    warehouse = cluster.warehouse
    on_s3 = cluster.storage == "s3"
    created_metadata: list[str] = []

    # ---- 10 catalogs at once ----------------------------------------------------------
    catalogs = [f"C_{i}" for i in range(1, CATALOGS + 1)]

    def create_catalog(name):
        def task(i):
            r = w.writers[i].create_catalog(name, warehouse)
            if w.record(f"create catalog {name}", r, 201):
                r = w.readers[i].get(f"/api/management/v1/catalogs/{name}")
                w.record(f"read catalog {name} through the other node", r, 200)
        return task

    w.phase("catalogs", [create_catalog(c) for c in catalogs])
    assert not w.failures, "\n".join(w.failures[:20])

    # ---- the namespace tree, level by level -------------------------------------------
    def create_namespace(n):
        levels = ns_levels(n)

        def task(i):
            r = w.writers[i].create_namespace(TREE_CATALOG, levels)
            if w.record(f"create namespace {levels}", r, 200):
                r = w.readers[i].get(f"/v1/{TREE_CATALOG}/namespaces/{ns_path(levels)}")
                if w.record(f"load namespace {levels} through the other node", r, 200):
                    if r.json().get("namespace") != levels:
                        w.fail(f"load namespace {levels}: wrong body {describe(r)}")
        return task

    for level in range(DEPTH):
        w.phase(f"namespaces level {level}", [create_namespace(n) for n in tree_level(level)])
        assert not w.failures, "\n".join(w.failures[:20])

    leaves = list(tree_level(DEPTH - 1))
    table_names = [f"T_{k}" for k in range(TABLES_PER_LEAF)]
    view_names = [f"V_{k}" for k in range(VIEWS_PER_LEAF)]

    # ---- 2 tables per leaf, each read back at once through the other node -------------
    def create_table(n, name):
        levels = ns_levels(n)

        def task(i):
            r = w.writers[i].create_table(TREE_CATALOG, levels, name, schema=bench_schema())
            if not w.record(f"create table {levels}.{name}", r, 200):
                return
            created = r.json()["metadata-location"]
            with w.lock:
                created_metadata.append(created)
            r = w.readers[i].load_table(TREE_CATALOG, levels, name,
                                        headers=VENDED if on_s3 else None)
            if w.record(f"load table {levels}.{name} through the other node right after "
                        f"its create", r, 200):
                if r.json()["metadata-location"] != created:
                    w.fail(f"load table {levels}.{name} through the other node: "
                           f"metadata-location {r.json()['metadata-location']}, "
                           f"the create answered {created}")
                if on_s3:
                    check_vended(levels, name, r)
        return task

    def check_vended(levels, name, r):
        """One credential, for exactly the table's location, with a session token."""
        body = r.json()
        creds = body.get("storage-credentials") or []
        location = body["metadata"]["location"]
        if len(creds) != 1 or creds[0].get("prefix") != location:
            w.fail(f"load table {levels}.{name} with vended credentials through the other "
                   f"node: storage-credentials {[c.get('prefix') for c in creds]}, "
                   f"location {location}")
            return
        config = creds[0].get("config", {})
        missing = [k for k in ("s3.access-key-id", "s3.secret-access-key", "s3.session-token")
                   if not config.get(k)]
        if missing:
            w.fail(f"load table {levels}.{name}: vended credential lacks {missing}")

    w.phase("tables", [create_table(n, t) for n in leaves for t in table_names])
    assert not w.failures, "\n".join(w.failures[:20])

    # ---- 2 views per leaf ------------------------------------------------------------
    def create_view(n, name, table):
        levels = ns_levels(n)
        sql = f"SELECT * FROM {'.'.join(levels)}.{table}"

        def task(i):
            r = w.writers[i].create_view(TREE_CATALOG, levels, name, sql, schema=bench_schema())
            if w.record(f"create view {levels}.{name}", r, 200):
                r = w.readers[i].load_view(TREE_CATALOG, levels, name)
                w.record(f"load view {levels}.{name} through the other node", r, 200)
        return task

    w.phase("views", [create_view(n, v, table_names[k % len(table_names)])
                      for n in leaves for k, v in enumerate(view_names)])
    assert not w.failures, "\n".join(w.failures[:20])

    creates = sum(c for (what, _), c in w.statuses.items() if what.startswith("create"))
    print(f"  {w.requests} requests ({creates} creates), all first-time successes")
    assert creates == CATALOGS + (2**DEPTH - 1) + len(leaves) * (TABLES_PER_LEAF + VIEWS_PER_LEAF)

    # ---- exact counts, listed through every node ---------------------------------------
    expected_ns = {tuple(ns_levels(n)) for n in range(2**DEPTH - 1)}
    leaf_set = {tuple(ns_levels(n)) for n in leaves}
    for url in cluster.urls:
        api = Api(url)
        names = sorted(c["name"] for c in list_all(api, "/api/management/v1/catalogs", "catalogs"))
        assert names == sorted(catalogs + ["default"]), f"catalogs through {url}: {names}"
        for c in catalogs[1:]:
            assert list_all(api, f"/v1/{c}/namespaces", "namespaces") == [], c

        found: list[tuple] = []
        frontier: list[tuple] = [()]
        for _ in range(DEPTH + 1):  # breadth first, one level per round
            nxt = []
            for parent in frontier:
                params = f"?parent={ns_path(list(parent))}" if parent else ""
                children = list_all(api, f"/v1/{TREE_CATALOG}/namespaces{params}", "namespaces")
                children = [tuple(c) for c in children]
                assert len(children) == (0 if parent in leaf_set else (1 if not parent else 2)), \
                    f"children of {parent} through {url}: {children}"
                for c in children:
                    assert c[:-1] == parent, f"{c} listed under {parent}"
                nxt += children
            found += nxt
            frontier = nxt
        assert len(found) == len(set(found)) == 2**DEPTH - 1, f"through {url}: {len(found)}"
        assert set(found) == expected_ns

        tables = views = 0
        for ns in sorted(expected_ns):
            p = ns_path(list(ns))
            t = list_all(api, f"/v1/{TREE_CATALOG}/namespaces/{p}/tables", "identifiers")
            v = list_all(api, f"/v1/{TREE_CATALOG}/namespaces/{p}/views", "identifiers")
            want_t = table_names if ns in leaf_set else []
            want_v = view_names if ns in leaf_set else []
            assert sorted(i["name"] for i in t) == want_t, f"tables in {ns} through {url}: {t}"
            assert sorted(i["name"] for i in v) == want_v, f"views in {ns} through {url}: {v}"
            assert all(i["namespace"] == list(ns) for i in t + v), (ns, t, v)
            tables += len(t)
            views += len(v)
        assert tables == len(leaves) * TABLES_PER_LEAF
        assert views == len(leaves) * VIEWS_PER_LEAF
        print(f"  through {url}: {len(names)} catalogs, {len(found)} namespaces, "
              f"{tables} tables, {views} views")

    # ---- on S3: every acknowledged table metadata file is in the bucket ----------------
    if on_s3:
        keys = set(cluster.s3.keys(f"{warehouse}/{TREE_CATALOG}"))
        in_bucket = {f"s3://{cluster.s3.bucket}/{k}" for k in keys}
        missing = [m for m in created_metadata if m not in in_bucket]
        assert len(created_metadata) == len(leaves) * TABLES_PER_LEAF
        assert not missing, f"{len(missing)} acknowledged metadata files not in the bucket: {missing[:5]}"
        metadata_files = sum(1 for k in keys if k.endswith(".metadata.json"))
        print(f"  bucket: {len(keys)} objects under {warehouse}/{TREE_CATALOG}, "
              f"{metadata_files} metadata files")
