"""The change-event checker: concurrent workloads, a node killed with -9 and the broker
restarted mid-run, then what the broker's consumers received is compared with what the
clients were acknowledged (the rules are in event_checker.py's docstring):
0 missing, 0 events for rejected requests, per-table order intact, duplicates only as
exact re-deliveries of the same event id (the broker's dedupe id).

Variants, each once per broker (NATS JetStream, Kafka; scripts/nats-server.sh and
scripts/kafka-server.sh, a fresh broker per test):
- two nodes over one PostgreSQL database, both with --events-sink and a 2 s relay lease
  (skipped without FLOE_TEST_DATABASE_URL, like every multi-node test): the node holding
  the relay lease is killed with -9 and restarted, the broker is stopped and started,
  and while it is down the node then holding the lease is killed and restarted too;
- one node on the embedded store (always runs): killed with -9 and restarted on the
  same data dir twice, once while the broker is down.

The workload, from 10 client threads sending each request to a random live node, every
request with its own X-Request-Id: namespace and table creation (plus tables in
namespaces that do not exist: 404), blind set-properties commits to six tables, appends
to one hot table with assert-ref-snapshot-id (contended: many 409s), and multi-table
transactions over four tables, a quarter of them with a requirement that fails (409).
After the run: every node up again, the relay drained (the broker has every position up
to the REST endpoint's last), everything consumed from the broker and checked.

FLOE_EVCHK_SECONDS (default 26) sets the workload's length; the fault schedule scales
with it.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
import threading
import time
import traceback
from pathlib import Path

import pytest
import requests

import event_checker as ec
from event_checker import ACK, REJECTED, UNKNOWN, Expect, Req
from floe_multinode import (LOG_FILTER, ROOT_CLIENT_ID, ROOT_SECRET, Cluster, Node, fetch_token,
                            floe_bin, free_port, live_nodes, ns_path, restartable_port,
                            simple_schema)

LEASE_S = 2
RUN_S = float(os.environ.get("FLOE_EVCHK_SECONDS", "26"))
DRAIN_TIMEOUT = 90.0
REQUEST_TIMEOUT = 30.0
CATALOG = "default"
NS = ("ev",)
BLIND_TABLES = [f"t{i}" for i in range(6)]
TXN_TABLES = [f"x{i}" for i in range(4)]
HOT = "hot"
WORKERS = {"creator": 2, "blind": 3, "append": 3, "txn": 2}


# ---------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------


def _keep() -> bool:
    return os.environ.get("KEEP_DATA") == "1"


@pytest.fixture(params=["nats", "kafka"])
def broker(request):
    """A fresh broker (its own directory and port) for one test; stopped afterwards."""
    kind = request.param
    directory = Path(tempfile.mkdtemp(prefix=f"floe-evchk-{kind}."))
    # (stopped and started again on its port mid-run: see tests/support/ports.py)
    b = ec.BROKERS[kind](directory, restartable_port())
    try:
        b.start()
    except AssertionError as e:
        shutil.rmtree(directory, ignore_errors=True)
        pytest.fail(f"could not start the {kind} broker: {e}", pytrace=False)
    yield b
    try:
        b.stop()
    finally:
        if not _keep():
            shutil.rmtree(directory, ignore_errors=True)


class EmbeddedNode(Node):
    """A node on the embedded store in its data dir (no --database-url)."""

    def spawn(self, port: int | None = None) -> None:
        assert not self.is_running(), f"{self.name} already running"
        self.port = port or self.port or free_port()
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== {self.name} start #{self.starts}: port {self.port} ===\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [str(self.binary), "serve", "--bind", f"127.0.0.1:{self.port}",
                 "--warehouse", self.warehouse, "--data-dir", str(self.data_dir),
                 "--log", LOG_FILTER, *self.extra_args],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "NO_COLOR": "1",
                     "FLOE_BOOTSTRAP_CREDENTIALS": f"{ROOT_CLIENT_ID},{ROOT_SECRET}"},
                start_new_session=True,
            )


def events_args(broker) -> list[str]:
    return ["--events-sink", broker.sink_url, "--events-relay-lease", str(LEASE_S)]


# ---------------------------------------------------------------------------------------
# The nodes as the clients see them
# ---------------------------------------------------------------------------------------


class Fleet:
    """The nodes, and which are up as far as the clients are told (a killed node is
    marked down just before the kill, so that most requests go to the others; some
    still reach it, which is the point)."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.lock = threading.Lock()
        self.down: set[str] = set()
        self.started = time.monotonic()
        self.timeline: list[str] = []

    def pick(self, rng: random.Random) -> Node:
        with self.lock:
            up = [n for n in self.nodes if n.name not in self.down]
        return rng.choice(up or self.nodes)

    def note(self, what: str) -> None:
        line = f"+{time.monotonic() - self.started:6.2f}s {what}"
        self.timeline.append(line)
        print(f"  {line}", flush=True)

    def kill(self, node: Node) -> None:
        with self.lock:
            self.down.add(node.name)
        node.kill9()
        self.note(f"kill -9 {node.name}")

    def restart(self, node: Node) -> None:
        node.start()
        with self.lock:
            self.down.discard(node.name)
        self.note(f"{node.name} restarted (port {node.port})")


def relay_holder(nodes: list[Node]) -> tuple[Node | None, str]:
    """The running node that most recently logged taking the relay lease (since its last
    start) and has not logged losing it since; and that line's timestamp."""
    best: tuple[Node | None, str] = (None, "")
    for n in nodes:
        if not n.is_running():
            continue
        text = n.log_text()
        lines = text[text.rfind(f"=== {n.name} start #"):].splitlines()
        hold = [i for i, l in enumerate(lines) if "event relay holds the lease" in l]
        lost = [i for i, l in enumerate(lines) if "event relay lost its lease" in l]
        if hold and (not lost or lost[-1] < hold[-1]):
            ts = lines[hold[-1]].split()[0]
            if ts > best[1]:
                best = (n, ts)
    return best


def wait_for_holder(nodes: list[Node], other_than: str | None, timeout: float) -> Node | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n, _ = relay_holder(nodes)
        if n is not None and n.name != other_than:
            return n
        time.sleep(0.05)
    return None


# ---------------------------------------------------------------------------------------
# The workload
# ---------------------------------------------------------------------------------------


class Client:
    """One thread's HTTP client: a session with a token, each request recorded in the
    ledger with its own X-Request-Id."""

    def __init__(self, fleet: Fleet, ledger: ec.Ledger, rng: random.Random, anomalies: list):
        self.fleet = fleet
        self.ledger = ledger
        self.rng = rng
        self.anomalies = anomalies
        self.session = requests.Session()
        self._login()

    def _login(self) -> None:
        for _ in range(100):
            node = self.fleet.pick(self.rng)
            try:
                self.session.headers["Authorization"] = "Bearer " + fetch_token(node.url)
                return
            except Exception:  # noqa: BLE001 - a node going down; try another
                time.sleep(0.1)
        raise AssertionError("no node gave a token")

    def read(self, path: str) -> requests.Response | None:
        """A GET (no change, not in the ledger) through any live node; None if none answers."""
        for _ in range(50):
            node = self.fleet.pick(self.rng)
            try:
                r = self.session.get(node.url + path, timeout=REQUEST_TIMEOUT)
            except requests.RequestException:
                time.sleep(0.05)
                continue
            if r.status_code == 401:
                self._login()
                continue
            return r
        return None

    def send(self, kind: str, path: str, body: dict, expect) -> tuple[Req, requests.Response | None]:
        """POSTs a change; expect(response or None) -> the events it must have (None: an
        unknown outcome, whose events are what the request asked for)."""
        rid = self.ledger.new_rid(kind)
        node = self.fleet.pick(self.rng)
        req = Req(rid=rid, kind=kind, node=node.name, t0=time.monotonic() - self.ledger.started)
        started = time.monotonic()
        try:
            r = self.session.post(node.url + path, json=body, headers={"X-Request-Id": rid},
                                  timeout=REQUEST_TIMEOUT)
        except requests.RequestException as e:
            req.elapsed = time.monotonic() - started
            req.error = f"{e.__class__.__name__}: {str(e)[:200]}"
            req.outcome = REJECTED if ec.refused(e) else UNKNOWN
            req.expect = expect(None)
            return self.ledger.add(req), None
        req.elapsed = time.monotonic() - started
        req.status = r.status_code
        req.body = r.text[:300]
        if r.headers.get("x-request-id") != rid:
            self.anomalies.append(f"{req}: X-Request-Id echoed as {r.headers.get('x-request-id')!r}")
        if 200 <= r.status_code < 300:
            req.outcome = ACK
            req.expect = expect(r)
        elif 400 <= r.status_code < 500:
            req.outcome = REJECTED
            if r.status_code == 401:
                self._login()
        else:
            req.outcome = UNKNOWN
            req.expect = expect(None)
        return self.ledger.add(req), r


def table_path(ns, name: str) -> str:
    return f"/v1/{CATALOG}/namespaces/{ns_path(list(ns))}/tables/{name}"


def create_namespace(c: Client, levels: tuple, kind: str = "create-namespace"):
    return c.send(kind, f"/v1/{CATALOG}/namespaces", {"namespace": list(levels), "properties": {}},
                  lambda r: [Expect("create-namespace", namespace=levels)])


def create_table(c: Client, ns: tuple, name: str, kind: str = "create-table"):
    def expect(r):
        if r is None:
            return [Expect("create-table", ident=(ns, name))]
        j = r.json()
        return [Expect("create-table", ident=(ns, name), uuid=j["metadata"]["table-uuid"],
                       location=j["metadata-location"])]
    return c.send(kind, f"/v1/{CATALOG}/namespaces/{ns_path(list(ns))}/tables",
                  {"name": name, "schema": simple_schema()}, expect)


def commit(c: Client, kind: str, ns: tuple, name: str, body: dict, snapshots=None):
    def expect(r):
        if r is None:
            return [Expect("update-table", ident=(ns, name), snapshots_added=snapshots)]
        j = r.json()
        return [Expect("update-table", ident=(ns, name), uuid=j["metadata"]["table-uuid"],
                       location=j["metadata-location"], snapshots_added=snapshots)]
    return c.send(kind, table_path(ns, name), body, expect)


class Workload:
    def __init__(self, fleet: Fleet, ledger: ec.Ledger, warehouse: str):
        self.fleet = fleet
        self.ledger = ledger
        self.warehouse = warehouse
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.anomalies: list[str] = []  # client-side surprises (checked after the events)
        self.crashes: list[str] = []  # a worker thread's own exception

    def setup(self) -> None:
        c = Client(self.fleet, self.ledger, random.Random(1), self.anomalies)
        req, _ = create_namespace(c, NS, "setup")
        assert req.outcome == ACK, str(req)
        for t in [HOT, *BLIND_TABLES, *TXN_TABLES]:
            req, _ = create_table(c, NS, t, "setup")
            assert req.outcome == ACK, str(req)

    def start(self) -> None:
        for kind, n in WORKERS.items():
            for w in range(n):
                fn = getattr(self, f"_{kind}")
                self.threads.append(threading.Thread(
                    target=self._run, args=(fn, w), name=f"{kind}-{w}", daemon=True))
        for t in self.threads:
            t.start()

    def finish(self, timeout: float = 60.0) -> None:
        self.stop.set()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self.threads if t.is_alive()]
        assert not alive, f"client threads still running: {alive}"

    def _run(self, fn, w: int) -> None:
        rng = random.Random(hash((fn.__name__, w, time.time())))
        try:
            c = Client(self.fleet, self.ledger, rng, self.anomalies)
            fn(c, w, rng)
        except Exception:  # noqa: BLE001 - reported by the test
            self.crashes.append(f"{fn.__name__}[{w}]: {traceback.format_exc()}")

    def _pause(self, req: Req) -> None:
        if req.status is None:
            time.sleep(0.05)  # a node down: do not spin

    def _creator(self, c: Client, w: int, rng: random.Random) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            if i % 5 == 0:
                # A table in a namespace that does not exist: 404, no event.
                req, r = create_table(c, (f"nowhere_{w}_{i}",), "t", "create-table-404")
                if req.outcome == REJECTED and req.status not in (None, 404):
                    self.anomalies.append(f"expected 404: {req}")
                if req.outcome == ACK:
                    self.anomalies.append(f"table created in a missing namespace: {req}")
                self._pause(req)
                continue
            ns = (f"c{w}_{i}",)
            req, _ = create_namespace(c, ns)
            self._pause(req)
            if req.outcome == REJECTED and req.status is not None:
                self.anomalies.append(f"namespace creation refused: {req}")
            if req.outcome == REJECTED:
                continue
            for name in ("a", "b"):
                req2, _ = create_table(c, ns, name)
                self._pause(req2)
                if req2.outcome == REJECTED and req2.status not in (None, 404) or \
                        req2.status == 404 and req.outcome == ACK:
                    self.anomalies.append(f"table creation refused: {req2}")
            time.sleep(0.01)

    def _blind(self, c: Client, w: int, rng: random.Random) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            t = rng.choice(BLIND_TABLES)
            body = {"requirements": [], "updates": [
                {"action": "set-properties", "updates": {f"b{w}_{i}": str(i)}}]}
            req, _ = commit(c, "blind-commit", NS, t, body)
            self._pause(req)
            if req.outcome == REJECTED and req.status is not None:
                self.anomalies.append(f"blind commit refused: {req}")

    def _append(self, c: Client, w: int, rng: random.Random) -> None:
        while not self.stop.is_set():
            r = c.read(table_path(NS, HOT))
            if r is None or r.status_code != 200:
                if r is not None:
                    self.anomalies.append(f"load {HOT}: {r.status_code} {r.text[:200]}")
                time.sleep(0.05)
                continue
            meta = r.json()["metadata"]
            ref = (meta.get("refs") or {}).get("main")
            head = ref["snapshot-id"] if ref else None
            snap = rng.getrandbits(62) or 1
            snapshot = {
                "snapshot-id": snap, "sequence-number": meta["last-sequence-number"] + 1,
                "timestamp-ms": int(time.time() * 1000),
                "manifest-list": f"{self.warehouse}/fake/snap-{snap}.avro",
                "summary": {"operation": "append"}, "schema-id": 0,
            }
            if head is not None:
                snapshot["parent-snapshot-id"] = head
            body = {
                "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": head}],
                "updates": [{"action": "add-snapshot", "snapshot": snapshot},
                            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                             "snapshot-id": snap}],
            }
            req, _ = commit(c, "append", NS, HOT, body, snapshots=[snap])
            self._pause(req)
            if req.outcome == REJECTED and req.status not in (None, 409):
                self.anomalies.append(f"append: {req}")

    def _txn(self, c: Client, w: int, rng: random.Random) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            tables = rng.sample(TXN_TABLES, rng.choice([2, 2, 3]))
            bad = rng.random() < 0.25
            label = f"txn{w}_{i}"
            changes = [{"identifier": {"namespace": list(NS), "name": t}, "requirements": [],
                        "updates": [{"action": "set-properties", "updates": {label: "1"}}]}
                       for t in tables]
            if bad:
                changes[-1]["requirements"] = [
                    {"type": "assert-current-schema-id", "current-schema-id": 999}]
            req, _ = c.send("bad-transaction" if bad else "transaction",
                            f"/v1/{CATALOG}/transactions/commit", {"table-changes": changes},
                            lambda r: [Expect("update-table", ident=(NS, t)) for t in tables])
            self._pause(req)
            if bad and req.outcome == ACK:
                self.anomalies.append(f"a transaction with a failing requirement was acknowledged: {req}")
            if req.outcome == REJECTED and req.status is not None and (not bad or req.status != 409):
                self.anomalies.append(f"transaction: {req}")


# ---------------------------------------------------------------------------------------
# The run and the verdict
# ---------------------------------------------------------------------------------------


def sleep_until(fleet: Fleet, t: float) -> None:
    time.sleep(max(0.0, fleet.started + t - time.monotonic()))


def restart_broker_down(broker, fleet: Fleet) -> None:
    broker.stop()
    fleet.note(f"{broker.kind} broker stopped")


def restart_broker_up(broker, fleet: Fleet) -> threading.Thread:
    """Starts the broker again in the background (Kafka takes several seconds to come
    back) so that the schedule goes on; join the thread before the verdict."""
    failed: list[BaseException] = []

    def run():
        try:
            broker.start()
            fleet.note(f"{broker.kind} broker started again")
        except BaseException as e:  # noqa: BLE001 - re-raised by join_broker
            failed.append(e)
    t = threading.Thread(target=run, name="broker-start", daemon=True)
    t.failed = failed
    fleet.note(f"{broker.kind} broker starting")
    t.start()
    return t


def join_broker(t: threading.Thread | None) -> None:
    if t is None:
        return
    t.join(180)
    assert not t.is_alive(), "the broker did not start again within 180 s"
    if t.failed:
        raise t.failed[0]


def verdict(fleet: Fleet, ledger: ec.Ledger, workload: Workload, broker) -> None:
    """Drains, consumes, checks; prints the summary; asserts."""
    t0 = time.monotonic()
    for n in fleet.nodes:  # every node up again
        if not n.is_running():
            fleet.restart(n)
    session = requests.Session()
    session.headers["Authorization"] = "Bearer " + fetch_token(fleet.nodes[0].url)
    rest = ec.rest_events(session, fleet.nodes[0].url, CATALOG)
    last = max((e["position"] for e in rest), default=0)

    def drained(messages) -> bool:
        return {m.event.get("position") for m in messages} >= set(range(1, last + 1))

    messages = broker.read(drained, DRAIN_TIMEOUT)
    drain_s = time.monotonic() - t0
    # Nothing changes any more: the REST view again, through the other node too.
    rest_again = ec.rest_events(session, fleet.nodes[-1].url, CATALOG)
    assert [e["event-id"] for e in rest_again] == [e["event-id"] for e in rest], \
        "the REST events changed after the workload ended (or differ between nodes)"

    # Where every table is now (for the history chains).
    where: dict[str, tuple] = {}
    for e in rest:
        op = e["operation"]
        if op.get("table-uuid") and op.get("identifier"):
            where[op["table-uuid"]] = (tuple(op["identifier"]["namespace"]), op["identifier"]["name"])
    current: dict[str, str] = {}
    load_problems = []
    for u, (ns, name) in where.items():
        r = session.get(fleet.nodes[0].url + table_path(ns, name), timeout=REQUEST_TIMEOUT)
        if r.status_code != 200:
            load_problems.append(f"{'.'.join(ns)}.{name}: {r.status_code} {r.text[:200]}")
            continue
        j = r.json()
        if j["metadata"]["table-uuid"] == u:
            current[u] = j["metadata-location"]

    report = ec.check(broker.kind, ledger, messages, rest, current, CATALOG)
    leases = {n.name: len(n.log_grep("event relay holds the lease", 1000)) for n in fleet.nodes}
    refusals = {n.name: len(n.log_grep("event broker refused a batch", 100000)) for n in fleet.nodes}
    report.stats["relay lease taken (per node log)"] = leases
    report.stats["'event broker refused a batch' warnings"] = refusals
    report.stats["drain + consume"] = f"{drain_s:.1f}s"
    print("\n  timeline:\n    " + "\n    ".join(fleet.timeline))
    print(report.summary(), flush=True)

    with ledger.lock:
        reqs = list(ledger.reqs)
    server_errors = [str(r) for r in reqs if r.status is not None and r.status >= 500]
    assert not report.failures, report.summary()
    assert not workload.crashes, "\n".join(workload.crashes[:5])
    assert not load_problems, "tables with events could not be loaded:\n" + "\n".join(load_problems[:10])
    assert not server_errors, f"{len(server_errors)} 5xx answers:\n" + "\n".join(server_errors[:20])
    assert not workload.anomalies, f"{len(workload.anomalies)} unexpected answers:\n" + \
        "\n".join(workload.anomalies[:20])
    counts = ledger.counts()
    assert counts[ACK] >= 100, f"too little progress: {dict(counts)}"
    kinds = ledger.by_kind()
    assert kinds.get("append", {}).get(REJECTED, 0) > 0, f"no contended append was rejected: {kinds}"


def run_with_faults(nodes, warehouse: str, broker, faults) -> None:
    """Runs the workload on `nodes` for RUN_S while `faults(fleet, s, pending)` follows
    its schedule (written for a 26 s run: `s` scales it; a broker start still under way
    goes in `pending`), then checks what the broker delivered."""
    fleet = Fleet(nodes)
    ledger = ec.Ledger()
    workload = Workload(fleet, ledger, warehouse)
    workload.setup()
    fleet.started = ledger.started = time.monotonic()
    fleet.note(f"workload starts ({sum(WORKERS.values())} client threads, {RUN_S:.0f}s)")
    workload.start()
    pending: list = []
    try:
        faults(fleet, RUN_S / 26.0, pending)
        sleep_until(fleet, RUN_S)
    finally:
        workload.finish()
        fleet.note("workload stopped")
        for starting in pending:
            join_broker(starting)
    verdict(fleet, ledger, workload, broker)


def test_two_nodes_on_postgres(floe_binary, broker, _mn_tmp):
    """Two nodes over PostgreSQL: the relay holder killed, the broker restarted, and the
    next holder killed while the broker is down."""
    work = Path(tempfile.mkdtemp(prefix="evchk.", dir=_mn_tmp))
    cluster = Cluster(floe_binary, work, "evchk", 2)
    for n in cluster.nodes:
        n.extra_args += events_args(broker)
    try:
        cluster.start()

        def faults(fleet: Fleet, s: float, pending: list) -> None:
            sleep_until(fleet, 4 * s)
            h1 = wait_for_holder(cluster.nodes, None, 10) or cluster.nodes[0]
            fleet.note(f"relay lease held by {h1.name}")
            fleet.kill(h1)
            h = wait_for_holder(cluster.nodes, h1.name, 3 * LEASE_S + 5)
            fleet.note(f"relay lease taken over by {h.name if h else 'nobody (!)'}")
            sleep_until(fleet, 8 * s)
            fleet.restart(h1)
            sleep_until(fleet, 12 * s)
            restart_broker_down(broker, fleet)
            sleep_until(fleet, 14 * s)
            h2 = relay_holder(cluster.nodes)[0] or cluster.nodes[1]
            fleet.note(f"relay lease held by {h2.name}")
            fleet.kill(h2)
            sleep_until(fleet, 16 * s)
            pending.append(restart_broker_up(broker, fleet))
            sleep_until(fleet, 19 * s)
            fleet.restart(h2)

        run_with_faults(cluster.nodes, cluster.warehouse, broker, faults)
    finally:
        cluster.stop()


def test_embedded_node(broker):
    """One node on the embedded store, killed and restarted twice (once while the broker
    is down)."""
    binary = floe_bin()
    work = Path(tempfile.mkdtemp(prefix="floe-evchk-embedded."))
    (work / "warehouse").mkdir()
    node = EmbeddedNode("node0", binary, "", f"file://{work / 'warehouse'}", work / "data",
                        work / "floe.log", events_args(broker))
    live_nodes.append(node)
    try:
        node.start()

        def faults(fleet: Fleet, s: float, pending: list) -> None:
            sleep_until(fleet, 5 * s)
            fleet.kill(node)
            sleep_until(fleet, 6 * s)
            fleet.restart(node)
            sleep_until(fleet, 11 * s)
            restart_broker_down(broker, fleet)
            sleep_until(fleet, 13 * s)
            fleet.kill(node)
            sleep_until(fleet, 14 * s)
            fleet.restart(node)
            sleep_until(fleet, 16 * s)
            pending.append(restart_broker_up(broker, fleet))

        run_with_faults([node], node.warehouse, broker, faults)
    finally:
        node.terminate()
        if node in live_nodes:
            live_nodes.remove(node)
        if not _keep():
            shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# The checker checks: synthetic deliveries it must pass and fail (no server, no broker)
# ---------------------------------------------------------------------------------------


def _synthetic():
    """A ledger (create a table, commit to it, a rejected commit) and its two events."""
    import json as _json
    ledger = ec.Ledger()
    ident = (NS, "t")
    u = "0190f0f0-0000-7000-8000-000000000001"
    ledger.add(Req("r-create", "create-table", "n", ACK, 200,
                   expect=[Expect("create-table", ident=ident, uuid=u, location="m1")]))
    ledger.add(Req("r-commit", "blind-commit", "n", ACK, 200,
                   expect=[Expect("update-table", ident=ident, uuid=u, location="m2")]))
    ledger.add(Req("r-409", "append", "n", REJECTED, 409))
    ledger.add(Req("r-lost", "append", "n", UNKNOWN, None,
                   expect=[Expect("update-table", ident=ident)]))

    def event(pos, seq, op, rid, loc, before=None):
        data = {"operation-type": op, "catalog": CATALOG,
                "identifier": {"namespace": list(NS), "name": "t"}, "table-uuid": u,
                "metadata-location": loc, "principal": "p", "request-id": rid,
                "request-event-count": 1}
        if before:
            data["metadata-location-before"] = before
        return {"position": pos, "entityseq": seq, "specversion": "1.0", "id": f"e{pos}",
                "source": f"/catalogs/{CATALOG}", "type": f"dev.floe.{op}",
                "subject": "ev.t", "data": data}

    events = [event(1, 1, "create-table", "r-create", "m1"),
              event(2, 2, "update-table", "r-commit", "m2", "m1")]

    def msg(e, offset, lane="partition-0"):
        payload = _json.dumps(e).encode()
        return ec.Message(lane, offset, e["id"], f"object:{u}", None, payload, _json.loads(payload))

    def rest_of(es):
        out = []
        for e in es:
            d = dict(e["data"])
            out.append({"event-id": e["id"], "request-id": d.pop("request-id"),
                        "position": e["position"], "entity-sequence": e["entityseq"],
                        "operation": d})
        return out
    return ledger, events, msg, rest_of, event, u


def test_checker_finds_what_it_must():
    ledger, events, msg, rest_of, event, u = _synthetic()
    rest = rest_of(events)
    now = {u: "m2"}

    def verdict_of(messages, rest=rest, now=now):
        return set(ec.check("kafka", ledger, messages, rest, now).failures)

    good = [msg(events[0], 0), msg(events[1], 1)]
    assert verdict_of(good) == set()
    # A redelivery of the same id, same bytes, after later events: allowed.
    assert verdict_of(good + [msg(events[0], 2), msg(events[1], 3)]) == set()
    # The acknowledged commit's event never delivered.
    assert "missing" in verdict_of([msg(events[0], 0)])
    # Out of order within the table.
    assert {"entity order", "position order"} <= verdict_of([msg(events[1], 0), msg(events[0], 1)])
    # A "duplicate" whose bytes differ (another position under the same id).
    changed = dict(events[0], position=7)
    assert "duplicates" in verdict_of(good + [msg(changed, 2)])
    # The broker's dedupe id is not the event id.
    bad_id = msg(events[1], 1)
    bad_id.dedupe_id = "something-else"
    assert "dedupe id" in verdict_of([msg(events[0], 0), bad_id])
    # An event for the rejected request (and so a table history that no longer chains).
    ghost = event(3, 3, "update-table", "r-409", "m3", "m2")
    found = verdict_of(good + [msg(ghost, 2)], rest=rest_of(events + [ghost]), now={u: "m3"})
    assert "event for rejected" in found
    # The unknown request's event may be there (all of it) and then it chains.
    lost = event(3, 3, "update-table", "r-lost", "m3", "m2")
    assert verdict_of(good + [msg(lost, 2)], rest=rest_of(events + [lost]), now={u: "m3"}) == set()
    # Same event in two partitions.
    assert "lanes" in verdict_of(good + [msg(events[1], 0, "partition-1")])
    # A gap: the REST endpoint has an event the broker never got.
    extra = event(3, 3, "update-table", "r-lost", "m3", "m2")
    assert "missing" in verdict_of(good, rest=rest_of(events + [extra]), now={u: "m3"})
