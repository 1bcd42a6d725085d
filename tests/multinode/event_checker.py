"""The change-event checker: compares what a broker's consumers received with what the
catalog's clients were told, for tests/multinode/test_events_checker.py.

Three parts:

- `Ledger`: every mutating request a workload sent, each with its own X-Request-Id
  (Floe honours a client's id and writes it into every event of the request as
  `data.request-id`), classified as
    * acknowledged (2xx): the events it must have, exactly (operation, table uuid,
      identifier, namespace, new metadata-location, snapshots added);
    * rejected: a definite 4xx, or a connection the server never accepted (refused), so
      certainly no change: it must have no event at all;
    * unknown: no answer (connection reset or timeout while a node was killed) or a 5xx:
      it may have committed; if it did, all of its events must be there (all or none).
- Brokers (`NatsBroker`, `KafkaBroker`): start, stop and restart a test broker with the
  scripts in scripts/, and read back everything it stored, in delivery order (the
  JetStream stream in stream-sequence order; each Kafka partition in offset order).
- `check`: the verdict. Let "first occurrence" be a message whose event id was not
  delivered earlier in the same order (the whole stream for NATS, the partition for
  Kafka). The checks:
    1. dedupe ids: every message's broker dedupe id (NATS `Nats-Msg-Id`, Kafka `ce_id`)
       is its event's `id`; a Kafka record's key is its event's entity;
    2. duplicates are exact re-deliveries: every message of an id after the first has the
       same bytes as the first (same position, entityseq, body); nothing else repeats;
       on NATS there are none at all (JetStream drops a repeated Nats-Msg-Id);
    3. per-entity order: for every entity (a table's uuid, a namespace, ...), the first
       occurrences of its events, in delivery order, have entityseq exactly 1, 2, ..., n
       and strictly increasing positions (a consumer that drops repeated ids sees each
       table's history complete and in order);
    4. global order: the first occurrences' positions strictly increase in the stream
       (NATS) or in each partition (Kafka), and one entity's events stay in one
       partition;
    5. complete: the distinct events' positions are exactly 1..last, where last is the
       last position the REST events endpoint shows (positions are gap-free);
    6. the broker's events are the REST endpoint's events (same ids, positions,
       entity sequences, request ids) plus only events outside the catalog;
    7. 0 missing: every acknowledged request has exactly its expected events, each once;
       0 for rejected: no rejected request has any event; unknown: all or nothing;
       no table/namespace event belongs to no request of the ledger;
    8. each table's history chains: in entityseq order, every event's
       metadata-location-before is the previous event's metadata-location, the first is
       its create-table, and the last names the metadata-location the table has now.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
NATS_SCRIPT = ROOT / "scripts" / "nats-server.sh"
KAFKA_SCRIPT = ROOT / "scripts" / "kafka-server.sh"

NATS_STREAM = "FLOE_EVENTS"
NATS_SUBJECT = "floe.events"
KAFKA_TOPIC = "floe-events"


# ---------------------------------------------------------------------------------------
# The ledger: what clients were told
# ---------------------------------------------------------------------------------------

ACK, REJECTED, UNKNOWN = "acknowledged", "rejected", "unknown"


@dataclass
class Expect:
    """One event an acknowledged request must have."""
    op: str  # operation-type
    ident: tuple | None = None  # (namespace levels tuple, name) of a table
    namespace: tuple | None = None  # levels of a namespace event
    uuid: str | None = None  # table-uuid
    location: str | None = None  # new metadata-location
    snapshots_added: list | None = None

    def matches(self, data: dict) -> bool:
        if data.get("operation-type") != self.op:
            return False
        if self.ident is not None:
            i = data.get("identifier") or {}
            if (tuple(i.get("namespace", ())), i.get("name")) != self.ident:
                return False
        if self.namespace is not None and tuple(data.get("namespace") or ()) != self.namespace:
            return False
        if self.uuid is not None and data.get("table-uuid") != self.uuid:
            return False
        if self.location is not None and data.get("metadata-location") != self.location:
            return False
        if self.snapshots_added is not None and \
                sorted(data.get("snapshots-added") or []) != sorted(self.snapshots_added):
            return False
        return True

    def __str__(self) -> str:
        parts = [self.op]
        if self.ident:
            parts.append(".".join(self.ident[0] + (self.ident[1],)))
        if self.namespace:
            parts.append(".".join(self.namespace))
        if self.location:
            parts.append(self.location.rsplit("/", 1)[-1])
        return " ".join(parts)


@dataclass
class Req:
    rid: str
    kind: str
    node: str
    outcome: str = UNKNOWN
    status: int | None = None
    error: str | None = None
    # Acknowledged: exactly these events. Unknown: these, or none (filled in from the
    # request where the response would have said more).
    expect: list = field(default_factory=list)
    t0: float = 0.0
    elapsed: float = 0.0
    body: str = ""

    def __str__(self) -> str:
        got = f"{self.status} {self.body[:200]}" if self.status is not None else self.error
        return f"{self.kind} [{self.rid}] via {self.node} at +{self.t0:.2f}s: {self.outcome} ({got})"


def refused(exc: BaseException) -> bool:
    """Whether a requests exception means the TCP connection was never established (the
    server never saw the request: refused, as by a killed node's closed port), as opposed
    to a reset or timeout after the request was sent."""
    from urllib3.exceptions import NewConnectionError

    seen = set()
    todo: list = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen or not isinstance(e, BaseException):
            continue
        seen.add(id(e))
        if isinstance(e, (ConnectionRefusedError, NewConnectionError)):
            return True
        todo += [e.__cause__, e.__context__, getattr(e, "reason", None), *e.args]
    return False


class Ledger:
    def __init__(self):
        self.lock = threading.Lock()
        self.reqs: list[Req] = []
        self.started = time.monotonic()

    def new_rid(self, kind: str) -> str:
        return f"evchk-{kind}-{uuid.uuid4().hex[:16]}"

    def add(self, req: Req) -> Req:
        with self.lock:
            self.reqs.append(req)
        return req

    def counts(self) -> Counter:
        with self.lock:
            return Counter(r.outcome for r in self.reqs)

    def by_kind(self) -> dict:
        out: dict = defaultdict(Counter)
        with self.lock:
            for r in self.reqs:
                out[r.kind][r.outcome] += 1
        return {k: dict(v) for k, v in sorted(out.items())}


# ---------------------------------------------------------------------------------------
# Brokers
# ---------------------------------------------------------------------------------------


@dataclass
class Message:
    """One stored broker message, in delivery order within `lane` (the NATS stream, or a
    Kafka partition) at `offset`."""
    lane: str
    offset: int
    dedupe_id: str | None
    key: str | None  # Kafka record key
    subject: str | None  # NATS subject
    payload: bytes
    event: dict


def _script(script: Path, *args: str, timeout: float = 180.0) -> str:
    r = subprocess.run(["bash", str(script), *args], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise AssertionError(f"{script.name} {' '.join(args)} failed ({r.returncode}):\n"
                             f"{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return r.stdout.strip()


class Broker:
    kind = "?"
    script: Path

    def __init__(self, directory: Path, port: int):
        self.dir = directory
        self.port = port
        self.starts = 0

    def start(self) -> "Broker":
        _script(self.script, "start", str(self.dir), str(self.port))
        self.starts += 1
        return self

    def stop(self) -> None:
        _script(self.script, "stop", str(self.dir), timeout=90)

    @property
    def sink_url(self) -> str:
        raise NotImplementedError

    def read(self, done, timeout: float) -> list[Message]:
        """Everything stored, in delivery order; reads on until done(messages) or timeout."""
        raise NotImplementedError


class NatsBroker(Broker):
    kind = "nats"
    script = NATS_SCRIPT

    @property
    def sink_url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def read(self, done, timeout: float) -> list[Message]:
        return asyncio.run(self._read(done, timeout))

    async def _read(self, done, timeout: float) -> list[Message]:
        import nats
        from nats.js.api import DeliverPolicy
        from nats.errors import TimeoutError as NatsTimeout

        deadline = time.monotonic() + timeout
        nc = await nats.connect(self.sink_url, connect_timeout=5, max_reconnect_attempts=5)
        try:
            js = nc.jetstream()
            while True:  # the relay creates the stream; it may not exist yet
                try:
                    await js.stream_info(NATS_STREAM)
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise AssertionError(f"no JetStream stream {NATS_STREAM} within {timeout}s")
                    await asyncio.sleep(0.5)
            sub = await js.subscribe(f"{NATS_SUBJECT}.>", stream=NATS_STREAM,
                                     ordered_consumer=True, deliver_policy=DeliverPolicy.ALL)
            messages: list[Message] = []
            while True:
                try:
                    msg = await sub.next_msg(timeout=1.0)
                except NatsTimeout:
                    if done(messages) or time.monotonic() > deadline:
                        return messages
                    continue
                headers = msg.headers or {}
                messages.append(Message(
                    lane="stream", offset=msg.metadata.sequence.stream,
                    dedupe_id=headers.get("Nats-Msg-Id"), key=None, subject=msg.subject,
                    payload=bytes(msg.data), event=json.loads(msg.data)))
        finally:
            await nc.close()


class KafkaBroker(Broker):
    kind = "kafka"
    script = KAFKA_SCRIPT

    @property
    def sink_url(self) -> str:
        return f"kafka://127.0.0.1:{self.port}"

    def read(self, done, timeout: float) -> list[Message]:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        deadline = time.monotonic() + timeout
        consumer = Consumer({
            "bootstrap.servers": f"127.0.0.1:{self.port}",
            "group.id": f"evchk-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
        })
        try:
            partitions = None
            while partitions is None:  # the topic appears with the relay's first record
                md = consumer.list_topics(KAFKA_TOPIC, timeout=5)
                t = md.topics.get(KAFKA_TOPIC)
                if t is not None and t.error is None and t.partitions:
                    partitions = sorted(t.partitions)
                elif time.monotonic() > deadline:
                    raise AssertionError(f"no Kafka topic {KAFKA_TOPIC} within {timeout}s")
                else:
                    time.sleep(0.5)
            consumer.assign([TopicPartition(KAFKA_TOPIC, p, OFFSET_BEGINNING) for p in partitions])
            messages: list[Message] = []
            while True:
                batch = consumer.consume(num_messages=1000, timeout=1.0)
                for m in batch:
                    if m.error():
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            continue
                        raise AssertionError(f"Kafka consumer error: {m.error()}")
                    headers = dict((k, v.decode() if v is not None else None)
                                   for k, v in (m.headers() or []))
                    messages.append(Message(
                        lane=f"partition-{m.partition()}", offset=m.offset(),
                        dedupe_id=headers.get("ce_id"),
                        key=m.key().decode() if m.key() is not None else None,
                        subject=None, payload=m.value(), event=json.loads(m.value())))
                if not batch and (done(messages) or time.monotonic() > deadline):
                    return messages
        finally:
            consumer.close()


BROKERS = {"nats": NatsBroker, "kafka": KafkaBroker}


# ---------------------------------------------------------------------------------------
# The REST events endpoint
# ---------------------------------------------------------------------------------------


def rest_events(session: requests.Session, base_url: str, catalog: str = "default") -> list[dict]:
    """Every event of the catalog, page by page, through POST /v1/{prefix}/events."""
    events: list[dict] = []
    token = None
    for _ in range(10_000):
        body = {"page-size": 1000}
        if token:
            body["continuation-token"] = token
        r = session.post(f"{base_url}/v1/{catalog}/events", json=body, timeout=60)
        assert r.status_code == 200, f"POST /v1/{catalog}/events -> {r.status_code} {r.text[:500]}"
        page = r.json()
        events += page["events"]
        token = page.get("continuation-token")
        if not page["events"]:
            return events
    raise AssertionError("more than 10000 pages of events")


# ---------------------------------------------------------------------------------------
# The verdict
# ---------------------------------------------------------------------------------------


def entity_of(event: dict) -> str:
    """The per-entity sequence key of an event, from its body (Floe's `entity`, except
    that a namespace is named by its catalog's source rather than its id)."""
    data = event.get("data") or {}
    if data.get("table-uuid"):
        return f"object:{data['table-uuid']}"
    if data.get("view-uuid"):
        return f"object:{data['view-uuid']}"
    op = data.get("operation-type", "")
    if "namespace" in op:
        return f"namespace:{event.get('source')}:" + "\x1f".join(data.get("namespace") or [])
    if op.startswith("x-floe-") and "catalog" in op:
        return f"catalog:{event.get('subject')}"
    if op == "x-floe-update-security":
        return "security"
    return f"other:{op}"


def kafka_key_matches(key: str | None, event: dict) -> bool:
    entity = entity_of(event)
    if entity.startswith("object:"):
        return key == entity
    if entity.startswith("namespace:"):
        levels = "\x1f".join((event.get("data") or {}).get("namespace") or [])
        return key is not None and key.startswith("namespace:") and key.endswith(":" + levels)
    if entity.startswith("catalog:"):
        return key is not None and key.startswith("catalog:")
    return key == entity


@dataclass
class Report:
    broker: str
    failures: dict = field(default_factory=lambda: defaultdict(list))
    stats: dict = field(default_factory=dict)

    def fail(self, category: str, message: str) -> None:
        self.failures[category].append(message)

    def summary(self) -> str:
        lines = [f"events checker ({self.broker}):"]
        for k, v in self.stats.items():
            lines.append(f"  {k}: {v}")
        if self.failures:
            lines.append("  FAILURES:")
            for cat, items in self.failures.items():
                lines.append(f"    {cat}: {len(items)}")
                for m in items[:15]:
                    lines.append(f"      - {m}")
        else:
            lines.append("  all checks passed")
        return "\n".join(lines)


def check(broker: str, ledger: Ledger, messages: list[Message], rest: list[dict],
          current_locations: dict, catalog: str = "default") -> Report:
    """The verdict (see the module docstring for the rules). current_locations: table
    uuid -> the metadata-location the table has now (loaded after the run)."""
    rep = Report(broker)
    source = f"/catalogs/{catalog}"

    # 1, 2: dedupe ids, keys, exact duplicates.
    first: dict[str, Message] = {}
    duplicates = 0
    for m in messages:
        eid = m.event.get("id")
        if m.dedupe_id != eid:
            rep.fail("dedupe id", f"{m.lane}@{m.offset}: dedupe id {m.dedupe_id!r} != event id {eid!r}")
        if broker == "kafka" and not kafka_key_matches(m.key, m.event):
            rep.fail("kafka key", f"{m.lane}@{m.offset}: key {m.key!r} for entity {entity_of(m.event)!r}")
        if broker == "nats":
            data = m.event.get("data") or {}
            if not (m.subject or "").endswith("." + str(data.get("operation-type"))):
                rep.fail("nats subject", f"@{m.offset}: subject {m.subject} for {data.get('operation-type')}")
        if eid in first:
            duplicates += 1
            if m.payload != first[eid].payload:
                rep.fail("duplicates", f"{m.lane}@{m.offset} repeats id {eid} of "
                         f"{first[eid].lane}@{first[eid].offset} with different bytes")
        else:
            first[eid] = m

    if broker == "nats" and duplicates:
        # JetStream drops a message whose Nats-Msg-Id it stored within the stream's
        # duplicate window (10 minutes): a consumer should never see a repeat.
        rep.fail("nats dedupe", f"{duplicates} messages repeat an event id the stream already held")

    # 3, 4: order, per entity and per lane, over first occurrences.
    lanes: dict[str, list[Message]] = defaultdict(list)
    for m in messages:
        lanes[m.lane].append(m)
    seen: set[str] = set()
    entity_lane: dict[str, str] = {}
    entity_seqs: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for lane, ms in lanes.items():
        last_pos = 0
        seen_lane: set[str] = set()
        for m in ms:
            eid = m.event["id"]
            if eid in seen_lane:
                continue
            seen_lane.add(eid)
            pos = m.event.get("position")
            if not isinstance(pos, int) or pos <= last_pos:
                rep.fail("position order", f"{lane}@{m.offset}: position {pos} after {last_pos} "
                         f"(first delivery of {eid}, {m.event.get('type')})")
            last_pos = max(last_pos, pos if isinstance(pos, int) else last_pos)
            if eid in seen:
                rep.fail("lanes", f"event {eid} first-delivered in more than one lane")
                continue
            seen.add(eid)
            ent = entity_of(m.event)
            if entity_lane.setdefault(ent, lane) != lane:
                rep.fail("entity lane", f"entity {ent} in {entity_lane[ent]} and {lane}")
            entity_seqs[ent].append((m.event.get("entityseq"), pos, f"{lane}@{m.offset}"))
    for ent, seqs in entity_seqs.items():
        got = [s for s, _, _ in seqs]
        if got != list(range(1, len(got) + 1)):
            bad = next(i for i, s in enumerate(got) if s != i + 1)
            rep.fail("entity order", f"{ent}: entityseq in delivery order {got[max(0, bad - 3):bad + 4]} "
                     f"(expected {bad + 1} at {seqs[bad][2]})")
        poss = [p for _, p, _ in seqs]
        if any(b <= a for a, b in zip(poss, poss[1:])):
            rep.fail("entity order", f"{ent}: positions not increasing in delivery order")

    events = {eid: m.event for eid, m in first.items()}

    # 5: complete, gap-free.
    rest_last = max((e["position"] for e in rest), default=0)
    positions = Counter(e.get("position") for e in events.values())
    dup_pos = [p for p, c in positions.items() if c > 1]
    if dup_pos:
        rep.fail("positions", f"positions held by several event ids: {sorted(dup_pos)[:20]}")
    top = max(positions, default=0)
    missing_pos = sorted(set(range(1, max(top, rest_last) + 1)) - set(positions))
    if missing_pos:
        rep.fail("missing", f"{len(missing_pos)} positions never delivered (of 1..{max(top, rest_last)}): "
                 f"{missing_pos[:30]}")
    if top > rest_last and any(e.get("source") == source and e["position"] > rest_last
                               for e in events.values()):
        rep.fail("rest", f"the broker has catalog events past the REST endpoint's last position {rest_last}")

    # 6: broker == REST.
    rest_by_id = {e["event-id"]: e for e in rest}
    if len(rest_by_id) != len(rest):
        rep.fail("rest", f"the REST endpoint repeats event ids ({len(rest)} events, {len(rest_by_id)} ids)")
    broker_catalog_ids = {eid for eid, e in events.items() if e.get("source") == source}
    only_rest = set(rest_by_id) - set(events)
    only_broker = broker_catalog_ids - set(rest_by_id)
    if only_rest:
        rep.fail("missing", f"{len(only_rest)} events the REST endpoint has were never delivered: "
                 + ", ".join(f"{i} (position {rest_by_id[i]['position']})" for i in sorted(only_rest)[:10]))
    if only_broker:
        rep.fail("rest", f"{len(only_broker)} delivered catalog events the REST endpoint lacks: "
                 f"{sorted(only_broker)[:10]}")
    for eid in set(rest_by_id) & set(events):
        r, b = rest_by_id[eid], events[eid]
        if (r["position"], r["entity-sequence"], r["request-id"]) != \
                (b.get("position"), b.get("entityseq"), (b.get("data") or {}).get("request-id")):
            rep.fail("rest", f"{eid}: REST (position, entity-sequence, request-id) "
                     f"{(r['position'], r['entity-sequence'], r['request-id'])} != broker "
                     f"{(b.get('position'), b.get('entityseq'), (b.get('data') or {}).get('request-id'))}")

    # 7: the ledger.
    by_rid: dict[str, list[dict]] = defaultdict(list)
    for e in events.values():
        by_rid[(e.get("data") or {}).get("request-id")].append(e)
    with ledger.lock:
        reqs = list(ledger.reqs)
    rids = {r.rid for r in reqs}
    unknown_committed = 0
    for r in reqs:
        got = by_rid.get(r.rid, [])
        if r.outcome == REJECTED:
            if got:
                rep.fail("event for rejected", f"{r}: {len(got)} event(s), e.g. {describe_event(got[0])}")
            continue
        if r.outcome == UNKNOWN and not got:
            continue
        problem = match_expected(r.expect, got)
        if problem:
            cat = "missing" if r.outcome == ACK and len(got) < len(r.expect) else "mismatch"
            rep.fail(cat, f"{r}: {problem}")
        if r.outcome == UNKNOWN:
            unknown_committed += 1
    unexplained = [e for rid, es in by_rid.items() if rid not in rids for e in es]
    foreign = [e for e in unexplained
               if not (e.get("data") or {}).get("operation-type", "").startswith("x-floe-")]
    if foreign:
        rep.fail("unexplained", f"{len(foreign)} table/namespace events of no request the workload "
                 f"sent, e.g. {describe_event(foreign[0])}")

    # 8: each table's history chains, and ends where the table is now.
    tables: dict[str, list[dict]] = defaultdict(list)
    for e in events.values():
        u = (e.get("data") or {}).get("table-uuid")
        if u:
            tables[u].append(e)
    for u, es in tables.items():
        es.sort(key=lambda e: e.get("entityseq", 0))
        if es[0]["data"].get("operation-type") != "create-table":
            rep.fail("chain", f"table {u}: first event is {es[0]['data'].get('operation-type')}")
        for a, b in zip(es, es[1:]):
            if b["data"].get("metadata-location-before") != a["data"].get("metadata-location"):
                rep.fail("chain", f"table {u}: entityseq {b.get('entityseq')} starts from "
                         f"{b['data'].get('metadata-location-before')} but {a.get('entityseq')} "
                         f"ended at {a['data'].get('metadata-location')}")
        now = current_locations.get(u)
        if now is not None and es[-1]["data"].get("metadata-location") != now:
            rep.fail("chain", f"table {u}: last event (entityseq {es[-1].get('entityseq')}) says "
                     f"{es[-1]['data'].get('metadata-location')}, the table is at {now}")
    not_loaded = set(tables) - set(current_locations)
    if not_loaded:
        rep.fail("chain", f"{len(not_loaded)} tables with events could not be loaded at the end")

    counts = Counter(r.outcome for r in reqs)
    rep.stats.update({
        "requests": f"{len(reqs)} ({counts[ACK]} acknowledged, {counts[REJECTED]} rejected, "
                    f"{counts[UNKNOWN]} unknown of which {unknown_committed} committed)",
        "by kind": ledger.by_kind(),
        "status codes": dict(sorted(Counter(str(r.status) for r in reqs).items())),
        "messages received": len(messages),
        "distinct events": len(events),
        "duplicates (same id redelivered)": duplicates,
        "REST events": len(rest),
        "last position": max(top, rest_last),
        "lanes": {lane: len(ms) for lane, ms in sorted(lanes.items())},
        "entities": len(entity_seqs),
        "tables": len(tables),
        "events of no workload request (bootstrap)": Counter(
            (e.get("data") or {}).get("operation-type") for e in unexplained),
    })
    return rep


def match_expected(expect: list[Expect], got: list[dict]) -> str | None:
    """None if the events are exactly the expected ones (each matched once, and each
    knowing its request's event count); else what is wrong."""
    if len(got) != len(expect):
        return (f"expected {len(expect)} event(s) [{'; '.join(map(str, expect))}], "
                f"got {len(got)} [{'; '.join(describe_event(e) for e in got)}]")
    left = list(got)
    for x in expect:
        hit = next((e for e in left if x.matches(e.get("data") or {})), None)
        if hit is None:
            return (f"no event matches [{x}] among [{'; '.join(describe_event(e) for e in left)}]")
        left.remove(hit)
    counts = {(e.get("data") or {}).get("request-event-count") for e in got}
    if counts != {len(expect)}:
        return f"request-event-count {counts} for {len(expect)} events"
    return None


def describe_event(e: dict) -> str:
    d = e.get("data") or {}
    what = e.get("subject")
    loc = (d.get("metadata-location") or "").rsplit("/", 1)[-1]
    return (f"position {e.get('position')} entityseq {e.get('entityseq')} "
            f"{d.get('operation-type')} {what} {loc} id {e.get('id')}")
