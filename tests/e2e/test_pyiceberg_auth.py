"""PyIceberg with client credentials across token expiry: with a 3 s token lifetime, a
catalog keeps working after its token expired (PyIceberg gets Floe's 401, fetches a new
token and retries once), reads and writes alike; wrong credentials fail at load time.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import OAuthError, UnauthorizedError

from conftest import FloeServer

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
