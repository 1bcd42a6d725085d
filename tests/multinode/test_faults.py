"""Faults under load: a node killed with -9, PostgreSQL restarted, PostgreSQL stopped.

(a) kill -9 one node in the middle of a stream of commits sent to both nodes: the other
    node keeps answering 200 throughout; after the killed node restarts, every
    acknowledged commit is there through either node, and every metadata file is a
    complete JSON document.
(b) Restart PostgreSQL while clients commit and load: responses are 2xx or 503 with the
    spec's error body, never 500, never a hang; afterwards the nodes recover by
    themselves (no restart) and nothing acknowledged is lost.
(c) Stop PostgreSQL: /readyz says 503 within seconds (/healthz, liveness, stays 200), catalog calls get a prompt 503;
    after PostgreSQL is back, everything works again.

(b) and (c) need FLOE_TEST_PG_DIR and always bring PostgreSQL back up.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass

import pytest
import requests

from floe_multinode import (Api, assert_all_metadata_files_complete, assert_complete_metadata,
                      assert_error_model, describe, pg_cluster, pg_dir, pg_ensure_up)

STORAGES = ("file", "s3")  # conftest.py runs this module once per storage
NAMESPACE = ["faults"]
TABLES = [f"t{i}" for i in range(4)]
MAX_STALL = 12.0  # seconds: "never a hang longer than ~10 s per request"
RECOVERY_TIMEOUT = 30.0  # seconds for the nodes to serve again after the database is back


@pytest.fixture(autouse=True)
def _postgres_back_up_afterwards():
    yield
    if os.environ.get("FLOE_TEST_PG_DIR"):
        pg_ensure_up()


@dataclass
class Outcome:
    worker: str
    node: int
    op: str  # "commit" or "load"
    table: str
    key: str | None
    t0: float  # time.monotonic() when sent
    elapsed: float
    status: int | None = None  # None: no HTTP answer (see error)
    body: str = ""
    error: str | None = None
    response: requests.Response | None = None

    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    def __str__(self) -> str:
        what = f"{self.op} {self.table}" + (f" [{self.key}]" if self.key else "")
        got = f"{self.status} {self.body[:300]}" if self.status is not None else self.error
        return f"{self.worker} -> node{self.node}: {what}: {got} after {self.elapsed:.2f}s"


class Stream:
    """Worker threads repeating one request each until stopped; every outcome kept."""

    def __init__(self, deadline_s: float = 300.0):
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.outcomes: list[Outcome] = []
        self.threads: list[threading.Thread] = []
        self.deadline = time.monotonic() + deadline_s

    def add(self, step) -> None:
        def loop():
            for _ in range(1_000_000):
                if self.stop.is_set() or time.monotonic() > self.deadline:
                    return
                o = step()
                with self.lock:
                    self.outcomes.append(o)
                if o.status is None:
                    time.sleep(0.05)  # node down: do not spin
        self.threads.append(threading.Thread(target=loop, daemon=True))

    def start(self) -> "Stream":
        for t in self.threads:
            t.start()
        return self

    def finish(self, timeout: float = 60.0) -> list[Outcome]:
        self.stop.set()
        end = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, end - time.monotonic()))
        alive = sum(t.is_alive() for t in self.threads)
        assert alive == 0, f"{alive} client threads stuck after the stream was stopped"
        with self.lock:
            return list(self.outcomes)

    def count(self, pred) -> int:
        with self.lock:
            return sum(1 for o in self.outcomes if pred(o))

    def wait_for(self, pred, n: int, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.count(pred) >= n:
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {n} {what}")


def call(worker: str, node: int, op: str, table: str, key: str | None, fn) -> Outcome:
    t0 = time.monotonic()
    try:
        r = fn()
        return Outcome(worker, node, op, table, key, t0, time.monotonic() - t0,
                       r.status_code, r.text, response=r)
    except requests.RequestException as e:
        return Outcome(worker, node, op, table, key, t0, time.monotonic() - t0,
                       error=f"{e.__class__.__name__}: {e}")


def committer(name: str, cluster, node: int, table: str, timeout: float):
    api = Api(cluster.nodes[node].url, timeout=timeout)
    seq = itertools.count()

    def step():
        api.base = cluster.nodes[node].url  # the port may change on a restart
        key = f"{name}_{next(seq)}"
        return call(name, node, "commit", table, key,
                    lambda: api.set_properties("default", NAMESPACE, table, {key: "1"}))
    return step


def loader(name: str, cluster, node: int, timeout: float):
    api = Api(cluster.nodes[node].url, timeout=timeout)
    seq = itertools.count()

    def step():
        api.base = cluster.nodes[node].url
        table = TABLES[next(seq) % len(TABLES)]
        return call(name, node, "load", table, None,
                    lambda: api.load_table("default", NAMESPACE, table))
    return step


def setup_tables(cluster) -> None:
    api = Api(cluster.urls[0])
    r = api.create_namespace("default", NAMESPACE)
    assert r.status_code == 200, describe(r)
    for t in TABLES:
        r = api.create_table("default", NAMESPACE, t)
        assert r.status_code == 200, describe(r)


def check_nothing_lost(cluster, outcomes: list[Outcome]) -> None:
    """Every acknowledged commit is visible through every node; pointers name complete
    metadata files; every metadata file in the warehouse is complete."""
    acked: dict[str, set] = {t: set() for t in TABLES}
    for o in outcomes:
        if o.op == "commit" and o.status == 200:
            acked[o.table].add(o.key)
    locations = {}
    for n in cluster.nodes:
        api = Api(n.url)
        for t in TABLES:
            r = api.load_table("default", NAMESPACE, t)
            assert r.status_code == 200, f"through {n.name}: {describe(r)}"
            props = r.json()["metadata"]["properties"]
            missing = sorted(k for k in acked[t] if props.get(k) != "1")
            assert not missing, (f"through {n.name}: {len(missing)} of {len(acked[t])} "
                                 f"acknowledged commits on {t} are missing, e.g. {missing[:5]}")
            loc = r.json()["metadata-location"]
            assert_complete_metadata(loc)
            locations.setdefault(t, set()).add(loc)
    for t, locs in locations.items():
        assert len(locs) == 1, f"the nodes disagree on {t}'s metadata-location: {locs}"
    files = assert_all_metadata_files_complete(cluster)
    print(f"  {sum(len(a) for a in acked.values())} acknowledged commits all present through "
          f"every node; {files} metadata files, all complete JSON")


# ---------------------------------------------------------------------------------------
# (a) kill -9 a node
# ---------------------------------------------------------------------------------------


def test_kill9_one_node_during_commits(fresh_cluster):
    cluster = fresh_cluster(2)
    setup_tables(cluster)
    victim, survivor = 0, 1
    stream = Stream()
    for t in TABLES:  # each table gets one committer per node: they also race each other
        stream.add(committer(f"A_{t}", cluster, victim, t, timeout=10))
        stream.add(committer(f"B_{t}", cluster, survivor, t, timeout=30))
    stream.start()
    try:
        stream.wait_for(lambda o: o.node == victim and o.ok(), 40, 60, "acks from the victim")
        time.sleep(0.3)
        cluster.nodes[victim].kill9()
        killed_at = time.monotonic()
        time.sleep(1.5)
        cluster.nodes[victim].start()
        restarted_at = time.monotonic()
        stream.wait_for(lambda o: o.node == victim and o.ok() and o.t0 > restarted_at, 20, 60,
                        "acks from the restarted node")
        time.sleep(0.5)
    finally:
        outcomes = stream.finish()

    on_b = [o for o in outcomes if o.node == survivor]
    on_a = [o for o in outcomes if o.node == victim]
    bad_b = [o for o in on_b if o.status != 200]
    b_while_down = [o for o in on_b if killed_at <= o.t0 and o.t0 + o.elapsed <= restarted_at]
    a_errors = [o for o in on_a if o.status is None]
    print(f"\n  survivor: {len(on_b)} commits, {len(b_while_down)} while the victim was down, "
          f"slowest {max(o.elapsed for o in on_b):.2f}s; victim: "
          f"{sum(o.ok() for o in on_a)} acknowledged, {len(a_errors)} without answer "
          f"(killed or down); restart took {restarted_at - killed_at:.2f}s")
    assert not bad_b, (f"{len(bad_b)} commits through the surviving node were not 200:\n"
                       + "\n".join(map(str, bad_b[:10])))
    assert len(b_while_down) >= 5, "the surviving node made no progress while the other was down"
    assert max(o.elapsed for o in on_b) < MAX_STALL, "the surviving node stalled"
    bad_a = [o for o in on_a if o.status is not None and o.status != 200]
    assert not bad_a, ("answers from the killed/restarted node must be 200 (or none):\n"
                       + "\n".join(map(str, bad_a[:10])))
    check_nothing_lost(cluster, outcomes)


# ---------------------------------------------------------------------------------------
# (b) restart PostgreSQL under load
# ---------------------------------------------------------------------------------------


def is_503_error_model(o: Outcome) -> bool:
    if o.status != 503 or o.response is None:
        return False
    try:
        assert_error_model(o.response, 503, "ServiceUnavailableException")
        return True
    except AssertionError:
        return False


def is_unknown_commit(o: Outcome) -> bool:
    """A commit whose COMMIT the restart cut off: 502 CommitStateUnknownException (it may
    have landed; it is not acknowledged, so `check_nothing_lost` does not count it)."""
    if o.op != "commit" or o.status != 502 or o.response is None:
        return False
    try:
        assert_error_model(o.response, 502, "CommitStateUnknownException")
        return True
    except AssertionError:
        return False


def wait_until_serving(cluster, timeout: float) -> float:
    """Seconds until every node answers a load and a commit with 2xx (bounded)."""
    start = time.monotonic()
    seq = itertools.count()
    last = ""
    while time.monotonic() - start < timeout:
        good = True
        for n in cluster.nodes:
            api = Api(n.url, timeout=15)
            try:
                r1 = api.load_table("default", NAMESPACE, TABLES[0])
                r2 = api.set_properties("default", NAMESPACE, TABLES[1],
                                        {f"probe_{next(seq)}": "1"})
            except requests.RequestException as e:
                good, last = False, f"{n.name}: {e.__class__.__name__}: {e}"
                break
            if not (r1.ok and r2.ok):
                good, last = False, f"{n.name}: {describe(r1)} / {describe(r2)}"
                break
        if good:
            return time.monotonic() - start
        time.sleep(0.2)
    raise AssertionError(f"the nodes did not serve again within {timeout}s: {last}")


def test_postgres_restart_under_load(fresh_cluster):
    pg_dir()  # skips without FLOE_TEST_PG_DIR
    cluster = fresh_cluster(2)
    setup_tables(cluster)
    stream = Stream()
    for i, t in enumerate(TABLES):
        stream.add(committer(f"c_{t}", cluster, i % 2, t, timeout=30))
    for node in (0, 1):
        stream.add(loader(f"l_{node}", cluster, node, timeout=30))
    stream.start()
    try:
        stream.wait_for(lambda o: o.op == "commit" and o.ok(), 40, 60, "acknowledged commits")
        restart_began = time.monotonic()
        try:
            pg_cluster("restart")
        finally:
            pg_ensure_up()
        restarted = time.monotonic()
        time.sleep(3.0)
    finally:
        outcomes = stream.finish()

    statuses = Counter(o.status if o.status is not None else "no answer" for o in outcomes)
    unavailable = [o for o in outcomes if o.status == 503]
    late = [o for o in outcomes if not o.ok() and o.t0 > restarted]
    print(f"\n  {len(outcomes)} requests around a PostgreSQL restart "
          f"({restarted - restart_began:.2f}s): {dict(statuses)}; "
          f"slowest {max(o.elapsed for o in outcomes):.2f}s; "
          f"{len(late)} failures sent after the restart returned")
    wrong = [o for o in outcomes if not (o.ok() or is_503_error_model(o) or is_unknown_commit(o))]
    assert not wrong, (f"{len(wrong)} responses neither 2xx, 503 ServiceUnavailableException "
                       f"nor a commit's 502 CommitStateUnknownException "
                       f"(another 5xx, or no answer at all):\n"
                       + "\n".join(map(str, wrong[:10])))
    slow = [o for o in outcomes if o.elapsed > MAX_STALL]
    assert not slow, f"{len(slow)} requests hung:\n" + "\n".join(map(str, slow[:10]))

    took = wait_until_serving(cluster, RECOVERY_TIMEOUT)
    print(f"  serving again {took:.2f}s after the stream stopped; "
          f"{len(unavailable)} 503s during the outage")
    # Recovered for good: a burst of requests through each node, all 2xx.
    for n in cluster.nodes:
        api = Api(n.url, timeout=15)
        for k in range(10):
            for r in (api.load_table("default", NAMESPACE, TABLES[k % 4]),
                      api.get("/readyz"),
                      api.get("/v1/default/namespaces")):
                assert r.ok, f"{n.name} after recovery: {describe(r)}"
    check_nothing_lost(cluster, outcomes)


# ---------------------------------------------------------------------------------------
# (c) PostgreSQL down
# ---------------------------------------------------------------------------------------


def test_postgres_down_gives_prompt_503(fresh_cluster):
    pg_dir()
    cluster = fresh_cluster(2)
    setup_tables(cluster)
    api0 = Api(cluster.urls[0])
    r = api0.set_properties("default", NAMESPACE, TABLES[0], {"before_outage": "1"})
    assert r.status_code == 200, describe(r)

    try:
        pg_cluster("down")
        down_at = time.monotonic()

        for n in cluster.nodes:
            api = Api(n.url, timeout=15)
            # /readyz: 503 within a few seconds; the node itself is alive.
            last = None
            while time.monotonic() - down_at < 10:
                t0 = time.monotonic()
                last = api.get("/readyz")
                assert time.monotonic() - t0 < MAX_STALL, f"{n.name}: /readyz hung"
                if last.status_code == 503:
                    break
                time.sleep(0.2)
            assert last is not None and last.status_code == 503, (
                f"{n.name}: /readyz still {describe(last)} 10s after PostgreSQL stopped")
            print(f"\n  {n.name}: /readyz 503 {time.monotonic() - down_at:.2f}s after the stop")
            alive = api.get("/healthz")
            assert alive.status_code == 200, f"{n.name}: /healthz {describe(alive)} (liveness)"

            # Catalog calls: a prompt 503 with the spec's error body.
            calls = [
                ("load table", lambda: api.load_table("default", NAMESPACE, TABLES[0])),
                ("create namespace", lambda: api.create_namespace("default", [f"during_{n.name}"])),
                ("commit", lambda: api.set_properties("default", NAMESPACE, TABLES[1],
                                                      {f"during_{n.name}": "1"})),
                ("list namespaces", lambda: api.get("/v1/default/namespaces")),
                ("list catalogs", lambda: api.get("/api/management/v1/catalogs")),
            ]
            for what, fn in calls:
                t0 = time.monotonic()
                try:
                    r = fn()
                except requests.RequestException as e:
                    raise AssertionError(f"{n.name}: {what} with PostgreSQL down: "
                                         f"{e.__class__.__name__}: {e}")
                took = time.monotonic() - t0
                assert took <= 10.5, f"{n.name}: {what} took {took:.1f}s with PostgreSQL down"
                assert_error_model(r, 503, "ServiceUnavailableException")
                print(f"  {n.name}: {what} -> 503 in {took:.2f}s")
    finally:
        pg_ensure_up()

    took = wait_until_serving(cluster, RECOVERY_TIMEOUT)
    print(f"  serving again {took:.2f}s after PostgreSQL came back")
    for n in cluster.nodes:
        api = Api(n.url)
        r = api.get("/readyz")
        assert r.status_code == 200, describe(r)
        # Nothing was done while the database was down: the same creates now succeed.
        r = api.create_namespace("default", [f"during_{n.name}"])
        assert r.status_code == 200, describe(r)
        r = api.load_table("default", NAMESPACE, TABLES[0])
        assert r.status_code == 200, describe(r)
        props = r.json()["metadata"]["properties"]
        assert props.get("before_outage") == "1", props
        r = Api(n.url).load_table("default", NAMESPACE, TABLES[1])
        assert f"during_{n.name}" not in r.json()["metadata"]["properties"], (
            "a commit answered 503 while PostgreSQL was down was applied")
        assert_complete_metadata(r.json()["metadata-location"])
