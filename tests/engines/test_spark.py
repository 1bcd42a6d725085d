"""Spark with Iceberg's Java REST client against Floe, authenticated with client credentials.

The catalog is configured as a user would (``credential=<id>:<secret>``,
``scope=PRINCIPAL_ROLE:ALL``): DDL, writes to a partitioned table, row-level operations,
then a pause past the token lifetime after which the same catalog must keep working
because it refreshed its token. Wrong credentials and principals without privileges must
be refused with the errors Iceberg Java knows.
"""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
import requests

PROBE_PATH = "/v1/default/namespaces/expiry-probe"


def rows(spark, sql: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(sql).collect()]


def load_table(floe, namespace: str, table: str) -> dict:
    """The table's metadata as the server holds it (plain REST call as root)."""
    r = requests.get(f"{floe.url}/v1/default/namespaces/{namespace}/tables/{table}",
                     headers={"Authorization": "Bearer " + floe.token()}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["metadata"]


def report_counts(floe) -> dict:
    """Metrics reports Floe answered so far, by status class (its Prometheus counters)."""
    r = requests.get(f"{floe.url}/metrics", timeout=10)
    assert r.status_code == 200, r.text
    route = 'route="/v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics"'
    counts = {}
    for line in r.text.splitlines():
        if line.startswith("floe_http_requests_total{") and route in line:
            status = line.split('status="', 1)[1].split('"', 1)[0]
            counts[status] = counts.get(status, 0) + float(line.rsplit(" ", 1)[1])
    return counts


def test_create_partitioned_table_insert_and_select(spark, floe, floe_spark):
    cat = floe_spark
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {cat}.shop")
    spark.sql(f"""CREATE TABLE {cat}.shop.orders (id BIGINT, region STRING,
                  amount DECIMAL(10,2), ts TIMESTAMP)
                  USING iceberg PARTITIONED BY (region, days(ts))""")
    spark.sql(f"""INSERT INTO {cat}.shop.orders VALUES
                  (1, 'eu', 10.50, TIMESTAMP '2026-01-01 10:00:00'),
                  (2, 'us', 20.00, TIMESTAMP '2026-01-01 11:00:00'),
                  (3, 'eu', 30.25, TIMESTAMP '2026-01-02 12:00:00')""")

    assert rows(spark, f"SELECT id, region, amount FROM {cat}.shop.orders ORDER BY id") == [
        (1, "eu", Decimal("10.50")), (2, "us", Decimal("20.00")), (3, "eu", Decimal("30.25"))]
    assert rows(spark, f"SELECT id FROM {cat}.shop.orders WHERE region = 'eu' ORDER BY id") == [
        (1,), (3,)]
    # Three (region, day) partitions, each a data file of its own.
    assert rows(spark, f"SELECT count(*) FROM {cat}.shop.orders.partitions") == [(3,)]

    # What Spark committed is what the catalog serves.
    meta = load_table(floe, "shop", "orders")
    spec = next(s for s in meta["partition-specs"] if s["spec-id"] == meta["default-spec-id"])
    assert [(f["name"], f["transform"]) for f in spec["fields"]] == [
        ("region", "identity"), ("ts_day", "day")]
    snapshot = next(s for s in meta["snapshots"] if s["snapshot-id"] == meta["current-snapshot-id"])
    assert snapshot["summary"]["operation"] == "append"
    assert snapshot["summary"]["total-records"] == "3"
    assert "shop" in [n["namespace"] for n in spark.sql(f"SHOW NAMESPACES IN {cat}").collect()]

    # Spark's Iceberg client reported its scans and commits, and Floe took every report:
    # the client only logs a refused one, so a check too strict for Java's reports would
    # otherwise go unseen.
    reports = report_counts(floe)
    assert reports.get("2xx", 0) >= 2, reports
    assert set(reports) == {"2xx"}, reports


def test_update_delete_merge(spark, floe, floe_spark):
    cat = floe_spark
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {cat}.rowlevel")
    spark.sql(f"""CREATE TABLE {cat}.rowlevel.stock (sku STRING, qty INT, site STRING)
                  USING iceberg PARTITIONED BY (site)""")
    spark.sql(f"""INSERT INTO {cat}.rowlevel.stock VALUES
                  ('a', 1, 'x'), ('b', 2, 'x'), ('c', 3, 'y'), ('d', 4, 'y')""")

    spark.sql(f"UPDATE {cat}.rowlevel.stock SET qty = qty * 10 WHERE site = 'x'")
    spark.sql(f"DELETE FROM {cat}.rowlevel.stock WHERE sku = 'c'")
    spark.sql(f"""MERGE INTO {cat}.rowlevel.stock t
                  USING (SELECT 'd' AS sku, 40 AS qty, 'y' AS site
                         UNION ALL SELECT 'e', 5, 'z') s
                  ON t.sku = s.sku
                  WHEN MATCHED THEN UPDATE SET t.qty = s.qty
                  WHEN NOT MATCHED THEN INSERT *""")

    assert rows(spark, f"SELECT sku, qty, site FROM {cat}.rowlevel.stock ORDER BY sku") == [
        ("a", 10, "x"), ("b", 20, "x"), ("d", 40, "y"), ("e", 5, "z")]
    # One snapshot per statement, each committed through the catalog.
    ops = rows(spark, f"SELECT operation FROM {cat}.rowlevel.stock.snapshots ORDER BY committed_at")
    assert len(ops) == 4
    assert ops[0] == ("append",)
    meta = load_table(floe, "rowlevel", "stock")
    assert len(meta["snapshots"]) == 4


def test_catalog_keeps_working_past_token_expiry(spark, floe, floe_spark):
    """Iceberg Java refreshes its token before it expires, so a session outlives its tokens."""
    cat = floe_spark
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {cat}.longrun")
    spark.sql(f"CREATE TABLE {cat}.longrun.ticks (n INT, at STRING) USING iceberg")
    spark.sql(f"INSERT INTO {cat}.longrun.ticks VALUES (1, 'before')")
    stale = floe.token()  # issued now: the proof that the pause crosses a real expiry

    before_sleep = floe.log_mark()
    time.sleep(floe.token_lifetime + 2)
    after_sleep = floe.log_mark()

    assert floe.probe(stale, PROBE_PATH) == 401, "a token older than --token-lifetime must be refused"
    spark.sql(f"INSERT INTO {cat}.longrun.ticks VALUES (2, 'after')")
    assert rows(spark, f"SELECT n, at FROM {cat}.longrun.ticks ORDER BY n") == [
        (1, "before"), (2, "after")]
    spark.sql(f"CREATE TABLE {cat}.longrun.created_after (x INT) USING iceberg")
    assert rows(spark, f"SELECT count(*) FROM {cat}.longrun.created_after") == [(0,)]

    # While the session sat idle, only its refresh thread talked to Floe, and every token
    # request it made succeeded.
    idle = floe.requests_since(before_sleep, after_sleep)
    assert idle, "no token refresh while idle for longer than a token lives"
    assert all(p.endswith("/oauth/tokens") and s == 200 for _, p, s in idle), idle
    # Afterwards no request of the catalog was refused (the probe's 401 is ours).
    after = [r for r in floe.requests_since(after_sleep) if r[1] != PROBE_PATH]
    assert after and not [r for r in after if r[2] == 401], after


def test_wrong_credentials_are_refused(spark, floe, spark_catalog):
    cat = spark_catalog(floe, f"{floe.client_id}:not-the-secret", name="wrong_secret")
    mark = floe.log_mark()
    with pytest.raises(Exception) as failure:
        spark.sql(f"SHOW NAMESPACES IN {cat}").collect()
    # Floe answers 401 {"error": "unauthorized_client", "error_description": "The client is
    # not authorized"}; Iceberg Java reports that error code as a BadRequestException
    # ("Malformed request: unauthorized_client: ...").
    message = str(failure.value)
    assert "not authorized" in message.lower(), message
    assert ("POST", "/v1/oauth/tokens", 401) in floe.requests_since(mark)


def test_principal_without_privileges_is_refused(spark, floe, floe_spark, spark_catalog):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {floe_spark}.guarded")
    spark.sql(f"CREATE TABLE {floe_spark}.guarded.secrets (k STRING) USING iceberg")
    spark.sql(f"INSERT INTO {floe_spark}.guarded.secrets VALUES ('s3cret')")
    # A principal role that no catalog role is granted to: the principal authenticates, but
    # holds no privilege on catalog `default`.
    client_id, secret = floe.create_principal("nobody", principal_roles=["no_grants"])
    cat = spark_catalog(floe, f"{client_id}:{secret}", name="nobody")

    mark = floe.log_mark()
    with pytest.raises(Exception) as read:
        spark.sql(f"SELECT * FROM {cat}.guarded.secrets").collect()
    message = str(read.value)
    assert "ForbiddenException" in message and "not authorized" in message, message
    with pytest.raises(Exception) as write:
        spark.sql(f"INSERT INTO {cat}.guarded.secrets VALUES ('mine')")
    assert "ForbiddenException" in str(write.value), str(write.value)
    statuses = [s for _, p, s in floe.requests_since(mark) if "/guarded/" in p]
    assert statuses and set(statuses) == {403}, statuses
    assert rows(spark, f"SELECT k FROM {floe_spark}.guarded.secrets") == [("s3cret",)]


def test_principal_without_any_role_is_refused_with_403(spark, floe, floe_spark, spark_catalog):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {floe_spark}.guarded2")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {floe_spark}.guarded2.t (k STRING) USING iceberg")
    client_id, secret = floe.create_principal("roleless")
    cat = spark_catalog(floe, f"{client_id}:{secret}", name="roleless")
    with pytest.raises(Exception) as read:
        spark.sql(f"SELECT * FROM {cat}.guarded2.t").collect()
    assert "ForbiddenException" in str(read.value), str(read.value)


def test_reader_can_read_but_not_write(spark, floe, floe_spark, spark_catalog):
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {floe_spark}.reports")
    spark.sql(f"CREATE TABLE {floe_spark}.reports.daily (d STRING, n INT) USING iceberg")
    spark.sql(f"INSERT INTO {floe_spark}.reports.daily VALUES ('mon', 1)")
    # Polaris's model: catalog role `readers` holds TABLE_READ_DATA on the catalog, principal
    # role `analysts` holds `readers`, principal `analyst` holds `analysts`.
    floe.management("POST", "/catalogs/default/catalog-roles", {"catalogRole": {"name": "readers"}})
    floe.management("PUT", "/catalogs/default/catalog-roles/readers/grants",
                    {"grant": {"type": "catalog", "privilege": "TABLE_READ_DATA"}})
    client_id, secret = floe.create_principal("analyst", principal_roles=["analysts"])
    floe.management("PUT", "/principal-roles/analysts/catalog-roles/default",
                    {"catalogRole": {"name": "readers"}})
    cat = spark_catalog(floe, f"{client_id}:{secret}", name="analyst")

    assert rows(spark, f"SELECT d, n FROM {cat}.reports.daily") == [("mon", 1)]
    with pytest.raises(Exception) as write:
        spark.sql(f"INSERT INTO {cat}.reports.daily VALUES ('tue', 2)")
    message = str(write.value)
    # A commit is authorized by its updates: an append's first is add-snapshot.
    assert "ForbiddenException" in message and "TABLE_ADD_SNAPSHOT" in message, message
    assert rows(spark, f"SELECT d, n FROM {floe_spark}.reports.daily") == [("mon", 1)]
    # Polaris's fine-grained privileges: appending needs no more than these two.
    for privilege in ("TABLE_ADD_SNAPSHOT", "TABLE_SET_SNAPSHOT_REF"):
        floe.management("PUT", "/catalogs/default/catalog-roles/readers/grants",
                        {"grant": {"type": "table", "namespace": ["reports"], "tableName": "daily",
                                   "privilege": privilege}})
    spark.sql(f"INSERT INTO {cat}.reports.daily VALUES ('tue', 2)")
    assert rows(spark, f"SELECT d, n FROM {cat}.reports.daily ORDER BY d") == [
        ("mon", 1), ("tue", 2)]
    with pytest.raises(Exception) as evolve:
        spark.sql(f"ALTER TABLE {cat}.reports.daily ADD COLUMN note STRING")
    assert "TABLE_ADD_SCHEMA" in str(evolve.value), str(evolve.value)
