"""Server-side scan planning end to end: PyIceberg with `scan-planning-mode=server` plans
its scans through Floe's `POST …/plan` and reads exactly what client-side planning reads."""

from __future__ import annotations

import datetime as dt
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.expressions import (
    And,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    Not,
    Or,
)

from conftest import ApiClient, access_token
from test_pyiceberg import ARROW_SCHEMA as ARROW
from test_pyiceberg import CREDENTIAL, SCHEMA, SPEC

BASE = dt.datetime(2024, 1, 1, 12, 0, 0)


def catalog(url: str, mode: str):
    return load_catalog(f"floe-{mode}", type="rest", uri=url, warehouse="default",
                        credential=CREDENTIAL, scope="catalog",
                        **{"scan-planning-mode": mode})


def rows(ids, days, categories) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "category": c, "ts": BASE + dt.timedelta(days=d)}
         for i, d, c in zip(ids, days, categories)], schema=ARROW)


FILTERS = [
    None,
    EqualTo("category", "a"),
    GreaterThan("id", 6),
    And(EqualTo("category", "b"), LessThan("ts", "2024-01-03T00:00:00")),
    Or(In("id", {1, 9}), IsNull("category")),
    In("category", {"a", "e"}),
    Not(EqualTo("category", "a")),
    GreaterThanOrEqual("ts", "2024-01-04T00:00:00"),
    # Whole days of `day(ts)` partitions decided by their day (no residual, so `count()`
    # takes the files' record counts), and a bound inside a day that leaves one.
    And(GreaterThanOrEqual("ts", "2024-01-02T00:00:00"), LessThan("ts", "2024-01-04T00:00:00")),
    GreaterThan("ts", "2024-01-02T12:00:00"),
    Not(LessThan("ts", "2024-01-05T00:00:00")),
    And(EqualTo("category", "d"), GreaterThan("id", 11)),
]


def ids(table, row_filter) -> list:
    scan = table.scan() if row_filter is None else table.scan(row_filter=row_filter)
    return sorted(scan.to_arrow().column("id").to_pylist(), key=lambda v: (v is None, v))


def test_pyiceberg_plans_on_the_server_and_reads_the_same_rows(floe_url):
    client = catalog(floe_url, "client")
    server = catalog(floe_url, "server")
    assert server.supports_server_side_planning()
    assert not client.supports_server_side_planning()
    ns = f"plan_{uuid.uuid4().hex[:10]}"
    client.create_namespace(ns)
    table = client.create_table((ns, "events"), schema=SCHEMA, partition_spec=SPEC)
    table.append(rows([1, 2, 3], [0, 0, 1], ["a", "b", "a"]))
    table.append(rows([4, 5, 6], [1, 2, 2], ["b", "a", "c"]))
    # No null partition values: PyIceberg 0.12 refuses a plan's `null` partition value
    # (its model allows none, though Iceberg does; Floe sends null, as Java's parser reads).
    table.append(rows([7, 8, 9, 10], [3, 3, 4, 4], ["c", "a", "e", "b"]))
    # One partition with several rows in one file: the rows must still be filtered.
    table.append(rows([11, 12, 13], [5, 5, 5], ["d", "d", "d"]))
    # A copy-on-write delete: a later snapshot that rewrites one data file.
    table.delete(EqualTo("id", 2))

    planned = server.load_table((ns, "events"))
    local = client.load_table((ns, "events"))
    for row_filter in FILTERS:
        assert ids(planned, row_filter) == ids(local, row_filter), row_filter
        scan = planned.scan() if row_filter is None else planned.scan(row_filter=row_filter)
        assert scan.count() == len(ids(local, row_filter)), row_filter
    assert ids(planned, None) == [1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
    assert ids(planned, FILTERS[-1]) == [12, 13]

    # The server pruned: a one-partition filter plans fewer files than the whole table.
    everything = list(planned.scan().plan_files())
    only_c = list(planned.scan(row_filter=EqualTo("category", "c")).plan_files())
    assert 0 < len(only_c) < len(everything)
    assert all(task.file.partition[1] == "c" for task in only_c)

    # Time travel: the snapshot before the delete still has id 2.
    before = planned.snapshots()[-2].snapshot_id
    old = planned.scan(snapshot_id=before).to_arrow().column("id").to_pylist()
    assert 2 in old

    # The same plan over plain HTTP names the same files.
    api = ApiClient(floe_url, access_token(floe_url))
    body = {"filter": {"type": "eq", "term": "category", "value": "c"}}
    r = api.call("POST", f"/v1/default/namespaces/{ns}/tables/events/plan", body)
    assert r.status_code == 200, r.text
    paths = {t["data-file"]["file-path"] for t in r.json()["file-scan-tasks"]}
    assert paths == {task.file.file_path for task in only_c}


def test_incremental_plans_read_what_the_appends_added(floe_url):
    client = catalog(floe_url, "client")
    ns = f"plan_{uuid.uuid4().hex[:10]}"
    client.create_namespace(ns)
    # Manifests merged at every append: each append's manifest keeps the older files as
    # EXISTING entries, which an incremental plan must not count again.
    table = client.create_table(
        (ns, "stream"), schema=SCHEMA, partition_spec=SPEC,
        properties={"commit.manifest-merge.enabled": "true",
                    "commit.manifest.min-count-to-merge": "2"})
    table.append(rows([1, 2], [0, 0], ["a", "b"]))
    table.append(rows([3], [1], ["a"]))
    table.delete(EqualTo("id", 1))  # rewrites a file: no append
    table.append(rows([4, 5], [2, 2], ["c", "c"]))
    table = client.load_table((ns, "stream"))
    snapshots = [s.snapshot_id for s in table.snapshots()]
    operations = [s.summary.operation.value for s in table.snapshots()]
    assert operations[:2] == ["append", "append"] and operations[-1] == "append", operations
    assert operations[2] != "append", operations
    statuses = {e["status"] for e in table.inspect.entries().to_pylist()}
    assert statuses == {0, 1}, "the last append merged the older files in as EXISTING"

    api = ApiClient(floe_url, access_token(floe_url))
    url = f"/v1/default/namespaces/{ns}/tables/stream/plan"

    def planned_ids(body) -> list:
        r = api.call("POST", url, body)
        assert r.status_code == 200, r.text
        paths = [t["data-file"]["file-path"] for t in r.json()["file-scan-tasks"]]
        assert r.json()["delete-files"] == []
        found = []
        for path in paths:
            found += pq.read_table(path.removeprefix("file://")).column("id").to_pylist()
        return sorted(found)

    first, last = snapshots[0], snapshots[-1]
    assert planned_ids({"start-snapshot-id": first, "end-snapshot-id": last}) == [3, 4, 5]
    assert planned_ids({"start-snapshot-id": snapshots[2], "end-snapshot-id": last}) == [4, 5]
    assert planned_ids({"start-snapshot-id": first, "end-snapshot-id": snapshots[2]}) == [3]
    assert planned_ids({"end-snapshot-id": last}) == [1, 2, 3, 4, 5]
    only_c = {"start-snapshot-id": first, "end-snapshot-id": last,
              "filter": {"type": "eq", "term": "category", "value": "c"}}
    assert planned_ids(only_c) == [4, 5]
    # The plan names the files each append's own manifest says it added.
    expected = set()
    for snapshot in table.snapshots()[1:]:
        if snapshot.summary.operation.value != "append":
            continue
        entries = table.inspect.entries(snapshot_id=snapshot.snapshot_id).to_pylist()
        expected |= {e["data_file"]["file_path"] for e in entries
                     if e["status"] == 1 and e["snapshot_id"] == snapshot.snapshot_id}
    r = api.call("POST", url, {"start-snapshot-id": first, "end-snapshot-id": last})
    assert {t["data-file"]["file-path"] for t in r.json()["file-scan-tasks"]} == expected
    # PyIceberg's own incremental append scan (planned on the client) names the same files.
    for start, end, row_filter in [(first, last, None), (snapshots[2], last, None),
                                   (first, snapshots[2], None), (None, last, None),
                                   (first, last, EqualTo("category", "c"))]:
        body = {"end-snapshot-id": end}
        if start is not None:
            body["start-snapshot-id"] = start
        if row_filter is not None:
            body["filter"] = {"type": "eq", "term": "category", "value": "c"}
        r = api.call("POST", url, body)
        assert r.status_code == 200, r.text
        ours = {t["data-file"]["file-path"] for t in r.json()["file-scan-tasks"]}
        scan = table.incremental_append_scan(
            from_snapshot_id_exclusive=start, to_snapshot_id_inclusive=end,
            **({} if row_filter is None else {"row_filter": row_filter}))
        assert ours == {task.file.file_path for task in scan.plan_files()}, (start, end)
    r = api.call("POST", url, {"start-snapshot-id": last, "end-snapshot-id": first})
    assert r.status_code == 400 and "not an ancestor" in r.json()["error"]["message"], r.text


def test_bad_plans_are_refused_with_the_specs_errors(floe_url):
    api = ApiClient(floe_url, access_token(floe_url))
    ns = f"plan_{uuid.uuid4().hex[:10]}"
    catalog(floe_url, "client").create_namespace(ns)
    catalog(floe_url, "client").create_table((ns, "t"), schema=SCHEMA)
    url = f"/v1/default/namespaces/{ns}/tables/t/plan"
    r = api.call("POST", url, {"filter": {"type": "eq", "term": "nope", "value": 1}})
    assert r.status_code == 400, r.text
    assert "Cannot find field 'nope'" in r.json()["error"]["message"]
    r = api.call("POST", url, {"start-snapshot-id": 1, "end-snapshot-id": 2})
    assert r.status_code == 400, r.text
    assert "Cannot find snapshot with ID 2" in r.json()["error"]["message"]
    r = api.call("POST", url, {"start-snapshot-id": 1})
    assert r.status_code == 400, r.text
    assert "needs end-snapshot-id" in r.json()["error"]["message"]
    r = api.call("POST", f"/v1/default/namespaces/{ns}/tables/missing/plan", {})
    assert r.status_code == 404 and r.json()["error"]["type"] == "NoSuchTableException"
    with pytest.raises(Exception):
        # An unknown column fails the scan, as client-side planning would.
        catalog(floe_url, "server").load_table((ns, "t")).scan(
            row_filter=EqualTo("nope", 1)).plan_files()
