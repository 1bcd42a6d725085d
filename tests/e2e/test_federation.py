"""A federated catalog end to end: PyIceberg writes and reads tables through one Floe
server whose catalog `fed` is served from another Floe server (the remote), and sees the
same rows when it reads the remote directly. The remote's tokens live 3 s, so the
forwarding server renews its own token while the test goes on.
"""

from __future__ import annotations

import time

import pyarrow as pa
from pyiceberg.catalog import load_catalog

from conftest import ApiClient, FloeServer, access_token

CREDENTIAL = f"{FloeServer.client_id}:{FloeServer.client_secret}"
LIFETIME_S = 3


def catalog(url: str, warehouse: str):
    return load_catalog(warehouse, type="rest", uri=url, warehouse=warehouse,
                        credential=CREDENTIAL, scope="PRINCIPAL_ROLE:ALL")


def test_pyiceberg_through_a_federated_catalog(floe_server_factory):
    remote = floe_server_factory(["--token-lifetime", str(LIFETIME_S)])
    local = floe_server_factory()
    api = ApiClient(local.url, access_token(local.url))
    r = api.call("POST", "/api/management/v1/catalogs", {"catalog": {
        "name": "fed", "type": "EXTERNAL",
        "properties": {"default-base-location": (local.data_dir / "fed").as_uri()},
        "connectionConfigInfo": {
            "connectionType": "ICEBERG_REST", "uri": remote.url,
            "remoteCatalogName": "default",
            "authenticationParameters": {
                "authenticationType": "OAUTH", "clientId": FloeServer.client_id,
                "clientSecret": FloeServer.client_secret,
                "scopes": ["PRINCIPAL_ROLE:ALL"]}}}})
    assert r.status_code == 201, r.text
    assert FloeServer.client_secret not in r.text

    fed = catalog(local.url, "fed")
    fed.create_namespace("sales")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string())])
    table = fed.create_table("sales.orders", schema=schema)
    table.append(pa.table({"id": [1, 2], "region": ["eu", "us"]}, schema=schema))

    # The remote has the table and its rows: the federated catalog kept nothing itself.
    direct = catalog(remote.url, "default").load_table("sales.orders")
    assert sorted(direct.scan().to_arrow()["id"].to_pylist()) == [1, 2]
    assert direct.metadata_location == fed.load_table("sales.orders").metadata_location
    assert local.data_dir.joinpath("fed").exists() is False

    # Past the remote's token lifetime, the forwarding server signs in again by itself.
    time.sleep(LIFETIME_S + 1)
    logins = remote_logins(remote)
    table = fed.load_table("sales.orders")
    table.append(pa.table({"id": [3], "region": ["eu"]}, schema=schema))
    with table.transaction() as tx:
        tx.set_properties(owner="sales-team")
    table = fed.load_table("sales.orders")
    assert remote_logins(remote) > logins
    assert table.properties["owner"] == "sales-team"
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]
    assert [s.snapshot_id for s in table.snapshots()] == \
        [s.snapshot_id for s in catalog(remote.url, "default").load_table("sales.orders").snapshots()]
    assert ("sales",) in fed.list_namespaces()
    assert ("sales", "orders") in fed.list_tables("sales")

    fed.drop_table("sales.orders")
    remote_tables = catalog(remote.url, "default").list_tables("sales")
    assert ("sales", "orders") not in remote_tables


def remote_logins(server) -> int:
    """Token endpoint calls in the server's request log."""
    return server.log_path.read_text(errors="replace").count("path=/v1/oauth/tokens status=200")
