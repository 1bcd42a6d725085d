"""PyIceberg end to end against a live Floe: namespaces, partitioned writes,
reads, schema evolution, snapshots, renames, drop and purge."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog

from conftest import ApiClient, FloeServer, access_token, purge_dropped
from pyiceberg.exceptions import (
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestampType

SCHEMA = Schema(
    NestedField(field_id=1, name="id", field_type=LongType(), required=False),
    NestedField(field_id=2, name="category", field_type=StringType(), required=False),
    NestedField(field_id=3, name="ts", field_type=TimestampType(), required=False),
)
# day(ts) plus identity(category): two partition transforms
SPEC = PartitionSpec(
    PartitionField(source_id=3, field_id=1000, transform=DayTransform(), name="ts_day"),
    PartitionField(source_id=2, field_id=1001, transform=IdentityTransform(), name="category"),
)
ARROW_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("category", pa.string()),
        pa.field("ts", pa.timestamp("us")),
    ]
)


def batch(ids, day_offsets, categories) -> pa.Table:
    base = dt.datetime(2024, 1, 1, 12, 0, 0)
    return pa.Table.from_pylist(
        [
            {"id": i, "category": c, "ts": base + dt.timedelta(days=d)}
            for i, d, c in zip(ids, day_offsets, categories)
        ],
        schema=ARROW_SCHEMA,
    )


CREDENTIAL = f"{FloeServer.client_id}:{FloeServer.client_secret}"


def new_catalog(url: str):
    """PyIceberg with client credentials: it fetches a token and sends it on every call."""
    return load_catalog("floe", type="rest", uri=url, warehouse="default",
                        credential=CREDENTIAL,
                        scope="catalog")


def local_path(location: str) -> Path:
    """file:///x, file:/x or /x -> Path('/x')."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path))
    pytest.fail(f"expected a local file location, got {location!r}")


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def catalog(floe_url):
    return new_catalog(floe_url)


@pytest.fixture
def ns(catalog):
    name = unique("e2e")
    catalog.create_namespace(name, properties={"owner": "e2e"})
    return name


def sorted_ids(table) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def test_namespace_roundtrip(catalog, ns):
    assert (ns,) in catalog.list_namespaces()
    props = catalog.load_namespace_properties(ns)
    assert props.get("owner") == "e2e"
    assert catalog.list_tables(ns) == []
    with pytest.raises(NoSuchNamespaceError):
        catalog.load_namespace_properties(unique("missing"))


def test_create_append_read_partitioned(catalog, floe_url, ns):
    ident = (ns, "events")
    table = catalog.create_table(ident, schema=SCHEMA, partition_spec=SPEC)
    assert table.metadata.table_uuid is not None
    assert len(table.spec().fields) == 2
    assert (ns, "events") in catalog.list_tables(ns)
    assert table.current_snapshot() is None

    first = batch([1, 2, 3], [0, 0, 1], ["a", "b", "a"])
    second = batch([4, 5, 6, 7], [1, 2, 2, 3], ["b", "a", "a", "c"])
    table.append(first)
    table.append(second)

    # Read back through a brand-new client: everything must come from the server.
    reloaded = new_catalog(floe_url).load_table(ident)
    assert reloaded.metadata.table_uuid == table.metadata.table_uuid
    result = reloaded.scan().to_arrow()
    assert result.num_rows == 7
    assert sorted(result.column("id").to_pylist()) == [1, 2, 3, 4, 5, 6, 7]
    rows = {r["id"]: r for r in result.to_pylist()}
    assert rows[5]["category"] == "a"
    assert rows[5]["ts"] == dt.datetime(2024, 1, 3, 12, 0, 0)

    # Two appends -> two snapshots, chained, both "append".
    snapshots = reloaded.snapshots()
    assert len(snapshots) == 2
    assert [s.summary.operation.value for s in snapshots] == ["append", "append"]
    by_id = {s.snapshot_id: s for s in snapshots}
    current = reloaded.current_snapshot()
    assert current.snapshot_id in by_id
    assert current.parent_snapshot_id in by_id, "second append must be a child of the first"
    first_snapshot = by_id[current.parent_snapshot_id]
    assert first_snapshot.parent_snapshot_id is None
    assert int(current.summary["total-records"]) == 7
    assert int(first_snapshot.summary["total-records"]) == 3
    # Lists keep commit order, as Java-written metadata does (Java clients and the
    # RCK's testRegisterTable compare snapshot lists element by element).
    assert [s.snapshot_id for s in snapshots] == [first_snapshot.snapshot_id, current.snapshot_id], (
        "snapshots not listed in commit order"
    )

    # Partitioned write: one data file per (day, category) pair per append.
    files = reloaded.inspect.files()
    partitions = {(p["ts_day"], p["category"]) for p in files.column("partition").to_pylist()}
    assert len(partitions) == 6, partitions  # (d0,a) (d0,b) (d1,a) (d1,b) (d2,a) (d3,c)
    assert files.num_rows == 3 + 3

    # Partition pruning still returns the right rows.
    day2 = reloaded.scan(row_filter="ts >= '2024-01-03T00:00:00' and ts < '2024-01-04T00:00:00'")
    assert sorted(day2.to_arrow().column("id").to_pylist()) == [5, 6]

    # The older snapshot still reads as of its time.
    old = reloaded.scan(snapshot_id=first_snapshot.snapshot_id).to_arrow()
    assert sorted(old.column("id").to_pylist()) == [1, 2, 3]


def test_schema_evolution_add_column(catalog, floe_url, ns):
    ident = (ns, "evolving")
    table = catalog.create_table(ident, schema=SCHEMA, partition_spec=SPEC)
    table.append(batch([1, 2], [0, 1], ["a", "b"]))
    table.append(batch([3], [2], ["a"]))
    original_schema_id = table.schema().schema_id

    with table.update_schema() as update:
        update.add_column("note", StringType(), doc="added by e2e")

    reloaded = new_catalog(floe_url).load_table(ident)
    field = reloaded.schema().find_field("note")
    assert field.field_type == StringType()
    assert field.field_id == 4  # last-column-id was 3
    assert reloaded.schema().schema_id != original_schema_id
    schema_ids = [sc.schema_id for sc in reloaded.metadata.schemas]
    assert sorted(schema_ids) == sorted([original_schema_id, reloaded.schema().schema_id])
    assert schema_ids == sorted(schema_ids), "schemas not listed in the order they were added"
    # a schema change is not a snapshot
    assert len(reloaded.snapshots()) == 2

    result = reloaded.scan().to_arrow()
    assert result.num_rows == 3
    assert result.column("note").to_pylist() == [None, None, None]

    with_note = pa.Table.from_pylist(
        [{"id": 10, "category": "z", "ts": dt.datetime(2024, 2, 1), "note": "hi"}],
        schema=ARROW_SCHEMA.append(pa.field("note", pa.string())),
    )
    reloaded.append(with_note)
    again = new_catalog(floe_url).load_table(ident)
    rows = {r["id"]: r for r in again.scan().to_arrow().to_pylist()}
    assert set(rows) == {1, 2, 3, 10}
    assert rows[10]["note"] == "hi"
    assert len(again.snapshots()) == 3


def test_rename_within_and_across_namespaces(catalog, ns):
    other = unique("e2e_other")
    catalog.create_namespace(other)
    table = catalog.create_table((ns, "t1"), schema=SCHEMA, partition_spec=SPEC)
    table.append(batch([1, 2], [0, 1], ["a", "a"]))
    table_uuid = table.metadata.table_uuid

    # same namespace
    catalog.rename_table((ns, "t1"), (ns, "t2"))
    with pytest.raises(NoSuchTableError):
        catalog.load_table((ns, "t1"))
    renamed = catalog.load_table((ns, "t2"))
    assert renamed.metadata.table_uuid == table_uuid
    assert sorted_ids(renamed) == [1, 2]
    assert set(catalog.list_tables(ns)) == {(ns, "t2")}

    # across namespaces
    catalog.rename_table((ns, "t2"), (other, "t3"))
    with pytest.raises(NoSuchTableError):
        catalog.load_table((ns, "t2"))
    moved = catalog.load_table((other, "t3"))
    assert moved.metadata.table_uuid == table_uuid
    assert sorted_ids(moved) == [1, 2]
    assert catalog.list_tables(ns) == []
    assert set(catalog.list_tables(other)) == {(other, "t3")}

    # still writable under the new name
    moved.append(batch([3], [2], ["b"]))
    assert sorted_ids(catalog.load_table((other, "t3"))) == [1, 2, 3]

    # renaming onto an existing table or from a missing one fails
    catalog.create_table((other, "t4"), schema=SCHEMA)
    with pytest.raises(Exception) as exc:
        catalog.rename_table((other, "t3"), (other, "t4"))
    assert "exist" in str(exc.value).lower()
    with pytest.raises(NoSuchTableError):
        catalog.rename_table((ns, "nope"), (ns, "nope2"))
    assert sorted_ids(catalog.load_table((other, "t3"))) == [1, 2, 3]


def test_drop_table(catalog, ns):
    table = catalog.create_table((ns, "dropme"), schema=SCHEMA, partition_spec=SPEC)
    table.append(batch([1], [0], ["a"]))
    catalog.drop_table((ns, "dropme"))
    with pytest.raises(NoSuchTableError):
        catalog.load_table((ns, "dropme"))
    assert catalog.list_tables(ns) == []
    with pytest.raises(NoSuchTableError):
        catalog.drop_table((ns, "dropme"))
    # the name can be used again, for a new table
    again = catalog.create_table((ns, "dropme"), schema=SCHEMA)
    assert again.metadata.table_uuid != table.metadata.table_uuid
    assert again.current_snapshot() is None


def test_purge_table_removes_files(catalog, ns, floe_url):
    table = catalog.create_table((ns, "purgeme"), schema=SCHEMA, partition_spec=SPEC)
    table.append(batch([1, 2], [0, 1], ["a", "b"]))
    table = catalog.load_table((ns, "purgeme"))
    metadata_file = local_path(table.metadata_location)
    data_files = [local_path(p) for p in table.inspect.files().column("file_path").to_pylist()]
    assert metadata_file.is_file()
    assert data_files and all(p.is_file() for p in data_files)

    catalog.purge_table((ns, "purgeme"))  # DELETE ...?purgeRequested=True
    with pytest.raises(NoSuchTableError):
        catalog.load_table((ns, "purgeme"))
    # The files stay while the table can be undropped, until it is purged for good.
    assert metadata_file.is_file() and all(p.is_file() for p in data_files)
    purge_dropped(ApiClient(floe_url, access_token(floe_url)), "default", [ns], "purgeme")

    # Purging may finish in the background: allow a short while.
    deadline = time.monotonic() + 15
    leftovers = [metadata_file, *data_files]
    while time.monotonic() < deadline:
        leftovers = [p for p in leftovers if p.exists()]
        if not leftovers:
            break
        time.sleep(0.2)
    assert not leftovers, f"files still present after purge: {leftovers}"


def test_drop_namespace(catalog):
    name = unique("e2e_dropns")
    catalog.create_namespace(name)
    catalog.create_table((name, "t"), schema=SCHEMA)
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace(name)
    assert (name,) in catalog.list_namespaces()

    catalog.drop_table((name, "t"))
    catalog.drop_namespace(name)
    assert (name,) not in catalog.list_namespaces()
    with pytest.raises(NoSuchNamespaceError):
        catalog.load_namespace_properties(name)
    with pytest.raises(NoSuchNamespaceError):
        catalog.drop_namespace(name)
    with pytest.raises(NoSuchNamespaceError):
        catalog.create_table((name, "t"), schema=SCHEMA)
