"""PyIceberg with client credentials across token expiry: with a 3 s token lifetime, a
catalog keeps working after its token expired (PyIceberg gets Floe's 401, fetches a new
token and retries once), reads and writes alike; wrong credentials fail at load time.
A principal with Polaris's fine-grained table privileges appends through PyIceberg but
cannot evolve the schema or set properties.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import ForbiddenError, OAuthError, UnauthorizedError
from pyiceberg.types import StringType

from conftest import ApiClient, FloeServer, access_token

LIFETIME_S = 3


def catalog(url: str, credential: str):
    return load_catalog("floe", type="rest", uri=url, warehouse="default",
                        credential=credential, scope="catalog")


def test_pyiceberg_refreshes_an_expired_token(floe_server_factory):
    server = floe_server_factory(["--token-lifetime", str(LIFETIME_S)])
    cat = catalog(server.url, f"{FloeServer.client_id}:{FloeServer.client_secret}")
    cat.create_namespace("refresh")
    schema = pa.schema([pa.field("id", pa.int64())])
    table = cat.create_table("refresh.t", schema=schema)
    table.append(pa.table({"id": [1, 2]}, schema=schema))

    # A token taken alongside PyIceberg's expires with it: the server then refuses it.
    mine = requests.post(server.url + "/v1/oauth/tokens", timeout=10, data={
        "grant_type": "client_credentials", "client_id": FloeServer.client_id,
        "client_secret": FloeServer.client_secret}).json()["access_token"]
    logins_before = token_requests(server)
    time.sleep(LIFETIME_S + 1.5)
    r = requests.get(server.url + "/v1/default/namespaces",
                     headers={"Authorization": "Bearer " + mine}, timeout=10)
    assert r.status_code == 401, r.text
    # The catalog carries on, reading and writing: it logged in again.
    assert ("refresh",) in cat.list_namespaces()
    table = cat.load_table("refresh.t")
    table.append(pa.table({"id": [3]}, schema=schema))
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]
    assert token_requests(server) > logins_before


def token_requests(server) -> int:
    """Token endpoint calls in the server's request log."""
    return server.log_path.read_text(errors="replace").count("path=/v1/oauth/tokens status=200")


def test_pyiceberg_with_wrong_credentials_fails(floe_server_factory):
    server = floe_server_factory()
    with pytest.raises((OAuthError, UnauthorizedError)):
        catalog(server.url, f"{FloeServer.client_id}:not-the-secret").list_namespaces()


def test_pyiceberg_appends_with_only_the_append_privileges(floe_server_factory):
    server = floe_server_factory()
    admin = catalog(server.url, f"{FloeServer.client_id}:{FloeServer.client_secret}")
    admin.create_namespace("fine")
    schema = pa.schema([pa.field("id", pa.int64())])
    admin.create_table("fine.t", schema=schema)

    # A principal whose role may read the table, add snapshots and move refs: no more.
    api = ApiClient(server.url, access_token(server.url))
    mgmt = "/api/management/v1"
    created = api.call("POST", f"{mgmt}/principals", {"principal": {"name": "appender"}})
    assert created.status_code == 201, created.text
    credentials = created.json()["credentials"]
    for method, path, body in [
        ("POST", f"{mgmt}/principal-roles", {"principalRole": {"name": "appending"}}),
        ("PUT", f"{mgmt}/principals/appender/principal-roles",
         {"principalRole": {"name": "appending"}}),
        ("POST", f"{mgmt}/catalogs/default/catalog-roles", {"catalogRole": {"name": "appending"}}),
        ("PUT", f"{mgmt}/principal-roles/appending/catalog-roles/default",
         {"catalogRole": {"name": "appending"}}),
    ] + [
        ("PUT", f"{mgmt}/catalogs/default/catalog-roles/appending/grants",
         {"grant": {"type": "table", "namespace": ["fine"], "tableName": "t",
                    "privilege": privilege}})
        for privilege in ["TABLE_READ_DATA", "TABLE_ADD_SNAPSHOT", "TABLE_SET_SNAPSHOT_REF"]
    ]:
        r = api.call(method, path, body)
        assert r.status_code == 201, f"{method} {path}: {r.text}"

    cat = catalog(server.url, f"{credentials['clientId']}:{credentials['clientSecret']}")
    table = cat.load_table("fine.t")
    table.append(pa.table({"id": [1, 2]}, schema=schema))
    table.append(pa.table({"id": [3]}, schema=schema))
    assert sorted(cat.load_table("fine.t").scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]

    before = admin.load_table("fine.t").metadata
    with pytest.raises(ForbiddenError, match="TABLE_ADD_SCHEMA"):
        with table.update_schema() as update:
            update.add_column("extra", StringType())
    with pytest.raises(ForbiddenError, match="TABLE_SET_PROPERTIES"):
        with table.transaction() as transaction:
            transaction.set_properties({"owner": "appender"})
    after = admin.load_table("fine.t").metadata
    assert after.model_dump() == before.model_dump(), "the refused commits changed nothing"
    assert len(after.snapshots) == 2
