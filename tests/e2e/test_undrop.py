"""Soft delete and undrop: a dropped table or view stays recoverable for the drop
retention, can be listed, brought back (same or new name) or purged, and expires."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path
from urllib.parse import urlparse

import requests

from conftest import ApiClient, access_token

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "x", "type": "long", "required": False}]}
MGMT = "/api/management/v1/catalogs/default"
VIEW = {
    "name": "v", "schema": SCHEMA,
    "view-version": {"version-id": 1, "timestamp-ms": 1, "schema-id": 0, "default-namespace": ["db"],
                     "summary": {}, "representations": [{"type": "sql", "sql": "select 1", "dialect": "spark"}]},
    "properties": {},
}


def setup(server):
    api = ApiClient(server.url, access_token(server.url))
    assert api.call("POST", "/v1/default/namespaces", {"namespace": ["db"]}).status_code == 200
    return api


def create(api, name):
    r = api.call("POST", "/v1/default/namespaces/db/tables", {"name": name, "schema": SCHEMA})
    assert r.status_code == 200, r.text
    return r.json()


def files_of(table_json) -> Path:
    return Path(urlparse(table_json["metadata"]["location"]).path)


def dropped(api):
    r = api.call("GET", f"{MGMT}/dropped")
    assert r.status_code == 200, r.text
    return r.json()["dropped"]


def assert_error(r, status, error_type=None):
    assert r.status_code == status, (r.status_code, r.text)
    error = r.json()["error"]
    assert error["code"] == status and error["message"]
    if error_type:
        assert error["type"] == error_type, error


def test_drop_then_undrop_under_the_same_name(floe_server_factory):
    server = floe_server_factory()
    api = setup(server)
    t = create(api, "t")
    assert api.call("DELETE", "/v1/default/namespaces/db/tables/t").status_code == 204
    assert api.call("GET", "/v1/default/namespaces/db/tables/t").status_code == 404
    [d] = dropped(api)
    assert (d["type"], d["namespace"], d["name"]) == ("table", ["db"], "t")
    assert d["metadata-location"] == t["metadata-location"] and d["purge-requested"] is False
    assert d["expires-at-ms"] - d["dropped-at-ms"] == 7 * 86_400_000  # the default retention
    assert files_of(t).exists()
    r = api.call("POST", f"{MGMT}/dropped/{d['id']}/undrop")
    assert r.status_code == 200, r.text
    assert r.json() == {"namespace": ["db"], "name": "t", "type": "table",
                        "metadata-location": t["metadata-location"]}
    back = api.call("GET", "/v1/default/namespaces/db/tables/t").json()
    assert back["metadata"] == t["metadata"]
    assert dropped(api) == []
    # It is a table again in every way: it takes commits.
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    assert api.call("POST", "/v1/default/namespaces/db/tables/t", commit).status_code == 200
    # The change events tell the story: the drop names the dropped record, the undrop
    # registers the same table uuid again.
    events = api.call("POST", "/v1/default/events", {"catalog-objects-by-uuid": [t["metadata"]["table-uuid"]]}).json()["events"]
    ops = [e["operation"]["operation-type"] for e in events]
    assert ops == ["create-table", "drop-table", "register-table", "update-table"], ops
    assert events[1]["operation"]["dropped-id"] == d["id"]
    assert events[2]["operation"]["undropped-id"] == d["id"]


def test_undrop_to_a_new_name_when_the_old_one_is_taken(floe_server_factory):
    server = floe_server_factory()
    api = setup(server)
    t = create(api, "t")
    api.call("DELETE", "/v1/default/namespaces/db/tables/t")
    [d] = dropped(api)
    create(api, "t")  # the name is free after the drop
    assert_error(api.call("POST", f"{MGMT}/dropped/{d['id']}/undrop"), 409, "AlreadyExistsException")
    assert [x["id"] for x in dropped(api)] == [d["id"]]  # unchanged
    assert_error(api.call("POST", f"{MGMT}/dropped/{d['id']}/undrop",
                          {"namespace": ["nowhere"], "name": "t"}), 404, "NoSuchNamespaceException")
    r = api.call("POST", f"{MGMT}/dropped/{d['id']}/undrop", {"namespace": ["db"], "name": "t_old"})
    assert r.status_code == 200, r.text
    assert api.call("GET", "/v1/default/namespaces/db/tables/t_old").json()["metadata"] == t["metadata"]
    assert_error(api.call("POST", f"{MGMT}/dropped/{d['id']}/undrop", {"namespace": ["db"], "name": "x"}),
                 404)


def test_views_too(floe_server_factory):
    server = floe_server_factory()
    api = setup(server)
    assert api.call("POST", "/v1/default/namespaces/db/views", VIEW).status_code == 200
    assert api.call("DELETE", "/v1/default/namespaces/db/views/v").status_code == 204
    [d] = dropped(api)
    assert d["type"] == "view"
    assert api.call("POST", f"{MGMT}/dropped/{d['id']}/undrop").status_code == 200
    assert api.call("GET", "/v1/default/namespaces/db/views/v").status_code == 200


def test_purge_waits_for_the_retention_or_an_explicit_purge(floe_server_factory):
    server = floe_server_factory()
    api = setup(server)
    t = create(api, "t")
    r = api.call("DELETE", "/v1/default/namespaces/db/tables/t?purgeRequested=true")
    assert r.status_code == 204
    [d] = dropped(api)
    assert d["purge-requested"] is True
    assert files_of(t).exists(), "files stay while the table can be undropped"
    assert api.call("DELETE", f"{MGMT}/dropped/{d['id']}").status_code == 204
    assert not files_of(t).exists()
    assert dropped(api) == []
    assert_error(api.call("DELETE", f"{MGMT}/dropped/{d['id']}"), 404)


def test_expired_drops_are_forgotten_and_purged(floe_server_factory):
    # 0.00004 days = 3.5 s; the expirer looks every second at that retention.
    server = floe_server_factory(["--drop-retention-days", "0.00004"])
    api = setup(server)
    purged, kept = create(api, "purged"), create(api, "kept")
    api.call("DELETE", "/v1/default/namespaces/db/tables/purged?purgeRequested=true")
    api.call("DELETE", "/v1/default/namespaces/db/tables/kept")
    assert len(dropped(api)) == 2
    # They leave the list when their retention ends; the expirer (every second) then
    # forgets them and purges.
    deadline = time.monotonic() + 20
    while (dropped(api) or files_of(purged).exists()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert dropped(api) == []
    assert not files_of(purged).exists()
    assert files_of(kept).exists(), "a drop without purge never deletes files"


def test_retention_zero_makes_drops_final(floe_server_factory):
    server = floe_server_factory(["--drop-retention-days", "0"])
    api = setup(server)
    t = create(api, "t")
    assert api.call("DELETE", "/v1/default/namespaces/db/tables/t?purgeRequested=true").status_code == 204
    assert dropped(api) == []
    assert not files_of(t).exists()


def test_bad_requests(floe_server_factory):
    server = floe_server_factory()
    api = setup(server)
    create(api, "t")
    api.call("DELETE", "/v1/default/namespaces/db/tables/t")
    [d] = dropped(api)
    url = f"{MGMT}/dropped/{d['id']}/undrop"
    for body, status in [("{", 400), ('{"name": "x"}', 400), ('{"namespace": ["db"]}', 400),
                         ('{"namespace": ["db"], "name": "x", "extra": 1}', 400),
                         ('{"namespace": [], "name": "x"}', 400), ('{"namespace": ["db"], "name": ""}', 400)]:
        r = api.s.post(server.url + url, data=body, headers={"Content-Type": "application/json"}, timeout=10)
        assert_error(r, status)
    # A field of the wrong type is named.
    r = api.call("POST", url, {"namespace": ["db", 7], "name": "x"})
    assert_error(r, 400)
    assert "namespace[1]: invalid type" in r.json()["error"]["message"], r.text
    assert_error(api.call("POST", f"{MGMT}/dropped/no-such-id/undrop"), 404)
    assert_error(api.call("GET", "/api/management/v1/catalogs/nope/dropped"), 404)
    assert [x["id"] for x in dropped(api)] == [d["id"]], "bad requests changed nothing"
    # A principal without privileges on the catalog sees and changes nothing.
    r = api.call("POST", "/api/management/v1/principals", {"principal": {"name": "nobody"}})
    assert r.status_code == 201, r.text
    creds = r.json()["credentials"]
    other = ApiClient(server.url, access_token(server.url, creds["clientId"], creds["clientSecret"]))
    assert_error(other.call("GET", f"{MGMT}/dropped"), 403, "ForbiddenException")
    assert_error(other.call("POST", url), 403)
    assert_error(other.call("DELETE", f"{MGMT}/dropped/{d['id']}"), 403)
    assert [x["id"] for x in dropped(api)] == [d["id"]]
    assert requests.get(server.url + f"{MGMT}/dropped", timeout=10).status_code == 401


def immutable(path: Path, on: bool) -> None:
    """chattr +i: not even root may delete the file (a purge that fails for real)."""
    subprocess.run(["chattr", "+i" if on else "-i", str(path)], check=True)


def test_a_purge_cut_short_or_failing_resumes_after_kill_9(floe_server_factory):
    """A purge is recorded with its drop and carried out in bounded rounds
    (--purge-batch-files 2): one that fails (a file that cannot be deleted) is retried,
    and one unfinished when the server is killed finishes after the restart."""
    server = floe_server_factory(["--drop-retention-days", "0", "--purge-batch-files", "2"])
    api = setup(server)
    t, keep = create(api, "big"), create(api, "keep")
    for i in range(6):
        r = api.call("POST", "/v1/default/namespaces/db/tables/big", {
            "requirements": [], "updates": [{"action": "set-properties", "updates": {"i": str(i)}}]})
        assert r.status_code == 200, r.text
    table_dir = files_of(t)
    files = sorted(table_dir.rglob("*.json"))
    assert len(files) == 7  # the create and 6 commits: more than one round's bound
    stuck = files[len(files) // 2]
    immutable(stuck, True)
    try:
        r = api.call("DELETE", "/v1/default/namespaces/db/tables/big?purgeRequested=true")
        assert r.status_code == 204, r.text  # the drop stands whatever its files do
        assert api.call("GET", "/v1/default/namespaces/db/tables/big").status_code == 404
        deadline = time.time() + 30
        while "purge round failed" not in server.log_tail(200) and time.time() < deadline:
            time.sleep(0.2)
        assert "purge round failed" in server.log_tail(200), server.log_tail()
        server.kill9()
        assert stuck.exists() and table_dir.exists()
    finally:
        immutable(stuck, False)
    server.start()  # same data dir: the purge's record survived the kill
    deadline = time.time() + 60
    while table_dir.exists() and time.time() < deadline:
        time.sleep(0.2)
    assert not table_dir.exists(), sorted(table_dir.rglob("*"))
    assert files_of(keep).exists()
    loaded = api_after_restart(server).call("GET", "/v1/default/namespaces/db/tables/keep")
    assert loaded.status_code == 200, loaded.text


def api_after_restart(server) -> ApiClient:
    return ApiClient(server.url, access_token(server.url))
