"""DuckDB's iceberg extension reading and writing through Floe, with client credentials.

Tables written by PyIceberg and by Spark (with merge-on-read delete files) are read
through a DuckDB ATTACH of the catalog; a table DuckDB writes is read back by Spark and
PyIceberg. Authentication and token expiry are in test_duckdb_auth.py, on a server that
no Spark catalog talks to (so its request log shows DuckDB's requests alone).
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType


@pytest.fixture(scope="module")
def pyiceberg_cities(pyiceberg_catalog):
    """py.cities, partitioned by city, written by PyIceberg."""
    pyiceberg_catalog.create_namespace("py")
    schema = Schema(NestedField(1, "id", LongType(), required=False),
                    NestedField(2, "city", StringType(), required=False))
    table = pyiceberg_catalog.create_table(
        "py.cities", schema,
        partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "city")))
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                           "city": ["oslo", "rome", "oslo"]}))
    return table


@pytest.fixture(scope="module")
def spark_events(spark, floe_spark):
    """sp.events written by Spark, with position delete files from a DELETE and an UPDATE."""
    cat = floe_spark
    spark.sql(f"CREATE NAMESPACE {cat}.sp")
    spark.sql(f"""CREATE TABLE {cat}.sp.events (id BIGINT, kind STRING, ts TIMESTAMP)
                  USING iceberg PARTITIONED BY (kind)
                  TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read',
                                 'write.update.mode'='merge-on-read')""")
    spark.sql(f"""INSERT INTO {cat}.sp.events VALUES
                  (1, 'click', TIMESTAMP '2026-03-01 08:00:00'),
                  (2, 'click', TIMESTAMP '2026-03-01 09:00:00'),
                  (3, 'view',  TIMESTAMP '2026-03-02 10:00:00'),
                  (4, 'view',  TIMESTAMP '2026-03-02 11:00:00')""")
    spark.sql(f"DELETE FROM {cat}.sp.events WHERE id = 2")
    spark.sql(f"UPDATE {cat}.sp.events SET kind = 'buy' WHERE id = 3")
    return f"{cat}.sp.events"


def test_reads_a_pyiceberg_table(duck, pyiceberg_cities):
    assert duck.sql("SELECT id, city FROM floe.py.cities ORDER BY id").fetchall() == [
        (1, "oslo"), (2, "rome"), (3, "oslo")]
    assert duck.sql("SELECT id FROM floe.py.cities WHERE city = 'oslo' ORDER BY id").fetchall() == [
        (1,), (3,)]
    assert ("py", "cities") in [tuple(r) for r in duck.sql(
        "SELECT schema, name FROM (SHOW ALL TABLES) WHERE database = 'floe'").fetchall()]


def test_reads_a_spark_table_with_delete_files(duck, spark, spark_events):
    # The test only means something if Spark really wrote delete files (content 1).
    contents = {r[0] for r in spark.sql(f"SELECT content FROM {spark_events}.files").collect()}
    assert 1 in contents, contents
    expected = [(1, "click"), (3, "buy"), (4, "view")]
    assert [tuple(r) for r in spark.sql(
        f"SELECT id, kind FROM {spark_events} ORDER BY id").collect()] == expected
    assert duck.sql("SELECT id, kind FROM floe.sp.events ORDER BY id").fetchall() == expected
    assert duck.sql("SELECT count(*) FROM floe.sp.events WHERE kind = 'view'").fetchall() == [(1,)]
    # Spark's TIMESTAMP is Iceberg's timestamptz; DuckDB reads the same instants.
    assert duck.sql("SELECT strftime(ts AT TIME ZONE 'UTC', '%Y-%m-%d %H') FROM floe.sp.events "
                    "WHERE id = 4").fetchall() == [("2026-03-02 11",)]


def test_writes_a_table_that_spark_and_pyiceberg_read(duck, spark, floe_spark, pyiceberg_catalog):
    duck.execute("CREATE SCHEMA floe.dw")
    duck.execute("CREATE TABLE floe.dw.notes (id BIGINT, body VARCHAR)")
    duck.execute("INSERT INTO floe.dw.notes VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    duck.execute("DELETE FROM floe.dw.notes WHERE id = 2")
    assert duck.sql("SELECT id, body FROM floe.dw.notes ORDER BY id").fetchall() == [
        (1, "one"), (3, "three")]

    assert [tuple(r) for r in spark.sql(
        f"SELECT id, body FROM {floe_spark}.dw.notes ORDER BY id").collect()] == [
        (1, "one"), (3, "three")]
    table = pyiceberg_catalog.load_table("dw.notes").scan().to_arrow().sort_by("id")
    assert table.to_pylist() == [{"id": 1, "body": "one"}, {"id": 3, "body": "three"}]
