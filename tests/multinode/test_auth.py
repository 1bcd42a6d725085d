"""Authentication and authorization across nodes: a token one node issued works on the
other (the signing key lives in PostgreSQL), and a grant, a role or a principal revoked
through one node stops working on the other within the model's freshness interval
(README: checked at most once a second), with nothing changed by the refused requests.
"""

from __future__ import annotations

import time

import requests

from floe_multinode import Api, describe, fetch_token, ns_path

STORAGES = ("file", "s3")  # conftest.py runs this module once per storage
CATALOG = "authz"
MGMT = "/api/management/v1"
# The README promises one second; allow for a loaded CI machine's scheduling.
FRESHNESS_S = 1.0
DEADLINE_S = 5.0


def as_principal(base: str, token: str) -> requests.Session:
    s = requests.Session()
    s.headers["Authorization"] = "Bearer " + token
    s.base = base  # type: ignore[attr-defined]
    return s


def call(session: requests.Session, method: str, path: str, body=None) -> requests.Response:
    return session.request(method, session.base + path, json=body, timeout=30)  # type: ignore[attr-defined]


def until_status(session, method, path, want: int, body=None) -> float:
    """Seconds until `path` answers `want` (fails after DEADLINE_S)."""
    start = time.monotonic()
    while True:
        r = call(session, method, path, body)
        if r.status_code == want:
            return time.monotonic() - start
        assert r.status_code in (200, 204, 403, 401), describe(r)
        assert time.monotonic() - start < DEADLINE_S, f"still {r.status_code}: {describe(r)}"
        time.sleep(0.05)


def test_tokens_and_revocations_cross_nodes(cluster):
    a, b = Api(cluster.urls[0]), Api(cluster.urls[1])
    assert a.create_catalog(CATALOG, cluster.warehouse).status_code == 201
    assert a.create_namespace(CATALOG, ["db"]).status_code == 200

    # A principal whose role may read the namespace's properties, made through node a.
    r = a.post(f"{MGMT}/principals", {"principal": {"name": "reader"}})
    assert r.status_code == 201, describe(r)
    creds = r.json()["credentials"]
    for path, body in [
        (f"{MGMT}/principal-roles", {"principalRole": {"name": "readers"}}),
        (f"{MGMT}/catalogs/{CATALOG}/catalog-roles", {"catalogRole": {"name": "ns_reader"}}),
    ]:
        r = a.post(path, body)
        assert r.status_code == 201, describe(r)
    grant = {"grant": {"type": "namespace", "namespace": ["db"],
                       "privilege": "NAMESPACE_READ_PROPERTIES"}}
    for path, body in [
        (f"{MGMT}/principals/reader/principal-roles", {"principalRole": {"name": "readers"}}),
        (f"{MGMT}/principal-roles/readers/catalog-roles/{CATALOG}", {"catalogRole": {"name": "ns_reader"}}),
        (f"{MGMT}/catalogs/{CATALOG}/catalog-roles/ns_reader/grants", grant),
    ]:
        r = a.request("PUT", path, body)
        assert r.status_code == 201, describe(r)

    # A token from node a, used on node b.
    token = fetch_token(cluster.urls[0], creds["clientId"], creds["clientSecret"])
    on_b = as_principal(cluster.urls[1], token)
    ns = f"/v1/{CATALOG}/namespaces/{ns_path(['db'])}"
    until_status(on_b, "GET", ns, 200)
    # What the grant does not cover is refused on b, and changes nothing.
    r = call(on_b, "POST", f"{ns}/properties", {"updates": {"k": "v"}})
    assert r.status_code == 403, describe(r)
    assert "k" not in b.get(ns).json()["properties"]

    # Revoke the grant through node a: node b refuses within the freshness interval.
    r = a.post(f"{MGMT}/catalogs/{CATALOG}/catalog-roles/ns_reader/grants", grant)
    assert r.status_code == 204, describe(r)
    took = until_status(on_b, "GET", ns, 403)
    assert took <= FRESHNESS_S + 1.0, f"revocation took {took:.2f}s to reach node b"

    # Grant it again, then take the principal role away: the same.
    r = a.request("PUT", f"{MGMT}/catalogs/{CATALOG}/catalog-roles/ns_reader/grants", grant)
    assert r.status_code == 201, describe(r)
    until_status(on_b, "GET", ns, 200)
    r = a.request("DELETE", f"{MGMT}/principals/reader/principal-roles/readers")
    assert r.status_code == 204, describe(r)
    until_status(on_b, "GET", ns, 403)

    # Delete the principal through node b: its token is refused on node a.
    on_a = as_principal(cluster.urls[0], token)
    r = b.request("DELETE", f"{MGMT}/principals/reader")
    assert r.status_code == 204, describe(r)
    until_status(on_a, "GET", ns, 401)


def test_a_drop_on_a_node_with_a_stale_model_still_takes_the_grants(cluster):
    """A grant made through node a, then at once a drop and a rename through node b,
    whose model (re-read at most once a second) has not seen the grant: the drop must
    not leave the grant behind for a table created later under the name, and the rename
    must take it along."""
    catalog = "follow"
    a, b = Api(cluster.urls[0]), Api(cluster.urls[1])
    assert a.create_catalog(catalog, cluster.warehouse).status_code == 201
    assert a.create_namespace(catalog, ["db"]).status_code == 200
    r = a.post(f"{MGMT}/catalogs/{catalog}/catalog-roles", {"catalogRole": {"name": "r"}})
    assert r.status_code == 201, describe(r)
    grants = f"{MGMT}/catalogs/{catalog}/catalog-roles/r/grants"
    tables = f"/v1/{catalog}/namespaces/db/tables"

    def grant_on(name: str) -> dict:
        return {"grant": {"type": "table", "namespace": ["db"], "tableName": name,
                          "privilege": "TABLE_READ_DATA"}}

    def held(want: list) -> list:
        """The grants as node a lists them, once it shows `want` (its model is re-read
        at most once a second) or the deadline passed."""
        start = time.monotonic()
        while True:
            r = a.get(grants)
            assert r.status_code == 200, describe(r)
            got = sorted(g["tableName"] for g in r.json()["grants"])
            if got == want or time.monotonic() - start > DEADLINE_S:
                return got
            time.sleep(0.05)

    for round_ in range(5):
        t, u = f"t{round_}", f"u{round_}"
        for name in (t, u):
            assert b.create_table(catalog, ["db"], name).status_code == 200
        # Node b has just checked its model: it will not look again for a second.
        assert b.get(f"{tables}/{t}").status_code == 200
        for name in (t, u):
            r = a.request("PUT", grants, grant_on(name))
            assert r.status_code == 201, describe(r)
        r = b.request("DELETE", f"{tables}/{t}")
        assert r.status_code == 204, describe(r)
        r = b.post(f"/v1/{catalog}/tables/rename",
                   {"source": {"namespace": ["db"], "name": u},
                    "destination": {"namespace": ["db"], "name": f"moved{round_}"}})
        assert r.status_code == 204, describe(r)
        want = [f"moved{i}" for i in range(round_ + 1)]
        assert held(want) == want, "grants follow objects"
        # A table made again under the dropped name has no grant.
        assert b.create_table(catalog, ["db"], t).status_code == 200
        assert held(want) == want
