"""Spark and DuckDB on a catalog whose tables live on S3 (SeaweedFS with STS,
scripts/s3-server.sh), reaching the object store with what Floe hands out only.

The Floe server has the S3 admin key in its environment; the engines have none: conftest.py
removes every AWS_* variable before any engine starts, and the Spark JVM reads no AWS
config or credentials file and asks no instance metadata service. So every byte an
engine reads or writes on S3 goes with credentials Floe vended for that table (STS,
scoped by a session policy to the table's location), or with a signature Floe made
(remote signing, Spark only).

Each engine creates a table, appends, reads back and commits again; the other engine
then reads the result through the same catalog.
"""

from __future__ import annotations

import os
import uuid

import pytest
import requests

MGMT = "/api/management/v1"
CATALOG = "lake"
VENDED = "vended-credentials"
SIGNING = "remote-signing"


def rows(spark, sql: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(sql).collect()]


@pytest.fixture(scope="module")
def floe_env(s3_server) -> dict[str, str]:
    """The module's Floe server holds the S3 admin key (and only it does)."""
    return s3_server.server_env


@pytest.fixture(scope="module")
def lake(floe, s3_server) -> str:
    """The catalog `lake` on s3://lake/<fresh prefix>/; its prefix."""
    prefix = f"engines-{uuid.uuid4().hex[:8]}"
    r = requests.post(f"{floe.url}{MGMT}/catalogs", timeout=30,
                      headers={"Authorization": "Bearer " + floe.token()},
                      json={"catalog": {
                          "name": CATALOG, "type": "INTERNAL",
                          "properties": {"default-base-location": f"s3://lake/{prefix}"},
                          "storageConfigInfo": s3_server.storage_config(prefix)}})
    assert r.status_code == 201, r.text
    return prefix


@pytest.fixture(scope="module")
def spark_vended(floe, lake, spark_catalog) -> str:
    return spark_catalog(floe, floe.credential, name="s3_vended", warehouse=CATALOG,
                         extra={"header.X-Iceberg-Access-Delegation": VENDED})


@pytest.fixture(scope="module")
def spark_signed(floe, lake, spark_catalog) -> str:
    return spark_catalog(floe, floe.credential, name="s3_signed", warehouse=CATALOG,
                         extra={"header.X-Iceberg-Access-Delegation": SIGNING})


@pytest.fixture
def duck_s3(floe, lake, duckdb_connect, duckdb_attach):
    """A DuckDB connection with `lake` attached as `s3lake`, asking for vended credentials."""
    con = duckdb_connect()
    duckdb_attach(con, floe, floe.client_id, floe.client_secret, alias="s3lake",
                  warehouse=CATALOG, options="ACCESS_DELEGATION_MODE 'vended_credentials'")
    return con


def load(floe, namespace: str, table: str, delegation: str | None = None) -> dict:
    """loadTable as the root principal, plain REST."""
    headers = {"Authorization": "Bearer " + floe.token()}
    if delegation:
        headers["X-Iceberg-Access-Delegation"] = delegation
    r = requests.get(f"{floe.url}/v1/{CATALOG}/namespaces/{namespace}/tables/{table}",
                     headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def s3_objects(s3_server, prefix: str) -> list[str]:
    """Keys under s3://lake/<prefix>/, listed from outside with the admin key."""
    from pyarrow import fs

    store = fs.S3FileSystem(access_key=s3_server.access_key, secret_key=s3_server.secret_key,
                            endpoint_override=s3_server.endpoint, scheme="http",
                            region=s3_server.region, force_virtual_addressing=False)
    infos = store.get_file_info(fs.FileSelector(f"lake/{prefix}", recursive=True,
                                                allow_not_found=True))
    return sorted(i.path for i in infos if i.type == fs.FileType.File)


def catalog_requests(floe, mark: int) -> list[tuple[str, str, int]]:
    return [r for r in floe.requests_since(mark) if r[1].startswith(f"/v1/{CATALOG}/")]


def refused(seen: list[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
    """The requests Floe refused or failed (a 404 is an engine's existence probe)."""
    return [r for r in seen if r[2] in (400, 401, 403) or r[2] >= 500]


def test_the_engines_have_no_s3_keys_of_their_own(spark, floe, lake, duck_s3):
    assert not [k for k in os.environ if k.startswith("AWS_")]
    jvm = spark.sparkContext._jvm
    java_env = jvm.java.lang.System.getenv()
    assert not [k for k in java_env.keySet().toArray() if str(k).startswith("AWS_")]
    for prop in ("aws.accessKeyId", "aws.secretAccessKey", "aws.sessionToken"):
        assert jvm.java.lang.System.getProperty(prop) is None, prop
    assert jvm.java.lang.System.getProperty("aws.disableEc2Metadata") == "true"
    # DuckDB holds the catalog's secret and nothing for S3 (until it loads a table).
    assert duck_s3.sql("SELECT type FROM duckdb_secrets()").fetchall() == [("iceberg",)]


@pytest.fixture(scope="module")
def spark_orders(spark, floe, lake, spark_vended) -> dict:
    """sv.orders, partitioned, written by Spark with vended credentials: create, append,
    read back, append again. What Spark read after each append, and the log mark before."""
    cat = spark_vended
    mark = floe.log_mark()
    spark.sql(f"CREATE NAMESPACE {cat}.sv")
    spark.sql(f"""CREATE TABLE {cat}.sv.orders (id BIGINT, region STRING, amount DOUBLE)
                  USING iceberg PARTITIONED BY (region)""")
    spark.sql(f"INSERT INTO {cat}.sv.orders VALUES (1, 'eu', 1.5), (2, 'us', 2.5)")
    first = rows(spark, f"SELECT id, region, amount FROM {cat}.sv.orders ORDER BY id")
    spark.sql(f"INSERT INTO {cat}.sv.orders VALUES (3, 'eu', 3.5)")
    second = rows(spark, f"SELECT id FROM {cat}.sv.orders WHERE region = 'eu' ORDER BY id")
    return {"mark": mark, "first": first, "second": second}


def test_spark_with_vended_credentials(spark, floe, lake, s3_server, spark_vended,
                                       spark_orders):
    cat = spark_vended
    mark = spark_orders["mark"]
    assert spark_orders["first"] == [(1, "eu", 1.5), (2, "us", 2.5)]
    assert spark_orders["second"] == [(1,), (3,)]

    # Two appends, committed through the catalog, every file on S3 under the table.
    assert rows(spark, f"SELECT operation FROM {cat}.sv.orders.snapshots "
                       "ORDER BY committed_at") == [("append",), ("append",)]
    table = load(floe, "sv", "orders")
    location = table["metadata"]["location"]
    assert location.startswith(f"s3://lake/{lake}/"), location
    assert table["metadata-location"].startswith(location + "/metadata/")
    files = [r[0] for r in rows(spark, f"SELECT file_path FROM {cat}.sv.orders.files")]
    assert files and all(f.startswith(location + "/data/") for f in files), files
    stored = s3_objects(s3_server, location.removeprefix("s3://lake/").split("/", 1)[0])
    for f in files + [table["metadata-location"]]:
        assert f.removeprefix("s3://") in stored, (f, stored)

    # The catalog vended credentials for the table, and signed nothing.
    served = load(floe, "sv", "orders", VENDED)
    [cred] = served["storage-credentials"]
    assert cred["prefix"] == location and cred["config"]["s3.session-token"]
    seen = catalog_requests(floe, mark)
    assert not [r for r in seen if r[1].endswith("/sign")], seen
    assert not refused(seen), seen


def test_duckdb_with_vended_credentials(floe, lake, s3_server, duck_s3, spark, spark_vended):
    con = duck_s3
    mark = floe.log_mark()
    con.execute("CREATE SCHEMA s3lake.dk")
    con.execute("CREATE TABLE s3lake.dk.notes (id BIGINT, body VARCHAR)")
    con.execute("INSERT INTO s3lake.dk.notes VALUES (1, 'one'), (2, 'two')")
    assert con.sql("SELECT id, body FROM s3lake.dk.notes ORDER BY id").fetchall() == [
        (1, "one"), (2, "two")]
    con.execute("INSERT INTO s3lake.dk.notes VALUES (3, 'three')")
    assert con.sql("SELECT id, body FROM s3lake.dk.notes ORDER BY id").fetchall() == [
        (1, "one"), (2, "two"), (3, "three")]
    # The S3 secrets DuckDB used are the ones it built from what the catalog vended.
    secrets = con.sql("SELECT type, provider FROM duckdb_secrets() WHERE type = 's3'").fetchall()
    assert secrets, con.sql("SELECT * FROM duckdb_secrets()").fetchall()

    table = load(floe, "dk", "notes")
    location = table["metadata"]["location"]
    assert location.startswith(f"s3://lake/{lake}/"), location
    snapshots = table["metadata"]["snapshots"]
    assert [s["summary"]["operation"] for s in snapshots] == ["append", "append"]
    data = [k for k in s3_objects(s3_server, location.removeprefix("s3://lake/").split("/", 1)[0])
            if k.startswith(location.removeprefix("s3://") + "/data/")]
    assert len(data) >= 2, data  # one file at least per INSERT
    seen = catalog_requests(floe, mark)
    assert not refused(seen), seen

    # Spark reads what DuckDB wrote, with credentials of its own vending.
    assert rows(spark, f"SELECT id, body FROM {spark_vended}.dk.notes ORDER BY id") == [
        (1, "one"), (2, "two"), (3, "three")]


def test_duckdb_reads_spark_and_spark_reads_duckdb_after_more_commits(
        floe, lake, duck_s3, spark, spark_vended, spark_orders):
    con = duck_s3
    assert con.sql("SELECT id, region FROM s3lake.sv.orders ORDER BY id").fetchall() == [
        (1, "eu"), (2, "us"), (3, "eu")]
    con.execute("INSERT INTO s3lake.sv.orders VALUES (4, 'us', 4.5)")
    # Spark's catalog caches the table it loaded: refresh to see DuckDB's commit.
    spark.sql(f"REFRESH TABLE {spark_vended}.sv.orders")
    assert rows(spark, f"SELECT id FROM {spark_vended}.sv.orders ORDER BY id") == [
        (1,), (2,), (3,), (4,)]


def test_duckdb_without_delegation_cannot_read(floe, lake, s3_server, duckdb_connect,
                                               duckdb_attach, spark_orders):
    """The same ATTACH without asking for credentials, pointed at the S3 server by a secret
    without keys: the server refuses the requests (DuckDB has no keys of its own, and the
    bucket is not public)."""
    con = duckdb_connect()
    con.execute(f"""CREATE SECRET no_keys (TYPE S3, ENDPOINT
                    '{s3_server.endpoint.removeprefix("http://")}', USE_SSL false,
                    URL_STYLE 'path', REGION '{s3_server.region}')""")
    duckdb_attach(con, floe, floe.client_id, floe.client_secret, alias="bare",
                  warehouse=CATALOG, options="ACCESS_DELEGATION_MODE 'none'")
    with pytest.raises(Exception) as failure:
        con.sql("SELECT count(*) FROM bare.sv.orders").fetchall()
    message = str(failure.value)
    assert s3_server.endpoint in message and "403" in message, message


def test_spark_with_remote_signing(spark, floe, lake, s3_server, spark_signed):
    cat = spark_signed
    mark = floe.log_mark()
    spark.sql(f"CREATE NAMESPACE {cat}.rs")
    spark.sql(f"CREATE TABLE {cat}.rs.events (id BIGINT, kind STRING) USING iceberg")
    spark.sql(f"INSERT INTO {cat}.rs.events VALUES (1, 'click'), (2, 'view')")
    assert rows(spark, f"SELECT id, kind FROM {cat}.rs.events ORDER BY id") == [
        (1, "click"), (2, "view")]
    spark.sql(f"INSERT INTO {cat}.rs.events VALUES (3, 'buy')")
    assert rows(spark, f"SELECT id, kind FROM {cat}.rs.events ORDER BY id") == [
        (1, "click"), (2, "view"), (3, "buy")]
    assert rows(spark, f"SELECT operation FROM {cat}.rs.events.snapshots "
                       "ORDER BY committed_at") == [("append",), ("append",)]

    # What Floe served: signing on, no credentials.
    served = load(floe, "rs", "events", SIGNING)
    assert served["config"]["s3.remote-signing-enabled"] == "true"
    assert "storage-credentials" not in served
    location = served["metadata"]["location"]
    assert location.startswith(f"s3://lake/{lake}/"), location
    files = [r[0] for r in rows(spark, f"SELECT file_path FROM {cat}.rs.events.files")]
    assert files and all(f.startswith(location + "/data/") for f in files), files
    stored = s3_objects(s3_server, location.removeprefix("s3://lake/").split("/", 1)[0])
    for f in files + [served["metadata-location"]]:
        assert f.removeprefix("s3://") in stored, (f, stored)

    # Every object request went through Floe's signer, and none was refused.
    seen = catalog_requests(floe, mark)
    signs = [r for r in seen if r[1] == f"/v1/{CATALOG}/namespaces/rs/tables/events/sign"]
    assert signs and all(r == ("POST", signs[0][1], 200) for r in signs), seen
    assert not refused(seen), seen


def test_spark_creates_a_table_as_select_with_remote_signing(spark, floe, lake, s3_server,
                                                             spark_signed):
    """CTAS is a staged create: Spark writes the data files before the table exists, so
    they are signed from the location the staged create holds; then the create commits."""
    cat = spark_signed
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {cat}.rs")
    mark = floe.log_mark()
    spark.sql(f"CREATE TABLE {cat}.rs.copied USING iceberg AS "
              "SELECT id, CAST(id * 2 AS BIGINT) AS twice FROM range(5)")
    assert rows(spark, f"SELECT id, twice FROM {cat}.rs.copied ORDER BY id") == [
        (i, 2 * i) for i in range(5)]
    seen = catalog_requests(floe, mark)
    sign = f"/v1/{CATALOG}/namespaces/rs/tables/copied/sign"
    signs = [r for r in seen if r[1] == sign]
    assert signs and all(r == ("POST", sign, 200) for r in signs), seen
    assert not refused(seen), seen
    location = load(floe, "rs", "copied", SIGNING)["metadata"]["location"]
    files = [r[0] for r in rows(spark, f"SELECT file_path FROM {cat}.rs.copied.files")]
    assert files and all(f.startswith(location + "/data/") for f in files), files
