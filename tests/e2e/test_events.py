"""Change events end to end: the transactional outbox, the REST events endpoint
(`POST /v1/{prefix}/events`) and the relays to real brokers.

- Every acknowledged change has exactly its events, in commit order, with the right
  fields (namespaces, tables by REST and by PyIceberg, staged creates, registers,
  multi-table transactions, renames, drops, views, catalogs, grants); rejected changes
  and idempotent replays have none.
- The endpoint pages without loss or repetition, resumes from its token, filters by
  time, operation, object type, name prefix and uuid, and refuses bad requests with
  the Iceberg error body, changing nothing.
- `--events false` writes no events.
- The relay publishes every event, exactly as the endpoint reports it and in position
  order, to NATS JetStream, Kafka and a signed webhook; with the broker down commits
  still succeed at normal speed, and the backlog arrives once it is back.

Not covered here: 410 Gone for a token whose next events retention deleted (retention is
in days and expiry runs every 60 s, so an e2e run cannot reach it; the unit tests of
src/events/query.rs cover it).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import json
import os
import re
import shutil
import statistics
import subprocess
import threading
import time
import uuid
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog

from conftest import ROOT, ApiClient, FloeServer, access_token, free_port, restartable_port

MGMT = "/api/management/v1"
ROOT_PRINCIPAL = "root"

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "required": False, "type": "long"},
        {"id": 2, "name": "data", "required": False, "type": "string"},
    ],
}

ALL_OPERATIONS = [
    "create-table", "register-table", "update-table", "drop-table", "rename-table",
    "create-view", "register-view", "update-view", "drop-view", "rename-view",
    "create-namespace", "update-namespace-properties", "drop-namespace",
    "x-floe-create-catalog", "x-floe-update-catalog", "x-floe-drop-catalog",
    "x-floe-update-security",
    "x-floe-create-policy", "x-floe-update-policy", "x-floe-drop-policy",
    "x-floe-attach-policy", "x-floe-detach-policy",
]


# ---- helpers ------------------------------------------------------------------------------

def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def ns_path(levels) -> str:
    return "%1F".join(quote(level, safe="") for level in levels)


def ident(namespace, name) -> dict:
    return {"namespace": list(namespace), "name": name}


def view_version(version_id: int, namespace, sql: str) -> dict:
    return {
        "version-id": version_id,
        "schema-id": 0,
        "timestamp-ms": int(time.time() * 1000),
        "summary": {"engine-name": "floe-e2e"},
        "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}],
        "default-namespace": list(namespace),
    }


def assert_error(r, status: int) -> dict:
    """The status and the Iceberg ErrorModel body ({"error": {message, type, code}})."""
    assert r.status_code == status, f"expected {status}, got {r.status_code}: {r.text}"
    body = r.json()
    error = body.get("error")
    assert isinstance(error, dict), f"no error object: {r.text}"
    assert error.get("code") == status, r.text
    assert isinstance(error.get("type"), str) and error["type"], r.text
    assert isinstance(error.get("message"), str) and error["message"], r.text
    return error


def decode_token(token: str) -> tuple[str, int]:
    """A continuation token is base64url("v1:<catalog id>:<position>") (Floe's own
    format; decoded here only to craft bad tokens)."""
    text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    version, catalog_id, position = text.split(":")
    assert version == "v1", text
    return catalog_id, int(position)


def encode_token(catalog_id: str, position: int) -> str:
    return base64.urlsafe_b64encode(f"v1:{catalog_id}:{position}".encode()).decode().rstrip("=")


def rfc3339_ms(text: str) -> int:
    return int(round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000))


def wait_for(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class Catalog:
    """REST calls on one catalog of a server, as the root principal by default."""

    def __init__(self, api: ApiClient, name: str):
        self.api = api
        self.name = name
        self.last = None  # the last response (for its X-Request-Id)

    def call(self, method, path, body=None, expect=None, headers=None):
        r = self.api.call(method, f"/v1/{self.name}{path}", body, headers)
        self.last = r
        if expect is not None:
            assert r.status_code == expect, f"{method} {path}: {r.status_code} {r.text}"
        return r

    @property
    def request_id(self) -> str:
        rid = self.last.headers.get("x-request-id")
        assert rid, "every response names its request id"
        return rid

    # -- catalog objects
    def create_namespace(self, levels, properties=None, **kw):
        return self.call("POST", "/namespaces",
                         {"namespace": list(levels), "properties": properties or {}}, **kw)

    def update_namespace(self, levels, removals=(), updates=None, **kw):
        return self.call("POST", f"/namespaces/{ns_path(levels)}/properties",
                         {"removals": list(removals), "updates": updates or {}}, **kw)

    def drop_namespace(self, levels, **kw):
        return self.call("DELETE", f"/namespaces/{ns_path(levels)}", **kw)

    def create_table(self, namespace, name, extra=None, **kw):
        body = {"name": name, "schema": SCHEMA, **(extra or {})}
        return self.call("POST", f"/namespaces/{ns_path(namespace)}/tables", body, **kw)

    def table_path(self, namespace, name) -> str:
        return f"/namespaces/{ns_path(namespace)}/tables/{quote(name, safe='')}"

    def load_table(self, namespace, name) -> dict:
        return self.call("GET", self.table_path(namespace, name), expect=200).json()

    def commit(self, namespace, name, body, **kw):
        return self.call("POST", self.table_path(namespace, name), body, **kw)

    def drop_table(self, namespace, name, purge=False, **kw):
        suffix = "?purgeRequested=true" if purge else ""
        return self.call("DELETE", self.table_path(namespace, name) + suffix, **kw)

    def rename_table(self, source, destination, **kw):
        return self.call("POST", "/tables/rename",
                         {"source": ident(*source), "destination": ident(*destination)}, **kw)

    def register_table(self, namespace, name, metadata_location, **kw):
        return self.call("POST", f"/namespaces/{ns_path(namespace)}/register",
                         {"name": name, "metadata-location": metadata_location}, **kw)

    def transaction(self, changes, **kw):
        return self.call("POST", "/transactions/commit", {"table-changes": changes}, **kw)

    def policy(self, method, namespace, suffix, body=None, expect=None):
        """Polaris's policy API: `suffix` after `…/namespaces/{ns}/policies`."""
        path = (f"/api/catalog/polaris/v1/{self.name}/namespaces/{ns_path(namespace)}"
                f"/policies{suffix}")
        r = self.api.call(method, path, body)
        self.last = r
        if expect is not None:
            assert r.status_code == expect, f"{method} {path}: {r.status_code} {r.text}"
        return r

    def view_path(self, namespace, name) -> str:
        return f"/namespaces/{ns_path(namespace)}/views/{quote(name, safe='')}"

    def create_view(self, namespace, name, sql="SELECT 1", **kw):
        body = {"name": name, "schema": SCHEMA,
                "view-version": view_version(1, namespace, sql),
                "properties": {"comment": "e2e"}}
        return self.call("POST", f"/namespaces/{ns_path(namespace)}/views", body, **kw)

    def set_property(self, namespace, name, key, value, **kw):
        return self.commit(namespace, name, {"updates": [
            {"action": "set-properties", "updates": {key: value}}]}, **kw)

    # -- events
    def query(self, body=None, raw: str | None = None):
        api = self.api
        if raw is not None:
            r = api.s.post(api.url + f"/v1/{self.name}/events", data=raw, timeout=60,
                           headers={"Content-Type": "application/json"})
            assert r.status_code < 500, r.text
            return r
        return api.call("POST", f"/v1/{self.name}/events", body if body is not None else {})

    def page(self, body=None) -> dict:
        r = self.query(body)
        assert r.status_code == 200, r.text
        page = r.json()
        assert set(page) == {"continuation-token", "events"}, page
        assert isinstance(page["continuation-token"], str) and page["continuation-token"]
        return page

    def log(self, token=None, page_size=1000, **filters) -> tuple[list, str]:
        """Every event after `token` that passes the filters, and the token at the end."""
        events = []
        while True:
            body = {"page-size": page_size, **filters}
            if token is not None:
                body["continuation-token"] = token
            page = self.page(body)
            events += page["events"]
            if not page["events"] and page["continuation-token"] == token:
                return events, token
            token = page["continuation-token"]

    def everything(self) -> list:
        return self.log()[0]

    def end_token(self) -> str:
        return self.log()[1]


class Cursor:
    """Follows a catalog's log: `take()` returns the events since the last take."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self.token = catalog.end_token()

    def take(self) -> list:
        events, self.token = self.catalog.log(self.token)
        return events

    def take_one(self, operation_type: str) -> dict:
        events = self.take()
        assert [e["operation"]["operation-type"] for e in events] == [operation_type], events
        return events[0]


def root_api(server: FloeServer) -> ApiClient:
    return ApiClient(server.url, access_token(server.url))


def create_catalog(api: ApiClient, server: FloeServer, name: str):
    r = api.call("POST", f"{MGMT}/catalogs", {"catalog": {
        "type": "INTERNAL", "name": name,
        "properties": {"default-base-location": f"file://{server.data_dir}/catalogs/{name}"},
        "storageConfigInfo": {"storageType": "FILE"},
    }})
    assert r.status_code == 201, r.text
    return r


def new_catalog(api: ApiClient, server: FloeServer, prefix="ev") -> Catalog:
    name = unique(prefix)
    create_catalog(api, server, name)
    return Catalog(api, name)


def grant(api: ApiClient, catalog: str, role: str, privilege: str):
    r = api.call("POST", f"{MGMT}/catalogs/{catalog}/catalog-roles",
                 {"catalogRole": {"name": role}})
    assert r.status_code == 201, r.text
    r = api.call("PUT", f"{MGMT}/catalogs/{catalog}/catalog-roles/{role}/grants",
                 {"grant": {"type": "catalog", "privilege": privilege}})
    assert r.status_code == 201, r.text


def check_event_shape(event: dict):
    assert set(event) == {"event-id", "request-id", "request-event-count", "timestamp-ms",
                          "actor", "operation", "position", "entity-sequence"}, event
    assert uuid.UUID(event["event-id"]).version == 7, event
    assert isinstance(event["request-id"], str) and event["request-id"]
    assert event["request-event-count"] >= 1
    assert event["operation"]["operation-type"] in ALL_OPERATIONS
    assert isinstance(event["position"], int) and event["position"] >= 1
    assert isinstance(event["entity-sequence"], int) and event["entity-sequence"] >= 1


def entity_of(event: dict) -> str:
    """The per-entity sequence key, as the REST event shows it."""
    op = event["operation"]
    if "table-uuid" in op:
        return "object:" + op["table-uuid"]
    if "view-uuid" in op:
        return "object:" + op["view-uuid"]
    if "policy-uuid" in op:
        return "object:" + op["policy-uuid"]
    if "namespace" in op:
        return "namespace:" + "\x1f".join(op["namespace"])
    if op["operation-type"].startswith("x-floe-") and op["operation-type"].endswith("-catalog"):
        return "catalog"
    raise AssertionError(f"no entity for {event}")


def check_log(events: list, contiguous: bool = True, from_start: bool = True):
    """Positions strictly increasing (and without gaps when nothing else ran), ids
    unique, entity sequences 1, 2, 3... for each entity, the events of one request
    consecutive and as many as it says."""
    for e in events:
        check_event_shape(e)
    positions = [e["position"] for e in events]
    assert positions == sorted(set(positions)), positions
    if contiguous and positions:
        assert positions == list(range(positions[0], positions[0] + len(positions))), positions
    assert len({e["event-id"] for e in events}) == len(events)
    seqs: dict[str, list[int]] = {}
    for e in events:
        seqs.setdefault(entity_of(e), []).append(e["entity-sequence"])
    for entity, s in seqs.items():
        first = 1 if from_start else s[0]
        assert s == list(range(first, first + len(s))), f"{entity}: entity sequences {s}"
    by_request: dict[str, list[dict]] = {}
    for e in events:
        by_request.setdefault(e["request-id"], []).append(e)
    for rid, group in by_request.items():
        assert all(e["request-event-count"] == len(group) for e in group), group
        ps = [e["position"] for e in group]
        assert ps == list(range(ps[0], ps[0] + len(ps))), f"request {rid}: positions {ps}"


def local_path(location: str) -> Path:
    parsed = urlparse(location)
    assert parsed.scheme in ("", "file"), location
    return Path(unquote(parsed.path))


# ---- fixtures -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(module_server_factory) -> FloeServer:
    """One server for the tests that read the endpoint; each test makes its own catalog."""
    return module_server_factory()


@pytest.fixture(scope="module")
def api(server) -> ApiClient:
    return root_api(server)


# ---- 1. every change has exactly its events -----------------------------------------------

def test_every_kind_of_change_has_exactly_its_events(server, api):
    t0 = int(time.time() * 1000)
    cat = Catalog(api, unique("ev"))
    made = create_catalog(api, server, cat.name)
    cur = Cursor(cat)
    first = cat.everything()
    assert len(first) == 1, first
    e = first[0]
    assert e["operation"] == {"operation-type": "x-floe-create-catalog"}
    assert e["request-id"] == made.headers["x-request-id"]
    assert e["actor"] == {"id": ROOT_PRINCIPAL} and e["entity-sequence"] == 1
    assert t0 - 5 <= e["timestamp-ms"] <= int(time.time() * 1000) + 5

    def one(operation_type: str, operation: dict | None = None, seq: int | None = None) -> dict:
        """The single event of the last request, checked."""
        event = cur.take_one(operation_type)
        check_event_shape(event)
        if operation is not None:
            got = dict(event["operation"])
            if operation_type in ("drop-table", "drop-view"):
                # Recoverable for the drop retention: the dropped record's id and until when.
                assert isinstance(got.pop("dropped-id"), str), event
                assert got.pop("recoverable-until-ms") > event["timestamp-ms"], event
            assert got == {"operation-type": operation_type, **operation}, event
        if seq is not None:
            assert event["entity-sequence"] == seq, event
        assert event["request-id"] == cat.request_id, event
        assert event["request-event-count"] == 1
        assert event["actor"] == {"id": ROOT_PRINCIPAL}
        return event

    # Namespaces: create, update (updated / removed / missing).
    cat.create_namespace(["sales"], {"owner": "ann", "tier": "1"}, expect=200)
    one("create-namespace", {"namespace": ["sales"], "properties": {"owner": "ann", "tier": "1"}},
        seq=1)
    cat.update_namespace(["sales"], removals=["owner", "nope"], updates={"team": "blue"},
                         expect=200)
    one("update-namespace-properties", {"namespace": ["sales"], "updated": ["team"],
                                        "removed": ["owner"], "missing": ["nope"]}, seq=2)
    # A request id the client sends is the events' request-id.
    mine = unique("client-request")
    cat.update_namespace(["sales"], updates={"tier": "2"}, expect=200,
                         headers={"X-Request-Id": mine})
    assert one("update-namespace-properties", seq=3)["request-id"] == mine

    # A table by REST: create, then a commit with a requirement.
    created = cat.create_table(["sales"], "orders", expect=200).json()
    uuid_orders = created["metadata"]["table-uuid"]
    ev = one("create-table", seq=1)
    op = ev["operation"]
    assert op["identifier"] == ident(["sales"], "orders")
    assert op["table-uuid"] == uuid_orders
    assert op["metadata-location"] == created["metadata-location"]
    assert "metadata-location-before" not in op
    assert any(u["action"] == "add-schema" for u in op["updates"]), op
    assert set(op) == {"operation-type", "identifier", "table-uuid", "metadata-location",
                       "updates"}, op

    change = {
        "requirements": [{"type": "assert-table-uuid", "uuid": uuid_orders}],
        "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
    }
    committed = cat.commit(["sales"], "orders", change, expect=200).json()
    one("update-table", {
        "identifier": ident(["sales"], "orders"), "table-uuid": uuid_orders,
        "metadata-location": committed["metadata-location"],
        "metadata-location-before": created["metadata-location"],
        "updates": change["updates"], "requirements": change["requirements"],
        "snapshots-added": [], "snapshots-removed": [],
    }, seq=2)

    # A staged create has no event until the commit that creates the table.
    staged = cat.create_table(["sales"], "staged", {"stage-create": True}, expect=200).json()
    assert cur.take() == []
    staged_uuid = staged["metadata"]["table-uuid"]
    create_change = {
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": staged_uuid},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": staged["metadata"]["schemas"][0],
             "last-column-id": 2},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": staged["metadata"]["location"]},
            {"action": "set-properties", "updates": {"stage": "done"}},
        ],
    }
    done = cat.commit(["sales"], "staged", create_change, expect=200).json()
    ev = one("create-table", seq=1)
    assert ev["operation"]["table-uuid"] == staged_uuid
    assert ev["operation"]["metadata-location"] == done["metadata-location"]
    assert ev["operation"]["requirements"] == [{"type": "assert-create"}]
    # The updates as the server parsed them: add-schema's deprecated last-column-id
    # (optional in the spec) is not carried over.
    assert ev["operation"]["updates"] == [
        {k: v for k, v in u.items() if k != "last-column-id"} for u in create_change["updates"]]
    assert "metadata-location-before" not in ev["operation"]

    # A multi-table transaction: one event per table, one request.
    before = {n: cat.load_table(["sales"], n)["metadata-location"] for n in ("orders", "staged")}
    cat.transaction([
        {"identifier": ident(["sales"], "orders"),
         "requirements": [{"type": "assert-table-uuid", "uuid": uuid_orders}],
         "updates": [{"action": "set-properties", "updates": {"tx": "1"}}]},
        {"identifier": ident(["sales"], "staged"),
         "requirements": [{"type": "assert-table-uuid", "uuid": staged_uuid}],
         "updates": [{"action": "set-properties", "updates": {"tx": "1"}}]},
    ], expect=204)
    tx = cur.take()
    assert [e["operation"]["operation-type"] for e in tx] == ["update-table"] * 2, tx
    assert {e["operation"]["table-uuid"] for e in tx} == {uuid_orders, staged_uuid}
    assert {e["request-id"] for e in tx} == {cat.request_id}
    assert [e["request-event-count"] for e in tx] == [2, 2]
    assert tx[1]["position"] == tx[0]["position"] + 1
    for e in tx:
        name = e["operation"]["identifier"]["name"]
        assert e["operation"]["metadata-location-before"] == before[name]
        assert e["operation"]["metadata-location"] == cat.load_table(["sales"], name)[
            "metadata-location"]
        assert e["entity-sequence"] == {"orders": 3, "staged": 2}[name]

    # Rename: same uuid, the sequence goes on; source and destination.
    cat.rename_table((["sales"], "orders"), (["sales"], "orders_v2"), expect=204)
    one("rename-table", {"identifier": ident(["sales"], "orders"), "table-uuid": uuid_orders,
                         "source": ident(["sales"], "orders"),
                         "destination": ident(["sales"], "orders_v2")}, seq=4)

    # Drop without purge (the metadata file stays), register it back (same uuid: the
    # sequence goes on), drop with purge.
    last_location = cat.load_table(["sales"], "orders_v2")["metadata-location"]
    cat.drop_table(["sales"], "orders_v2", expect=204)
    one("drop-table", {"identifier": ident(["sales"], "orders_v2"), "table-uuid": uuid_orders,
                       "metadata-location-before": last_location, "purge": False}, seq=5)
    assert local_path(last_location).is_file()
    cat.register_table(["sales"], "orders_back", last_location, expect=200)
    one("register-table", {"identifier": ident(["sales"], "orders_back"),
                           "table-uuid": uuid_orders, "metadata-location": last_location}, seq=6)
    cat.drop_table(["sales"], "orders_back", purge=True, expect=204)
    one("drop-table", {"identifier": ident(["sales"], "orders_back"), "table-uuid": uuid_orders,
                       "metadata-location-before": last_location, "purge": True}, seq=7)

    # PyIceberg: a create and two appends, each append an update-table adding one snapshot.
    py = load_catalog("floe", type="rest", uri=server.url, warehouse=cat.name,
                      credential=FloeServer.client_id + ":" + FloeServer.client_secret,
                      scope="catalog", **{"oauth2-server-uri": server.url + "/v1/oauth/tokens"})
    arrow_schema = pa.schema([pa.field("id", pa.int64()), pa.field("data", pa.string())])
    table = py.create_table("sales.py", schema=arrow_schema)
    py_events = cur.take()
    assert [e["operation"]["operation-type"] for e in py_events] == ["create-table"], py_events
    py_uuid = str(table.metadata.table_uuid)
    assert py_events[0]["operation"]["table-uuid"] == py_uuid
    locations = [table.metadata_location]
    for i in range(2):
        table.append(pa.table({"id": [i], "data": [f"row{i}"]}, schema=arrow_schema))
        locations.append(table.metadata_location)
    appends = cur.take()
    assert [e["operation"]["operation-type"] for e in appends] == ["update-table"] * 2, appends
    snapshots = [s.snapshot_id for s in table.snapshots()]
    assert len(snapshots) == 2
    for i, e in enumerate(appends):
        op = e["operation"]
        assert op["table-uuid"] == py_uuid and e["entity-sequence"] == i + 2
        assert op["snapshots-added"] == [snapshots[i]], op
        assert op["snapshots-removed"] == []
        assert op["metadata-location-before"] == locations[i]
        assert op["metadata-location"] == locations[i + 1]
        assert any(u["action"] == "add-snapshot" for u in op["updates"]), op
        assert e["actor"] == {"id": ROOT_PRINCIPAL}

    # Views: create, replace, rename, drop, register the dropped one back, drop again.
    view = cat.create_view(["sales"], "v", expect=200).json()
    view_uuid = view["metadata"]["view-uuid"]
    ev = one("create-view", seq=1)
    assert ev["operation"]["view-uuid"] == view_uuid
    assert ev["operation"]["identifier"] == ident(["sales"], "v")
    assert ev["operation"]["metadata-location"] == view["metadata-location"]
    assert isinstance(ev["operation"]["updates"], list) and ev["operation"]["updates"]
    replace = {
        "requirements": [{"type": "assert-view-uuid", "uuid": view_uuid}],
        "updates": [
            {"action": "add-view-version", "view-version": view_version(2, ["sales"], "SELECT 2")},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    }
    replaced = cat.call("POST", cat.view_path(["sales"], "v"), replace, expect=200).json()
    one("update-view", {"identifier": ident(["sales"], "v"), "view-uuid": view_uuid,
                        "metadata-location": replaced["metadata-location"],
                        "metadata-location-before": view["metadata-location"],
                        "updates": replace["updates"],
                        "requirements": replace["requirements"]}, seq=2)
    cat.call("POST", "/views/rename", {"source": ident(["sales"], "v"),
                                       "destination": ident(["sales"], "v2")}, expect=204)
    one("rename-view", {"identifier": ident(["sales"], "v"), "view-uuid": view_uuid,
                        "source": ident(["sales"], "v"),
                        "destination": ident(["sales"], "v2")}, seq=3)
    cat.call("DELETE", cat.view_path(["sales"], "v2"), expect=204)
    one("drop-view", {"identifier": ident(["sales"], "v2"), "view-uuid": view_uuid,
                      "metadata-location-before": replaced["metadata-location"]}, seq=4)
    cat.call("POST", f"/namespaces/{ns_path(['sales'])}/register-view",
             {"name": "v3", "metadata-location": replaced["metadata-location"]}, expect=200)
    one("register-view", {"identifier": ident(["sales"], "v3"), "view-uuid": view_uuid,
                          "metadata-location": replaced["metadata-location"]}, seq=5)

    # Drop a namespace.
    cat.create_namespace(["tmp"], expect=200)
    one("create-namespace", {"namespace": ["tmp"], "properties": {}}, seq=1)
    cat.drop_namespace(["tmp"], expect=204)
    one("drop-namespace", {"namespace": ["tmp"]}, seq=2)
    assert cur.take() == []

    # The catalog through the management API.
    r = api.call("PUT", f"{MGMT}/catalogs/{cat.name}",
                 {"currentEntityVersion": 1, "properties": {"team": "blue"}})
    assert r.status_code == 200, r.text
    cat.last = r
    one("x-floe-update-catalog", {"version": 2}, seq=2)

    # A grant is a service-wide security event: it takes a position, outside this
    # catalog's log (the relay tests see it).
    gap_from = cur.token
    grant(api, cat.name, "readers", "TABLE_READ_DATA")
    assert cur.take() == []
    cat.create_namespace(["after_grant"], expect=200)
    after = one("create-namespace", seq=1)
    _, position_before = decode_token(gap_from)
    assert after["position"] == position_before + 3, "role + grant took two positions"

    # The whole log: in order, gap-free except for the grant, sequences per entity.
    log = cat.everything()
    check_log(log[:-1], contiguous=True)
    check_log(log, contiguous=False)
    assert log[0]["operation"]["operation-type"] == "x-floe-create-catalog"
    assert all(t0 - 5 <= e["timestamp-ms"] <= int(time.time() * 1000) + 5 for e in log)
    times = [e["timestamp-ms"] for e in log]
    assert times == sorted(times), "positions are in commit order"


def test_a_catalog_drop_ends_its_log(server, api):
    cat = new_catalog(api, server)
    assert [e["operation"]["operation-type"] for e in cat.everything()] == [
        "x-floe-create-catalog"]
    r = api.call("DELETE", f"{MGMT}/catalogs/{cat.name}")
    assert r.status_code == 204, r.text
    assert_error(cat.query({}), 404)


# ---- 2. rejected changes have no events ---------------------------------------------------

def test_rejected_changes_have_no_events_and_change_nothing(server, api):
    cat = new_catalog(api, server)
    cat.create_namespace(["db"], expect=200)
    created = cat.create_table(["db"], "t", expect=200).json()
    cat.create_namespace(["full"], expect=200)
    cat.create_table(["full"], "x", expect=200)
    before_log = cat.everything()
    token = cat.end_token()
    pointer = created["metadata-location"]

    def nothing_happened():
        assert cat.log(token)[0] == []
        assert cat.load_table(["db"], "t")["metadata-location"] == pointer

    # A commit failing its requirement.
    assert_error(cat.commit(["db"], "t", {
        "requirements": [{"type": "assert-table-uuid", "uuid": str(uuid.uuid4())}],
        "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}), 409)
    nothing_happened()
    # A transaction whose second change fails: neither table changes, no event.
    assert_error(cat.transaction([
        {"identifier": ident(["db"], "t"),
         "updates": [{"action": "set-properties", "updates": {"tx": "1"}}]},
        {"identifier": ident(["full"], "x"),
         "requirements": [{"type": "assert-current-schema-id", "current-schema-id": 7}],
         "updates": [{"action": "set-properties", "updates": {"tx": "1"}}]},
    ]), 409)
    nothing_happened()
    # Creating a table that exists; dropping, renaming, committing to missing ones.
    assert_error(cat.create_table(["db"], "t"), 409)
    assert_error(cat.drop_table(["db"], "missing"), 404)
    assert_error(cat.rename_table((["db"], "missing"), (["db"], "m2")), 404)
    assert_error(cat.commit(["db"], "missing", {"updates": [
        {"action": "set-properties", "updates": {"k": "v"}}]}), 404)
    assert_error(cat.create_namespace(["db"]), 409)
    assert_error(cat.drop_namespace(["full"]), 409)
    assert_error(cat.update_namespace(["db"], removals=["a"], updates={"a": "1"}), 422)
    assert_error(cat.call("DELETE", cat.view_path(["db"], "nope")), 404)
    assert_error(cat.rename_table((["db"], "t"), (["missing_ns"], "t")), 404)
    nothing_happened()
    # Rejected inside the store transaction, after the events were attached to it: a
    # transaction moving one table into another's location.
    location = cat.load_table(["db"], "t")["metadata"]["location"]
    r = cat.transaction([
        {"identifier": ident(["db"], "t"),
         "updates": [{"action": "set-properties", "updates": {"tx": "1"}}]},
        {"identifier": ident(["full"], "x"),
         "updates": [{"action": "set-location", "location": location + "/inner"}]},
    ])
    assert 400 <= r.status_code < 500, r.text
    assert_error(r, r.status_code)
    nothing_happened()
    # The management API: a stale catalog version, a catalog that is not empty.
    r = api.call("PUT", f"{MGMT}/catalogs/{cat.name}",
                 {"currentEntityVersion": 99, "properties": {"x": "y"}})
    assert_error(r, 409)
    r = api.call("DELETE", f"{MGMT}/catalogs/{cat.name}")
    assert 400 <= r.status_code < 500, r.text
    nothing_happened()
    # A commit without updates changes nothing: no event.
    r = cat.commit(["db"], "t", {"requirements": [], "updates": []}, expect=200)
    assert r.json()["metadata-location"] == pointer
    nothing_happened()
    # A staged create never committed.
    cat.create_table(["db"], "staged", {"stage-create": True}, expect=200)
    nothing_happened()

    # 403: a principal without privileges on the catalog.
    r = api.call("POST", f"{MGMT}/principals", {"principal": {"name": unique("nobody")}})
    assert r.status_code == 201, r.text
    creds = r.json()["credentials"]
    nobody = ApiClient(server.url, access_token(server.url, creds["clientId"],
                                                creds["clientSecret"]))
    as_nobody = Catalog(nobody, cat.name)
    assert_error(as_nobody.create_namespace(["evil"]), 403)
    assert_error(as_nobody.set_property(["db"], "t", "k", "evil"), 403)
    assert_error(as_nobody.drop_table(["db"], "t"), 403)
    assert_error(as_nobody.query({}), 403)  # reading events takes CATALOG_MANAGE_METADATA
    nothing_happened()

    # An idempotent replay: the same Idempotency-Key twice, one change, one event.
    for request in (
        lambda h: cat.create_namespace(["once"], {"a": "1"}, headers=h),
        lambda h: cat.set_property(["db"], "t", "once", "1", headers=h),
        lambda h: cat.drop_table(["full"], "x", headers=h),
    ):
        key = {"Idempotency-Key": str(uuid.uuid4())}
        first = request(key)
        assert first.status_code in (200, 204), first.text
        rid = cat.request_id
        second = request(key)
        assert second.status_code == first.status_code, second.text
        assert second.headers.get("idempotency-replayed") == "true"
        assert second.text == first.text
        events, token = cat.log(token)
        assert len(events) == 1, events
        assert events[0]["request-id"] == rid, "the event is the first request's"
    assert cat.everything()[: len(before_log)] == before_log
    # (not gap-free: the principal made above took a position outside this catalog)
    check_log(cat.everything(), contiguous=False)


def test_concurrent_commits_have_their_events_in_commit_order(server, api):
    """Writers on two tables and a reader following the log at once: every acknowledged
    commit has its event, each table's events chain its metadata locations in entity
    sequence order, and the reader, resuming from its tokens, missed nothing."""
    cat = new_catalog(api, server, "conc")
    cat.create_namespace(["c"], expect=200)
    uuids = {t: cat.create_table(["c"], t, expect=200).json()["metadata"]["table-uuid"]
             for t in ("a", "b")}
    start = cat.end_token()
    token = api.s.headers["Authorization"].split(" ", 1)[1]
    acked: list[tuple[str, str]] = []  # (table, metadata-location)
    lock = threading.Lock()
    done = threading.Event()
    tailed: list[dict] = []
    errors: list[str] = []

    def writer(i: int):
        me = Catalog(ApiClient(server.url, token), cat.name)
        table = "ab"[i % 2]
        for j in range(12):
            r = me.set_property(["c"], table, f"w{i}", str(j))
            if r.status_code == 200:
                with lock:
                    acked.append((table, r.json()["metadata-location"]))
            elif r.status_code != 409:
                errors.append(f"{r.status_code} {r.text}")

    def reader():
        me = Catalog(ApiClient(server.url, token), cat.name)
        position = start
        while True:
            finishing = done.is_set()
            page = me.page({"continuation-token": position, "page-size": 5})
            tailed.extend(page["events"])
            position = page["continuation-token"]
            if finishing and not page["events"]:
                return

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    tail = threading.Thread(target=reader)
    tail.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    done.set()
    tail.join(60)
    assert not errors, errors
    assert len(acked) >= 24, "most commits succeed"
    log = cat.log(start)[0]
    assert tailed == log, "a reader following the log as it grows misses nothing"
    check_log(log, from_start=False)
    assert len(log) == len(acked)
    for table, table_uuid in uuids.items():
        events = [e for e in log if e["operation"]["table-uuid"] == table_uuid]
        assert [e["entity-sequence"] for e in events] == list(range(2, len(events) + 2))
        chain = [e["operation"]["metadata-location"] for e in events]
        assert sorted(chain) == sorted(m for t, m in acked if t == table)
        for before, after in zip(events, events[1:]):
            assert after["operation"]["metadata-location-before"] == \
                before["operation"]["metadata-location"], "each commit follows the last"
        assert chain[-1] == cat.load_table(["c"], table)["metadata-location"]


def test_events_survive_a_crash(module_server_factory):
    """kill -9 right after acknowledged changes: their events are all there after the
    restart (they committed with the changes), and positions go on without reuse."""
    server = module_server_factory()
    cat = Catalog(root_api(server), "default")
    cat.create_namespace(["crash"], expect=200)
    cat.create_table(["crash"], "t", expect=200)
    for i in range(5):
        cat.set_property(["crash"], "t", "i", str(i), expect=200)
    before = cat.everything()
    end = cat.end_token()
    server.restart(kill=True)
    cat = Catalog(root_api(server), "default")
    assert cat.everything() == before
    assert cat.page({"continuation-token": end})["events"] == []
    cat.set_property(["crash"], "t", "after", "1", expect=200)
    new = cat.log(end)[0]
    assert len(new) == 1 and new[0]["position"] == before[-1]["position"] + 1
    assert new[0]["entity-sequence"] == 7


def principal_with(api: ApiClient, server: FloeServer, catalog: str, privileges) -> tuple:
    """A new principal holding a principal role holding a catalog role with `privileges`
    on `catalog`; returns (name, client, role)."""
    name = unique("alice")
    r = api.call("POST", f"{MGMT}/principals", {"principal": {"name": name}})
    assert r.status_code == 201, r.text
    creds = r.json()["credentials"]
    role = name + "_role"
    for method, path, body in [
        ("POST", f"{MGMT}/principal-roles", {"principalRole": {"name": role}}),
        ("PUT", f"{MGMT}/principals/{name}/principal-roles", {"principalRole": {"name": role}}),
        ("POST", f"{MGMT}/catalogs/{catalog}/catalog-roles", {"catalogRole": {"name": role}}),
        ("PUT", f"{MGMT}/principal-roles/{role}/catalog-roles/{catalog}",
         {"catalogRole": {"name": role}}),
    ] + [("PUT", f"{MGMT}/catalogs/{catalog}/catalog-roles/{role}/grants",
          {"grant": {"type": "catalog", "privilege": p}}) for p in privileges]:
        r = api.call(method, path, body)
        assert r.status_code == 201, f"{method} {path}: {r.text}"
    client = ApiClient(server.url, access_token(server.url, creds["clientId"],
                                                creds["clientSecret"]))
    return name, client, role


def test_the_actor_is_the_principal_and_reading_takes_manage_metadata(server, api):
    cat = new_catalog(api, server)
    name, client, role = principal_with(api, server, cat.name, ["NAMESPACE_CREATE"])
    as_alice = Catalog(client, cat.name)
    as_alice.create_namespace(["hers"], expect=200)
    rid = as_alice.request_id
    assert_error(as_alice.query({}), 403)
    event = cat.everything()[-1]
    assert event["operation"] == {"operation-type": "create-namespace", "namespace": ["hers"],
                                  "properties": {}}
    assert event["actor"] == {"id": name} and event["request-id"] == rid
    r = api.call("PUT", f"{MGMT}/catalogs/{cat.name}/catalog-roles/{role}/grants",
                 {"grant": {"type": "catalog", "privilege": "CATALOG_MANAGE_METADATA"}})
    assert r.status_code == 201, r.text
    assert as_alice.page({})["events"] == cat.everything()
    # The privilege is the catalog's: it reads no other catalog's events.
    assert_error(Catalog(client, "default").query({}), 403)


def test_policy_changes_have_their_events(server, api):
    cat = new_catalog(api, server)
    cat.create_namespace(["db"], expect=200)
    table_uuid = cat.create_table(["db"], "t", expect=200).json()["metadata"]["table-uuid"]
    cur = Cursor(cat)
    policy_ident = ident(["db"], "expiry")

    def one(operation_type: str, seq: int) -> dict:
        event = cur.take_one(operation_type)
        check_event_shape(event)
        assert event["request-id"] == cat.request_id and event["request-event-count"] == 1
        assert event["entity-sequence"] == seq, event
        op = event["operation"]
        assert op["identifier"] == policy_ident and op["policy-type"] == "system.snapshot-expiry"
        return op

    content = '{"enable":true,"config":{"max_snapshot_age_days":7}}'
    cat.policy("POST", ["db"], "", {"name": "expiry", "type": "system.snapshot-expiry",
                                    "description": "weekly", "content": content}, expect=200)
    created = one("x-floe-create-policy", 1)
    policy_uuid = created["policy-uuid"]
    assert uuid.UUID(policy_uuid)
    assert created == {"operation-type": "x-floe-create-policy", "identifier": policy_ident,
                       "policy-uuid": policy_uuid, "policy-type": "system.snapshot-expiry",
                       "version": 0, "description": "weekly", "content": content}

    updated_content = '{"enable":false}'
    cat.policy("PUT", ["db"], "/expiry", {"content": updated_content,
                                          "current-policy-version": 0}, expect=200)
    updated = one("x-floe-update-policy", 2)
    assert updated["version"] == 1 and updated["content"] == updated_content
    assert "description" not in updated, "an update without one clears it"
    # The same again changes nothing: the version stays, and there is no event.
    same = cat.policy("PUT", ["db"], "/expiry", {"content": updated_content,
                                                 "current-policy-version": 1}, expect=200)
    assert same.json()["policy"]["version"] == 1
    assert cur.take() == []

    # Refused changes have no events: a stale version, a target that does not exist.
    assert_error(cat.policy("PUT", ["db"], "/expiry", {"content": updated_content,
                                                       "current-policy-version": 0}), 409)
    table_target = {"type": "table-like", "path": ["db", "t"]}
    cat.policy("PUT", ["db"], "/expiry/mappings",
               {"target": table_target, "parameters": {"window": "1d"}}, expect=204)
    attached = one("x-floe-attach-policy", 3)
    assert attached["target"] == {**table_target, "table-uuid": table_uuid}
    assert attached["parameters"] == {"window": "1d"} and attached["version"] == 1
    assert_error(cat.policy("PUT", ["db"], "/expiry/mappings",
                            {"target": {"type": "table-like", "path": ["db", "nope"]},
                             "parameters": {}}), 404)
    cat.policy("PUT", ["db"], "/expiry/mappings", {"target": {"type": "catalog"}}, expect=204)
    assert one("x-floe-attach-policy", 4)["target"] == {"type": "catalog"}
    assert cur.take() == []

    # The table's history by name and by uuid includes what was attached to it; the
    # policy's history is found by its name, its uuid or its object type.
    by_table = [e["operation"]["operation-type"]
                for e in cat.log(None, **{"catalog-objects-by-name": [["db", "t"]]})[0]]
    assert by_table == ["create-table", "x-floe-attach-policy"], by_table
    by_table_uuid = [e["operation"]["operation-type"]
                     for e in cat.log(None, **{"catalog-objects-by-uuid": [table_uuid]})[0]]
    assert by_table_uuid == ["create-table", "x-floe-attach-policy"], by_table_uuid
    policy_ops = ["x-floe-create-policy", "x-floe-update-policy", "x-floe-attach-policy",
                  "x-floe-attach-policy"]
    for filters in ({"catalog-objects-by-name": [["db", "expiry"]]},
                    {"catalog-objects-by-uuid": [policy_uuid]},
                    {"object-types": ["policy"]}):
        got = [e["operation"]["operation-type"] for e in cat.log(None, **filters)[0]]
        assert got == policy_ops, (filters, got)
    assert_error(cat.query({"catalog-objects-by-name": [["db", "nothing"]]}), 404)

    cat.policy("POST", ["db"], "/expiry/mappings", {"target": table_target}, expect=204)
    detached = one("x-floe-detach-policy", 5)
    assert detached["target"] == {**table_target, "table-uuid": table_uuid}
    assert "parameters" not in detached
    cat.policy("DELETE", ["db"], "/expiry?detach-all=true", expect=204)
    assert one("x-floe-drop-policy", 6)["detach-all"] is True
    # Made again under its name, it is a new policy: a new uuid, a new sequence.
    cat.policy("POST", ["db"], "", {"name": "expiry", "type": "system.snapshot-expiry",
                                    "content": content}, expect=200)
    again = one("x-floe-create-policy", 1)
    assert again["policy-uuid"] != policy_uuid and "description" not in again
    check_log(cat.everything(), contiguous=True)


def test_register_overwrite_records_the_replaced_table(server, api):
    cat = new_catalog(api, server)
    cat.create_namespace(["r"], expect=200)
    a = cat.create_table(["r"], "a", expect=200).json()
    b = cat.create_table(["r"], "b", expect=200).json()
    cat.drop_table(["r"], "b", expect=204)
    token = cat.end_token()
    r = cat.call("POST", f"/namespaces/{ns_path(['r'])}/register",
                 {"name": "a", "metadata-location": b["metadata-location"], "overwrite": True})
    assert r.status_code == 200, r.text
    events = cat.log(token)[0]
    # Two events: table a leaves (a drop in its own history), then b's register.
    assert [e["operation"]["operation-type"] for e in events] == ["drop-table", "register-table"]
    assert events[-1]["operation"]["table-uuid"] == b["metadata"]["table-uuid"]
    assert events[-1]["operation"]["metadata-location-before"] == a["metadata-location"]
    # What a consumer following table a by its uuid needs: an event saying it is gone.
    a_history = cat.log(**{"catalog-objects-by-uuid": [a["metadata"]["table-uuid"]]})[0]
    assert a_history[-1]["request-id"] == events[-1]["request-id"], \
        "the overwrite is in the replaced table's history"
    assert a_history[-1]["operation"]["operation-type"] == "drop-table"
    assert a_history[-1]["operation"]["purge"] is False
    assert a_history[-1]["operation"]["metadata-location-before"] == a["metadata-location"]


def test_a_request_with_more_events_than_a_page(module_server_factory):
    """One transaction creating 1005 tables: 1005 events with one request id, the page
    size capped at 1000 (default 100), and paging over them loses nothing."""
    server = module_server_factory(["--fsync", "false"])
    cat = Catalog(root_api(server), "default")
    cat.create_namespace(["big"], expect=200)
    token = cat.end_token()
    n = 1005
    cat.transaction([{
        "identifier": ident(["big"], f"t{i:04d}"),
        "requirements": [{"type": "assert-create"}],
        "updates": [{"action": "add-schema", "schema": SCHEMA},
                    {"action": "set-current-schema", "schema-id": -1}],
    } for i in range(n)], expect=204)
    rid = cat.request_id
    capped = cat.page({"continuation-token": token, "page-size": 5000})
    assert len(capped["events"]) == 1000
    assert len(cat.page({"continuation-token": token})["events"]) == 100
    events = cat.log(token)[0]
    assert len(events) == n
    assert {e["request-id"] for e in events} == {rid}
    assert {e["request-event-count"] for e in events} == {n}
    assert [e["operation"]["identifier"]["name"] for e in events] == [
        f"t{i:04d}" for i in range(n)]
    check_log(events)
    assert cat.log(token, page_size=333)[0] == events


# ---- 3. paging, tokens and filters --------------------------------------------------------

@pytest.fixture(scope="module")
def filled(server, api):
    """A catalog with nested namespaces, tables, a cross-namespace rename, a dropped
    table and a view."""
    cat = new_catalog(api, server, "filter")
    for levels in (["acc"], ["acc", "tax"], ["accounting"], ["other"]):
        cat.create_namespace(levels, expect=200)
    paid = cat.create_table(["acc", "tax"], "paid", expect=200).json()["metadata"]["table-uuid"]
    cat.set_property(["acc", "tax"], "paid", "a", "1", expect=200)
    moved = cat.create_table(["acc", "tax"], "moved", expect=200).json()["metadata"]["table-uuid"]
    cat.rename_table((["acc", "tax"], "moved"), (["other"], "moved"), expect=204)
    cat.set_property(["other"], "moved", "b", "2", expect=200)
    books = cat.create_table(["accounting"], "books", expect=200).json()["metadata"]["table-uuid"]
    gone = cat.create_table(["acc"], "gone", expect=200).json()["metadata"]["table-uuid"]
    cat.set_property(["acc"], "gone", "c", "3", expect=200)
    cat.drop_table(["acc"], "gone", expect=204)
    view = cat.create_view(["acc"], "v", expect=200).json()["metadata"]["view-uuid"]
    cat.update_namespace(["acc", "tax"], updates={"x": "y"}, expect=200)
    return cat, {"paid": paid, "moved": moved, "books": books, "gone": gone, "view": view}


def test_paging_walks_the_whole_log_and_the_token_waits_at_the_end(filled):
    cat, _ = filled
    full = cat.everything()
    assert len(full) >= 16
    check_log(full)
    walked, token, pages = [], None, 0
    while True:
        body = {"page-size": 2}
        if token:
            body["continuation-token"] = token
        page = cat.page(body)
        assert len(page["events"]) <= 2
        pages += 1
        walked += page["events"]
        if not page["events"]:
            break
        token = page["continuation-token"]
    assert walked == full, "page-size 2 loses or repeats nothing"
    assert pages == (len(full) + 1) // 2 + 1
    # The end token: an empty page and the same token, again and again.
    end = cat.page({"continuation-token": token})
    assert end == {"continuation-token": token, "events": []}
    # The default page size and an oversized one (capped) answer the same log.
    assert cat.page({})["events"] == full
    assert cat.page({"page-size": 1_000_000})["events"] == full
    # A new change appears after the end token, and only it.
    cat.create_namespace(["late"], expect=200)
    rid = cat.request_id
    after = cat.page({"continuation-token": token})
    assert [e["request-id"] for e in after["events"]] == [rid]
    assert after["events"][0]["position"] > full[-1]["position"]
    assert cat.page({"continuation-token": after["continuation-token"]})["events"] == []
    # A read is never replayed, even with an Idempotency-Key.
    key = {"Idempotency-Key": str(uuid.uuid4())}
    end = after["continuation-token"]
    assert cat.api.call("POST", f"/v1/{cat.name}/events", {"continuation-token": end},
                        headers=key).json()["events"] == []
    cat.create_namespace(["later"], expect=200)
    again = cat.api.call("POST", f"/v1/{cat.name}/events", {"continuation-token": end},
                         headers=key)
    assert again.headers.get("idempotency-replayed") is None
    assert [e["operation"]["operation-type"] for e in again.json()["events"]] == [
        "create-namespace"]


def test_since_timestamp(filled):
    cat, _ = filled
    full = cat.everything()
    middle = full[len(full) // 2]["timestamp-ms"]
    for since in (0, full[0]["timestamp-ms"], middle, full[-1]["timestamp-ms"],
                  full[-1]["timestamp-ms"] + 1, int(time.time() * 1000) + 3_600_000):
        got = cat.log(**{"since-timestamp-ms": since})[0]
        assert got == [e for e in full if e["timestamp-ms"] >= since], since
    # With a token too: both apply.
    token = cat.page({"page-size": 3})["continuation-token"]
    got = cat.log(token, **{"since-timestamp-ms": middle})[0]
    assert got == [e for e in full[3:] if e["timestamp-ms"] >= middle]


def test_filters(filled):
    cat, uuids = filled
    full = cat.everything()

    def ops(events):
        return [e["operation"]["operation-type"] for e in events]

    def query(**filters):
        got = cat.log(**filters)[0]
        # Paging a filtered query gives the same events.
        assert cat.log(page_size=1, **filters)[0] == got
        return got

    def where(pred):
        return [e for e in full if pred(e)]

    # operation-types
    got = query(**{"operation-types": ["create-table", "drop-table"]})
    assert got == where(lambda e: e["operation"]["operation-type"] in ("create-table",
                                                                        "drop-table"))
    assert ops(got).count("create-table") == 4 and ops(got).count("drop-table") == 1
    assert query(**{"operation-types": ["drop-view"]}) == []

    # object-types
    ns = query(**{"object-types": ["namespace"]})
    assert ns and all(o.endswith("-namespace") or o == "update-namespace-properties"
                      for o in ops(ns))
    assert ns == where(lambda e: "namespace" in e["operation"]
                       and "identifier" not in e["operation"])
    tables_views = query(**{"object-types": ["table", "view"]})
    assert tables_views == where(lambda e: "table-uuid" in e["operation"]
                                 or "view-uuid" in e["operation"])
    assert ops(query(**{"object-types": ["view"]})) == ["create-view"]
    # The catalog's own events are of no object type the query names.
    assert not any(o.startswith("x-floe") for o in ops(query(**{
        "object-types": ["namespace", "table", "view"]})))

    # catalog-objects-by-name: prefix match level by level.
    def names_of(e):
        op = e["operation"]
        paths = [op[k]["namespace"] + [op[k]["name"]]
                 for k in ("identifier", "source", "destination") if k in op]
        if "namespace" in op:
            paths.append(op["namespace"])
        return paths

    def under(prefix):
        return where(lambda e: any(p[: len(prefix)] == prefix for p in names_of(e)))

    acc = query(**{"catalog-objects-by-name": [["acc"]]})
    assert acc == under(["acc"])
    assert all(e["operation"].get("namespace", ["acc"])[0] == "acc" or
               any(p[0] == "acc" for p in names_of(e)) for e in acc)
    assert not any(p[0] == "accounting" for e in acc for p in names_of(e)), \
        "acc is not a prefix of accounting: levels match whole"
    assert query(**{"catalog-objects-by-name": [["accounting"]]}) == under(["accounting"])
    tax = query(**{"catalog-objects-by-name": [["acc", "tax"]]})
    assert tax == under(["acc", "tax"])
    paid = query(**{"catalog-objects-by-name": [["acc", "tax", "paid"]]})
    assert ops(paid) == ["create-table", "update-table"]
    assert {e["operation"]["table-uuid"] for e in paid} == {uuids["paid"]}
    # A rename matches by both names.
    other = query(**{"catalog-objects-by-name": [["other"]]})
    assert ops(other) == ["create-namespace", "rename-table", "update-table"]
    assert "rename-table" in ops(tax)
    # Several names: any of them.
    both = query(**{"catalog-objects-by-name": [["accounting"], ["other"]]})
    assert both == where(lambda e: e in under(["accounting"]) or e in under(["other"]))
    # Combined with another filter: all must pass.
    assert query(**{"catalog-objects-by-name": [["acc"]], "object-types": ["namespace"]}) == [
        e for e in under(["acc"]) if "identifier" not in e["operation"]
        and "namespace" in e["operation"]]

    # A view by name.
    assert ops(query(**{"catalog-objects-by-name": [["acc", "v"]]})) == ["create-view"]

    # catalog-objects-by-uuid: the whole history, a dropped table's included.
    gone = query(**{"catalog-objects-by-uuid": [uuids["gone"]]})
    assert ops(gone) == ["create-table", "update-table", "drop-table"]
    assert [e["entity-sequence"] for e in gone] == [1, 2, 3]
    # The dropped name names nothing now: 404 (find it by its uuid).
    assert_error(cat.query({"catalog-objects-by-name": [["acc", "gone"]]}), 404)
    moved = query(**{"catalog-objects-by-uuid": [uuids["moved"], uuids["view"]]})
    assert ops(moved) == ["create-table", "rename-table", "update-table", "create-view"]
    # Upper-case uuids are the same uuids.
    assert query(**{"catalog-objects-by-uuid": [uuids["gone"].upper()]}) == gone
    assert query(**{"catalog-objects-by-uuid": [str(uuid.uuid4())]}) == []


# ---- 4. bad requests ----------------------------------------------------------------------

def test_bad_queries_are_refused_with_the_error_body(server, api, filled):
    cat, _ = filled
    before = cat.everything()
    good_token = cat.page({"page-size": 1})["continuation-token"]
    catalog_id, _ = decode_token(good_token)
    last = before[-1]["position"]
    default = Catalog(api, "default")
    other_token = default.page({"page-size": 1})["continuation-token"]

    cases = [
        ("malformed JSON", None, '{"page-size": 2'),
        ("not an object", None, "[1, 2]"),
        ("unknown field", {"pagesize": 2}, None),
        ("unknown field next to good ones", {"page-size": 2, "sort": "desc"}, None),
        ("page-size 0", {"page-size": 0}, None),
        ("negative page-size", {"page-size": -5}, None),
        ("page-size a string", {"page-size": "2"}, None),
        ("garbage token", {"continuation-token": "garbage!"}, None),
        ("token of another version", {"continuation-token": base64.urlsafe_b64encode(
            f"v2:{catalog_id}:1".encode()).decode().rstrip("=")}, None),
        ("negative position", {"continuation-token": encode_token(catalog_id, -1)}, None),
        ("token of another catalog", {"continuation-token": other_token}, None),
        ("token beyond the log", {"continuation-token": encode_token(catalog_id, last + 10_000)},
         None),
        ("unknown operation type", {"operation-types": ["create-tables"]}, None),
        ("unknown object type", {"object-types": ["function"]}, None),
        ("catalog is no object type", {"object-types": ["catalog"]}, None),
        ("empty name", {"catalog-objects-by-name": [[]]}, None),
        ("empty name level", {"catalog-objects-by-name": [["acc", ""]]}, None),
        ("invalid uuid", {"catalog-objects-by-uuid": ["not-a-uuid"]}, None),
        ("custom filter", {"custom-filters": {"x": "y"}}, None),
    ]
    for what, body, raw in cases:
        r = cat.query(body, raw=raw)
        error = assert_error(r, 400)
        assert error["type"], what
    # Names that do not exist, and an unknown catalog: 404.
    assert_error(cat.query({"catalog-objects-by-name": [["nope"]]}), 404)
    assert_error(cat.query({"catalog-objects-by-name": [["acc", "tax", "nope"]]}), 404)
    assert_error(Catalog(api, unique("nocat")).query({}), 404)
    # Nothing changed, and the good token still works.
    assert cat.everything() == before
    assert cat.page({"continuation-token": good_token})["events"] == before[1:]


# ---- 5. --events false --------------------------------------------------------------------

def test_events_off_writes_no_events(module_server_factory):
    server = module_server_factory(["--events", "false"])
    api = root_api(server)
    cat = Catalog(api, "default")
    cat.create_namespace(["db"], expect=200)
    cat.create_table(["db"], "t", expect=200)
    cat.set_property(["db"], "t", "k", "v", expect=200)
    other = new_catalog(api, server)
    grant(api, other.name, "readers", "TABLE_READ_DATA")
    for c in (cat, other):
        page = c.page({})
        assert page["events"] == [], page
        again = c.page({"continuation-token": page["continuation-token"]})
        assert again == {"continuation-token": page["continuation-token"], "events": []}
    assert_error(cat.query({"page-size": 0}), 400)  # still validated


# ---- 6. relays to real brokers ------------------------------------------------------------

def cloud_event_as_rest(ce: dict) -> dict:
    """A relayed CloudEvent as the REST endpoint shows it."""
    data = dict(ce["data"])
    rid = data.pop("request-id")
    count = data.pop("request-event-count")
    principal = data.pop("principal")
    data.pop("catalog", None)
    return {"event-id": ce["id"], "request-id": rid, "request-event-count": count,
            "timestamp-ms": rfc3339_ms(ce["time"]), "actor": {"id": principal},
            "operation": data, "position": ce["position"], "entity-sequence": ce["entityseq"]}


def check_cloud_event(ce: dict):
    assert set(ce) == {"specversion", "id", "source", "type", "subject", "time",
                       "datacontenttype", "data", "position", "entityseq"}, ce
    assert ce["specversion"] == "1.0" and ce["datacontenttype"] == "application/json"
    assert uuid.UUID(ce["id"]).version == 7
    op = ce["data"]["operation-type"]
    assert ce["type"] == "dev.floe." + op, ce
    assert ce["time"].endswith("Z") and rfc3339_ms(ce["time"]) > 0
    if op == "x-floe-update-security":
        assert ce["source"] == "/" and ce["subject"] == "security" and "catalog" not in ce["data"]
        assert ce["data"]["action"], ce
    else:
        assert ce["source"] == "/catalogs/" + ce["data"]["catalog"], ce
    if "identifier" in ce["data"]:
        i = ce["data"]["identifier"]
        assert ce["subject"] == ".".join(i["namespace"] + [i["name"]]), ce
    elif "namespace" in ce["data"]:
        assert ce["subject"] == ".".join(ce["data"]["namespace"]), ce
    elif op.endswith("-catalog"):
        assert ce["subject"] == ce["data"]["catalog"], ce


class Workload:
    """Changes across two catalogs (one dropped at the end), with security changes in
    between; remembers what the endpoint can show."""

    def __init__(self, server: FloeServer):
        self.server = server
        self.api = root_api(server)
        self.default = Catalog(self.api, "default")
        self.dropped: list[str] = []
        self.ns = unique("relay")

    def run(self):
        d = self.default
        d.create_namespace([self.ns], {"a": "1"}, expect=200)
        for name in ("t1", "t2"):
            d.create_table([self.ns], name, expect=200)
        for i in range(3):
            d.set_property([self.ns], "t1", "i", str(i), expect=200)
            d.set_property([self.ns], "t2", "i", str(i), expect=200)
        d.transaction([{"identifier": ident([self.ns], n),
                        "updates": [{"action": "set-properties", "updates": {"tx": "1"}}]}
                       for n in ("t1", "t2")], expect=204)
        grant(self.api, "default", unique("role"), "TABLE_READ_DATA")
        d.rename_table(([self.ns], "t2"), ([self.ns], "t2b"), expect=204)
        d.create_view([self.ns], "v", expect=200)
        d.policy("POST", [self.ns], "", {"name": "expiry", "type": "system.snapshot-expiry",
                                         "content": '{"enable":true}'}, expect=200)
        d.policy("PUT", [self.ns], "/expiry/mappings",
                 {"target": {"type": "table-like", "path": [self.ns, "t1"]},
                  "parameters": {"k": "v"}}, expect=204)
        d.drop_table([self.ns], "t2b", expect=204)
        extra = new_catalog(self.api, self.server, "relaycat")
        extra.create_namespace(["x"], expect=200)
        extra.drop_namespace(["x"], expect=204)
        r = self.api.call("DELETE", f"{MGMT}/catalogs/{extra.name}")
        assert r.status_code == 204, r.text
        self.dropped.append(extra.name)
        d.update_namespace([self.ns], updates={"done": "1"}, expect=200)

    def commit(self, i: int) -> float:
        started = time.monotonic()
        self.default.set_property([self.ns], "t1", "later", str(i), expect=200)
        return time.monotonic() - started

    def last_id(self) -> str:
        return self.default.everything()[-1]["event-id"]

    def check(self, relayed: list[dict]):
        """The relayed CloudEvents are the whole outbox, in position order, each once,
        each exactly as the endpoint reports it."""
        for ce in relayed:
            check_cloud_event(ce)
        positions = [ce["position"] for ce in relayed]
        assert positions == list(range(1, len(relayed) + 1)), \
            f"relayed positions are not 1..N in order: {positions}"
        assert len({ce["id"] for ce in relayed}) == len(relayed)
        as_rest = [cloud_event_as_rest(ce) for ce in relayed]
        endpoint = self.default.everything()
        assert [e for e, ce in zip(as_rest, relayed)
                if ce["source"] == "/catalogs/default"] == endpoint
        actions = [ce["data"]["action"] for ce in relayed
                   if ce["data"]["operation-type"] == "x-floe-update-security"]
        assert "create-catalog-role" in actions and "change-grant" in actions, actions
        for name in self.dropped:
            mine = [ce["data"]["operation-type"] for ce in relayed
                    if ce["source"] == f"/catalogs/{name}"]
            assert mine == ["x-floe-create-catalog", "create-namespace", "drop-namespace",
                            "x-floe-drop-catalog"], mine
        # Entity sequences per entity over the whole outbox.
        seqs: dict[str, list[int]] = {}
        for ce in relayed:
            seqs.setdefault(self.entity(ce), []).append(ce["entityseq"])
        for entity, s in seqs.items():
            assert s == list(range(1, len(s) + 1)), f"{entity}: {s}"

    @staticmethod
    def entity(ce: dict) -> str:
        data = ce["data"]
        if "table-uuid" in data:
            return "object:" + data["table-uuid"]
        if "view-uuid" in data:
            return "object:" + data["view-uuid"]
        if "policy-uuid" in data:
            return "object:" + data["policy-uuid"]
        if data["operation-type"] == "x-floe-update-security":
            return "security"
        if "namespace" in data:
            return f"namespace:{data['catalog']}:" + "\x1f".join(data["namespace"])
        return "catalog:" + data["catalog"]


def relay_scenario(server: FloeServer, read, stop_broker, start_broker,
                   ordered: bool = True) -> Workload:
    """The workload, everything relayed; then the broker down: commits still quick;
    then the broker back: the backlog arrives.

    `read()` returns what the broker holds, in the order it hands it out (ordered: a
    stream or a webhook, which must always hold a gap-free prefix of the positions) or
    sorted by position (Kafka: records of different keys sit in different partitions,
    which a consumer sees fill at different moments, so only the complete set is
    checked)."""
    work = Workload(server)

    def relayed_through(last_id: str, what: str, timeout: float) -> list:
        def complete():
            got = read()
            positions = [ce["position"] for ce in got]
            gap_free = positions == list(range(1, len(got) + 1))
            if ordered:
                assert gap_free, f"the broker holds positions {positions}"
            return got if gap_free and last_id in {ce["id"] for ce in got} else None

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = complete()
            if got is not None:
                return got
            time.sleep(0.1)
        work.check(read())  # says what is wrong
        pytest.fail(f"timed out after {timeout}s waiting for {what}")

    work.run()
    work.check(relayed_through(work.last_id(), "the relayed events", 60))
    baseline = [work.commit(i) for i in range(5)]
    relayed_through(work.last_id(), "the relayed commits", 60)

    stop_broker()
    down = []
    for i in range(10):  # over a second: the relay tries the broker meanwhile
        down.append(work.commit(100 + i))
        time.sleep(0.1)
    # A broker that is down never holds up a commit.
    assert max(down) < max(1.0, 10 * statistics.median(baseline)), (baseline, down)
    assert len(work.default.log(None, **{"operation-types": ["update-table"]})[0]) >= 15
    start_broker()
    work.check(relayed_through(work.last_id(), "the backlog after the broker came back", 90))
    return work


def run_script(script: str, *args: str, timeout: float = 600) -> str:
    out = subprocess.run(["bash", str(ROOT / "scripts" / script), *args],
                         capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        pytest.fail(f"{script} {' '.join(args)} failed:\n{out.stderr[-4000:]}", pytrace=False)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


class Broker:
    """A broker started by the project's script, on a fixed port and directory so that
    it can be stopped and started again on the same data. The port is outside the
    kernel's ephemeral range, so that no client socket takes it while the broker is down
    (tests/support/ports.py)."""

    def __init__(self, script: str, work: Path):
        self.script = script
        self.work = work
        self.port = restartable_port()
        self.address = ""

    def start(self) -> "Broker":
        self.address = run_script(self.script, "start", str(self.work), str(self.port))
        return self

    def stop(self):
        run_script(self.script, "stop", str(self.work), timeout=120)


@pytest.fixture(scope="module")
def nats_broker(_e2e_tmp):
    broker = Broker("nats-server.sh", _e2e_tmp / "nats")
    try:
        yield broker.start()
    finally:
        broker.stop()
        shutil.rmtree(broker.work, ignore_errors=True)


@pytest.fixture(scope="module")
def kafka_broker(_e2e_tmp):
    broker = Broker("kafka-server.sh", _e2e_tmp / "kafka")
    try:
        yield broker.start()
    finally:
        broker.stop()
        shutil.rmtree(broker.work, ignore_errors=True)


def nats_messages(url: str, stream: str = "FLOE_EVENTS") -> list:
    """Every message in the stream: (subject, headers, body)."""
    import nats
    from nats.js.errors import NotFoundError

    async def main():
        nc = await nats.connect(url, connect_timeout=5, max_reconnect_attempts=0)
        try:
            js = nc.jetstream()
            try:
                info = await js.stream_info(stream)
            except NotFoundError:
                return []
            out = []
            if info.state.messages == 0:
                return out
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                m = await js.get_msg(stream, seq)
                out.append((m.subject, dict(m.headers or {}), json.loads(m.data)))
            return out
        finally:
            await nc.close()

    return asyncio.run(main())


@functools.cache
def event_schema():
    import jsonschema

    root = Path(__file__).resolve().parents[2]
    schema = json.loads((root / "docs/events.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_nats_relay(module_server_factory, nats_broker):
    server = module_server_factory(["--events-sink", nats_broker.address])
    seen_subjects = set()

    def read():
        out = []
        for subject, headers, ce in nats_messages(nats_broker.address):
            kind = {"x-floe-update-security": "security"}.get(ce["data"]["operation-type"])
            op = ce["data"]["operation-type"]
            if kind is None:
                kind = ("table" if op.endswith("-table") else "view" if op.endswith("-view")
                        else "catalog" if op.endswith("-catalog")
                        else "policy" if op.endswith("-policy") else "namespace")
            assert subject == f"floe.events.{kind}.{op}", (subject, ce)
            assert headers.get("Nats-Msg-Id") == ce["id"], headers
            # Every relayed event is what docs/events.schema.json documents.
            event_schema().validate(ce)
            seen_subjects.add(subject)
            out.append(ce)
        return out

    relay_scenario(server, read, nats_broker.stop, nats_broker.start)
    assert "floe.events.table.update-table" in seen_subjects


def test_an_event_too_large_for_the_broker_is_relayed_without_its_updates(
        module_server_factory, nats_broker):
    """NATS takes at most 1 MiB a message, and a commit's updates can be larger: such an
    event goes without its largest data members (named in x-floe-omitted), and the
    events after it follow, in order. The pull endpoint keeps it whole. A stream of its
    own, apart from test_nats_relay's."""
    sink = f"{nats_broker.address}?stream=FLOE_BIG&subject=floe.big"
    server = module_server_factory(["--events-sink", sink])
    default = Catalog(root_api(server), "default")
    ns = unique("big")
    default.create_namespace([ns], expect=200)
    default.create_table([ns], "t", expect=200)
    big = "x" * (1536 * 1024)
    default.set_property([ns], "t", "big", big, expect=200)
    default.set_property([ns], "t", "after", "1", expect=200)

    deadline = time.monotonic() + 60
    while True:
        relayed = [ce for _, _, ce in nats_messages(nats_broker.address, "FLOE_BIG")]
        updates = [ce for ce in relayed if ce["data"]["operation-type"] == "update-table"]
        if len(updates) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [ce["position"] for ce in relayed] == list(range(1, len(relayed) + 1))
    assert len(updates) == 2, [ce["data"]["operation-type"] for ce in relayed]
    shrunk, after = updates
    for ce in relayed:
        event_schema().validate(ce)
    assert shrunk["data"]["x-floe-omitted"] == ["updates"], shrunk["data"]
    assert "updates" not in shrunk["data"]
    assert shrunk["data"]["metadata-location"], shrunk["data"]
    assert "x-floe-omitted" not in after["data"]
    assert after["data"]["updates"][0]["updates"] == {"after": "1"}
    whole = [e for e in default.everything() if e["operation"]["operation-type"] == "update-table"]
    assert whole[0]["operation"]["updates"][0]["updates"]["big"] == big


def kafka_records(bootstrap: str, topic: str = "floe-events") -> list | None:
    """Every record in the topic: (partition, offset, key, headers, body), read from the
    beginning of each partition up to its high watermark; None while the broker cannot
    tell (a topic just created, a broker just restarted)."""
    from confluent_kafka import KafkaException

    try:
        return _kafka_records(bootstrap, topic)
    except KafkaException as e:
        if e.args[0].retriable() or e.args[0].code() in (6, 3, 5):
            return None
        raise


def _kafka_records(bootstrap: str, topic: str) -> list:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("e2e"),
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "socket.timeout.ms": 10000})
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        info = metadata.topics.get(topic)
        if info is None or info.error is not None:
            return []
        partitions = sorted(info.partitions)
        highs = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                 for p in partitions}
        pending = {p for p in partitions if highs[p] > 0}
        if not pending:
            return []
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        out = []
        deadline = time.monotonic() + 30
        while pending and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            if m.offset() < highs[m.partition()]:
                out.append((m.partition(), m.offset(), m.key().decode(),
                            dict((k, v.decode()) for k, v in (m.headers() or [])),
                            json.loads(m.value())))
            if m.offset() >= highs[m.partition()] - 1:
                pending.discard(m.partition())
        assert not pending, "could not read the topic to its end"
        return out
    finally:
        consumer.close()


def kafka_key_matches(key: str, ce: dict, default_id: str) -> bool:
    """Whether a record's key is its event's entity: a table's or view's uuid, a
    namespace's or catalog's key (with the catalog's id: only the default catalog's is
    known here, any id for the other), or `security`."""
    data = ce["data"]
    if "table-uuid" in data or "view-uuid" in data or "policy-uuid" in data or "action" in data:
        return key == Workload.entity(ce)
    catalog_id = default_id if data["catalog"] == "default" else r"\d+"
    if "namespace" in data:
        pattern = f"namespace:{catalog_id}:" + re.escape("\x1f".join(data["namespace"]))
    else:
        pattern = f"catalog:{catalog_id}"
    return re.fullmatch(pattern, key) is not None


def test_kafka_relay(module_server_factory, kafka_broker):
    server = module_server_factory(["--events-sink", f"kafka://{kafka_broker.address}"])
    default_id = decode_token(Catalog(root_api(server), "default").end_token())[0]
    last_records = []

    def read():
        records = kafka_records(kafka_broker.address)
        if records is None:
            return []
        last_records[:] = records
        by_partition: dict[int, list] = {}
        for partition, offset, key, headers, ce in records:
            assert kafka_key_matches(key, ce, default_id), (key, ce)
            assert headers.get("ce_id") == ce["id"], headers
            assert headers.get("content-type") == "application/cloudevents+json", headers
            by_partition.setdefault(partition, []).append((offset, key, ce))
        # Every key lives in one partition, in position order with its sequence.
        keys: dict[str, tuple[int, list]] = {}
        for partition, rows in by_partition.items():
            rows.sort()
            for _, key, ce in rows:
                p, seqs = keys.setdefault(key, (partition, []))
                assert p == partition, f"key {key} in partitions {p} and {partition}"
                seqs.append((ce["position"], ce["entityseq"]))
        for key, (_, seqs) in keys.items():
            assert seqs == sorted(seqs), f"{key}: out of order {seqs}"
            assert [s for _, s in seqs] == list(range(1, len(seqs) + 1)), f"{key}: {seqs}"
        # The topic has no order across partitions: the position gives it.
        return sorted((ce for *_, ce in records), key=lambda ce: ce["position"])

    work = relay_scenario(server, read, kafka_broker.stop, kafka_broker.start, ordered=False)
    # The table's key is its uuid: its events share a partition across the rename.
    keys = {key for _, _, key, _, _ in last_records}
    assert any(k.startswith("object:") for k in keys) and "security" in keys
    assert any(k.startswith("namespace:") for k in keys)
    assert any(k.startswith("catalog:") for k in keys)
    assert work.dropped


class WebhookReceiver:
    """A Standard Webhooks receiver: checks each delivery's signature, answers 500 to
    the first `fail_first` deliveries, and keeps the accepted batches."""

    def __init__(self, secret: bytes, fail_first: int = 0):
        self.secret = secret
        self.fail_first = fail_first
        self.port = free_port()
        self.lock = threading.Lock()
        self.deliveries = 0
        self.accepted: list[tuple[dict, list]] = []  # (headers, batch)
        self.refused: list[list] = []
        self.problems: list[str] = []
        self.httpd = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status = receiver.receive(self.path, dict(self.headers.items()), body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    def receive(self, path: str, headers: dict, body: bytes) -> int:
        h = {k.lower(): v for k, v in headers.items()}
        problems = []
        if path != "/hook":
            problems.append(f"path {path}")
        if h.get("content-type") != "application/cloudevents-batch+json":
            problems.append(f"content-type {h.get('content-type')}")
        msg_id, ts = h.get("webhook-id", ""), h.get("webhook-timestamp", "")
        expected = base64.b64encode(hmac.new(
            self.secret, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()).decode()
        signatures = [s.split(",", 1)[1] for s in h.get("webhook-signature", "").split()
                      if s.startswith("v1,")]
        if not any(hmac.compare_digest(expected, s) for s in signatures):
            problems.append(f"bad signature {h.get('webhook-signature')}")
        if not ts.isdigit() or abs(int(ts) - time.time()) > 300:
            problems.append(f"stale timestamp {ts}")
        batch = json.loads(body)
        if (not isinstance(batch, list) or not batch
                or f"{batch[0].get('id')}_{batch[-1].get('id')}" != msg_id):
            problems.append("webhook-id is not <first event id>_<last event id>")
        with self.lock:
            self.deliveries += 1
            if problems:
                self.problems += problems
                return 400
            if self.deliveries <= self.fail_first:
                self.refused.append(batch)
                return 500
            self.accepted.append((h, batch))
            return 200

    def events(self) -> list:
        with self.lock:
            assert not self.problems, self.problems
            return [ce for _, batch in self.accepted for ce in batch]


def test_webhook_relay(module_server_factory):
    secret = b"e2e-webhook-secret-0123456789"
    receiver = WebhookReceiver(secret, fail_first=3)
    receiver.start()
    try:
        server = module_server_factory(["--events-sink", receiver.url],
                                       {"FLOE_EVENTS_WEBHOOK_SECRET": secret.decode()})

        def restart():
            receiver.start()

        relay_scenario(server, receiver.events, receiver.stop, restart)
        # The refused deliveries were retried: what was refused arrived later, in order.
        assert len(receiver.refused) == 3
        accepted_ids = [ce["id"] for ce in receiver.events()]
        for batch in receiver.refused:
            ids = [ce["id"] for ce in batch]
            assert set(ids) <= set(accepted_ids)
        # The first refused batch starts at the beginning: later events waited.
        assert receiver.refused[0][0]["position"] == 1
        assert receiver.events()[0]["position"] == 1
    finally:
        receiver.stop()


class DeduplicatingReceiver(WebhookReceiver):
    """A receiver doing what the Standard Webhooks specification advises: it processes
    each message once, by `webhook-id`, and acknowledges a message it already processed
    with 2xx. Its first delivery is processed, then held until `go` is set and answered
    500 (the sender must retry it: a failure after processing, or an answer lost)."""

    def __init__(self, secret: bytes):
        super().__init__(secret)
        self.seen: set[str] = set()
        self.processed: list[dict] = []
        self.go = threading.Event()
        self.first = True

    def receive(self, path: str, headers: dict, body: bytes) -> int:
        message_id = {k.lower(): v for k, v in headers.items()}.get("webhook-id", "")
        with self.lock:
            self.deliveries += 1
            if message_id in self.seen:
                return 200
            self.seen.add(message_id)
            self.processed += json.loads(body)
            first, self.first = self.first, False
        if first:
            self.go.wait(20)
            return 500
        return 200


def test_a_receiver_deduplicating_by_webhook_id_loses_nothing(module_server_factory):
    secret = b"e2e-webhook-secret-dedupe-0123456789"
    receiver = DeduplicatingReceiver(secret)
    receiver.start()
    try:
        server = module_server_factory(["--events-sink", receiver.url],
                                       {"FLOE_EVENTS_WEBHOOK_SECRET": secret.decode()})
        wait_for(lambda: receiver.processed, 30, "the first delivery")
        cat = Catalog(root_api(server), "default")
        for i in range(3):  # while the first delivery waits for its answer
            cat.create_namespace([f"held{i}"], expect=200)
        receiver.go.set()
        wait_for(lambda: receiver.deliveries >= 2, 30, "the retried delivery")
        cat.create_namespace(["after"], expect=200)
        last = cat.everything()[-1]["event-id"]
        wait_for(lambda: last in {ce["id"] for ce in receiver.processed}, 30, "the last event")
        positions = sorted({ce["position"] for ce in receiver.processed})
        assert positions == list(range(1, positions[-1] + 1)), \
            f"the receiver never saw positions {sorted(set(range(1, positions[-1])) - set(positions))}"
    finally:
        receiver.go.set()
        receiver.stop()


def test_relay_resumes_after_a_crash_from_its_confirmed_position(module_server_factory):
    """kill -9 the relaying server: once the dead node's lease (--events-relay-lease)
    lapses the restarted one takes over and publishes what came since, not again what
    the webhook already confirmed."""
    secret = b"e2e-webhook-secret-crash-0123456789"
    receiver = WebhookReceiver(secret)
    receiver.start()
    try:
        server = module_server_factory(
            ["--events-sink", receiver.url, "--events-relay-lease", "2"],
            {"FLOE_EVENTS_WEBHOOK_SECRET": secret.decode()})
        cat = Catalog(root_api(server), "default")
        cat.create_namespace(["resume"], expect=200)
        cat.create_table(["resume"], "t", expect=200)
        for i in range(3):
            cat.set_property(["resume"], "t", "i", str(i), expect=200)
        last = cat.everything()[-1]["event-id"]
        wait_for(lambda: last in {ce["id"] for ce in receiver.events()}, 30, "the events")
        time.sleep(0.5)  # the relay records the confirmation right after the 2xx
        delivered = len(receiver.events())
        server.restart(kill=True)
        cat = Catalog(root_api(server), "default")
        cat.set_property(["resume"], "t", "after", "crash", expect=200)
        endpoint = cat.everything()
        started = time.monotonic()
        wait_for(lambda: endpoint[-1]["event-id"] in {ce["id"] for ce in receiver.events()},
                 30, "the event made after the restart")
        assert time.monotonic() - started < 2 + 5, "taken over within the lease (and a retry)"
        relayed = receiver.events()
        assert len(relayed) == delivered + 1, "nothing confirmed was published again"
        assert [ce["position"] for ce in relayed] == list(range(1, len(relayed) + 1))
        assert [cloud_event_as_rest(ce) for ce in relayed
                if ce["source"] == "/catalogs/default"] == endpoint
    finally:
        receiver.stop()


def test_misconfigured_sinks_are_refused_at_start(floe_binary, _e2e_tmp):
    """A sink that cannot work is a configuration error at start, not a silent relay
    that never publishes (or publishes unsigned)."""
    cases = [
        (["--events-sink", "http://127.0.0.1:9/hook"], {"FLOE_EVENTS_WEBHOOK_SECRET": "short"},
         "FLOE_EVENTS_WEBHOOK_SECRET"),
        (["--events-sink", "http://127.0.0.1:9/hook"], {}, "FLOE_EVENTS_WEBHOOK_SECRET"),
        (["--events-sink", "ftp://127.0.0.1:9"], {}, "ftp"),
        (["--events-sink", "nats://127.0.0.1:9?topic=x"], {}, "topic"),
        (["--events", "false", "--events-sink", "nats://127.0.0.1:9"], {}, "--events"),
    ]
    base_env = {k: v for k, v in os.environ.items() if k != "FLOE_EVENTS_WEBHOOK_SECRET"}
    for args, env, needle in cases:
        data = Path(_e2e_tmp) / unique("badsink")
        data.mkdir()
        out = subprocess.run(
            [str(floe_binary), "serve", "--bind", f"127.0.0.1:{free_port()}",
             "--data-dir", str(data), *args],
            env={**base_env, **env, "FLOE_BOOTSTRAP_CREDENTIALS": "a,b0123456789abcdef"},
            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        output = out.stdout + out.stderr
        assert out.returncode != 0, f"{args}: started anyway\n{output}"
        assert needle in output, f"{args}: {output}"


def test_nats_relay_starts_with_the_broker_down(module_server_factory, _e2e_tmp):
    """A relay whose broker is not up yet does not stop the server: commits succeed, and
    the events arrive once the broker starts (the stream is created then)."""
    broker = Broker("nats-server.sh", _e2e_tmp / "nats-late")
    try:
        server = module_server_factory(["--events-sink", f"nats://127.0.0.1:{broker.port}"])
        cat = Catalog(root_api(server), "default")
        cat.create_namespace(["late"], expect=200)
        cat.create_table(["late"], "t", expect=200)
        for i in range(3):
            started = time.monotonic()
            cat.set_property(["late"], "t", "i", str(i), expect=200)
            assert time.monotonic() - started < 1.0
        broker.start()
        endpoint = cat.everything()
        want = [e["event-id"] for e in endpoint]

        def relayed():
            got = [ce for _, _, ce in nats_messages(broker.address)]
            return got if [ce["id"] for ce in got if ce["source"] == "/catalogs/default"] == want \
                else None

        got = wait_for(relayed, 60, "the events after the broker started")
        assert [ce["position"] for ce in got] == list(range(1, len(got) + 1))
        assert [cloud_event_as_rest(ce) for ce in got
                if ce["source"] == "/catalogs/default"] == endpoint
    finally:
        broker.stop()
        shutil.rmtree(broker.work, ignore_errors=True)
