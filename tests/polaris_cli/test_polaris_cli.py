"""The Apache Polaris CLI (PyPI ``apache-polaris``, pinned in requirements.txt), unchanged,
against ``floe serve``.

One Floe server (fresh data dir, free loopback port, auth on, root = service_admin) serves the
whole module. The tests run in file order and build on each other, like an operator would:

  catalogs      create (INTERNAL, FILE, file:// base under the data dir) / list / get /
                update --set-property / summarize / delete; EXTERNAL create / get /
                delete, and a federated one refused
  principals    create (credentials captured from the CLI's output) / list / get / update /
                rotate-credentials / reset / summarize / access / delete
  principal-roles  create / list / get / update / grant / list --principal / summarize /
                revoke / delete
  catalog-roles create / list / get / update / grant / list --principal-role / revoke / delete
  privileges    catalog grant + revoke, namespace grant + revoke, table grant + revoke
                (fine-grained table privileges too),
                view grant + revoke, list
  namespaces    create / list / list --parent / get / summarize / delete; tables list,
                views list, find

Then the principal the CLI created logs in with the credentials the CLI printed, and is
allowed exactly what the CLI granted: one granted call answers 200, calls not granted 403,
and after the CLI revokes, the same call answers 403.

Every command listed passes unchanged (the CLI's own bugs, which no server can fix, are
listed in README.md and not run).

Environment: FLOE_BIN (default target/release/floe), POLARIS_CLI (default: ``polaris``
next to this interpreter), HEALTH_TIMEOUT (seconds, default 60), KEEP_DATA=1.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
FLOE_BIN = os.environ.get("FLOE_BIN", str(ROOT / "target" / "release" / "floe"))
POLARIS = os.environ.get("POLARIS_CLI", str(Path(sys.executable).parent / "polaris"))
ROOT_ID = "root-id"
ROOT_SECRET = "root-secret-0123456789"

CAT = "cli_cat"
PRINCIPAL = "cli_principal"
PRINCIPAL_ROLE = "cli_principal_role"
CATALOG_ROLE = "cli_catalog_role"
NS = "cli_ns"
NS_CHILD = "cli_ns.child"
NS_OTHER = "cli_other"

# What the CLI printed (credentials) and learned along the way, shared by the ordered tests.
STATE: dict = {}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def floe():
    if not os.access(FLOE_BIN, os.X_OK):
        pytest.fail(f"server binary not found: {FLOE_BIN} (build it or set FLOE_BIN)")
    if not os.access(POLARIS, os.X_OK):
        pytest.fail(f"polaris CLI not found: {POLARIS} (run tests/polaris_cli/run.sh)")
    data_dir = Path(tempfile.mkdtemp(prefix="floe-polaris-cli."))
    log_path = data_dir.parent / (data_dir.name + ".log")
    env = dict(os.environ, NO_COLOR="1", FLOE_BOOTSTRAP_CREDENTIALS=f"{ROOT_ID},{ROOT_SECRET}")
    proc = None
    base = None
    with open(log_path, "ab") as log:
        for _attempt in range(3):
            port = _free_port()
            proc = subprocess.Popen(
                [FLOE_BIN, "serve", "--bind", f"127.0.0.1:{port}", "--data-dir", str(data_dir / "data"),
                 "--fsync", "false", "--log", "warn"],
                stdout=log, stderr=subprocess.STDOUT, env=env)
            deadline = time.monotonic() + float(os.environ.get("HEALTH_TIMEOUT", "60"))
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                        base = f"http://127.0.0.1:{port}"
                        break
                except requests.RequestException:
                    pass
                time.sleep(0.2)
            if base:
                break
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    if not base:
        pytest.fail(f"floe did not start; log: {log_path.read_text()[-3000:]}")
    try:
        yield {"base": base, "port": port, "data_dir": data_dir}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log_text = log_path.read_text(errors="replace")
        if os.environ.get("KEEP_DATA") != "1":
            shutil.rmtree(data_dir, ignore_errors=True)
            log_path.unlink(missing_ok=True)
        assert "panicked at" not in log_text, log_text[-3000:]


def polaris(floe, *args, client_id=ROOT_ID, client_secret=ROOT_SECRET):
    """Run the CLI as an operator would: --host/--port and client credentials."""
    cmd = [POLARIS, "--host", "127.0.0.1", "--port", str(floe["port"]),
           "--client-id", client_id, "--client-secret", client_secret, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def ok(floe, *args, **kw) -> str:
    r = polaris(floe, *args, **kw)
    assert r.returncode == 0, f"polaris {' '.join(args)} -> exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "Exception" not in r.stderr and "error occurred" not in r.stderr, r.stderr
    return r.stdout


def json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip().startswith("{")]


def names(out: str) -> set[str]:
    return {o["name"] for o in json_lines(out)}


def token(floe, client_id, client_secret) -> requests.Response:
    return requests.post(f"{floe['base']}/api/catalog/v1/oauth/tokens", timeout=10, data={
        "grant_type": "client_credentials", "client_id": client_id,
        "client_secret": client_secret, "scope": "PRINCIPAL_ROLE:ALL"})


def as_principal(floe, method, path, **kw) -> requests.Response:
    creds = STATE["creds"]
    r = token(floe, creds["clientId"], creds["clientSecret"])
    assert r.status_code == 200, r.text
    headers = {"Authorization": "Bearer " + r.json()["access_token"]}
    return requests.request(method, floe["base"] + path, headers=headers, timeout=10, **kw)



# --------------------------------------------------------------------------- catalogs
def test_catalog_create(floe):
    base = (floe["data_dir"] / "data" / "cli-warehouse").as_uri()
    STATE["base_location"] = base
    ok(floe, "catalogs", "create", "--type", "internal", "--storage-type", "file",
       "--default-base-location", base, CAT)


def test_catalog_list(floe):
    assert {CAT, "default"} <= names(ok(floe, "catalogs", "list"))


def test_catalog_get(floe):
    cat = json.loads(ok(floe, "catalogs", "get", CAT))
    assert cat["name"] == CAT
    assert cat["type"] == "INTERNAL"
    assert cat["properties"]["default-base-location"] == STATE["base_location"]
    assert cat["storageConfigInfo"]["storageType"] == "FILE"


def test_catalog_update_property(floe):
    ok(floe, "catalogs", "update", CAT, "--set-property", "owner=cli")
    cat = json.loads(ok(floe, "catalogs", "get", CAT))
    assert cat["properties"]["owner"] == "cli"
    assert cat["properties"]["default-base-location"] == STATE["base_location"]
    ok(floe, "catalogs", "update", CAT, "--set-property", "tmp=1", "--remove-property", "owner")
    props = json.loads(ok(floe, "catalogs", "get", CAT))["properties"]
    assert props.get("tmp") == "1" and "owner" not in props


def test_external_catalog_create_get_delete(floe):
    """An EXTERNAL catalog (fed by notifications) is made as Polaris makes it, and so is
    one with a connection (a federated catalog), shown without secrets."""
    base = (floe["data_dir"] / "data" / "cli-external").as_uri()
    ok(floe, "catalogs", "create", "--type", "external", "--storage-type", "file",
       "--default-base-location", base, "cli_external")
    cat = json.loads(ok(floe, "catalogs", "get", "cli_external"))
    assert cat["type"] == "EXTERNAL"
    assert cat["properties"]["default-base-location"] == base
    assert "connectionConfigInfo" not in cat
    r = polaris(floe, "catalogs", "create", "--type", "external", "--storage-type", "file",
                "--default-base-location", base + "-federated",
                "--catalog-connection-type", "iceberg-rest",
                "--catalog-uri", "http://127.0.0.1:9/api/catalog",
                "--iceberg-remote-catalog-name", "remote",
                "--catalog-authentication-type", "implicit", "cli_federated")
    assert r.returncode == 0, r
    fed = json.loads(ok(floe, "catalogs", "get", "cli_federated"))
    assert fed["type"] == "EXTERNAL"
    conn = fed["connectionConfigInfo"]
    assert conn["connectionType"] == "ICEBERG_REST", fed
    assert conn["uri"] == "http://127.0.0.1:9/api/catalog", fed
    # (remoteCatalogName is in Floe's answer, but this CLI's model drops it when printing.)
    assert conn["authenticationParameters"]["authenticationType"] == "IMPLICIT", fed
    listed = names(ok(floe, "catalogs", "list"))
    assert "cli_external" in listed and "cli_federated" in listed
    ok(floe, "catalogs", "delete", "cli_federated")
    ok(floe, "catalogs", "delete", "cli_external")


# --------------------------------------------------------------------------- principals
def test_principal_create_prints_credentials(floe):
    creds = json.loads(ok(floe, "principals", "create", PRINCIPAL, "--property", "team=cli"))
    assert creds["clientId"] and creds["clientSecret"]
    STATE["creds"] = creds
    assert token(floe, creds["clientId"], creds["clientSecret"]).status_code == 200


def test_principal_list(floe):
    assert {PRINCIPAL, "root"} <= names(ok(floe, "principals", "list"))


def test_principal_get(floe):
    p = json.loads(ok(floe, "principals", "get", PRINCIPAL))
    assert p["name"] == PRINCIPAL
    assert p["clientId"] == STATE["creds"]["clientId"]
    assert p["properties"] == {"team": "cli"}


def test_principal_update(floe):
    ok(floe, "principals", "update", PRINCIPAL, "--set-property", "tier=gold")
    p = json.loads(ok(floe, "principals", "get", PRINCIPAL))
    assert p["properties"] == {"team": "cli", "tier": "gold"}


def test_principal_rotate_credentials(floe):
    old = STATE["creds"]
    new = json.loads(ok(floe, "principals", "rotate-credentials", PRINCIPAL))
    assert new["clientId"] == old["clientId"]
    assert new["clientSecret"] != old["clientSecret"]
    assert token(floe, new["clientId"], new["clientSecret"]).status_code == 200
    STATE["creds"] = new


def test_principal_reset(floe):
    old = STATE["creds"]
    new = json.loads(ok(floe, "principals", "reset", PRINCIPAL))
    assert new["clientId"] == old["clientId"]
    assert new["clientSecret"] != old["clientSecret"]
    assert token(floe, new["clientId"], new["clientSecret"]).status_code == 200
    assert token(floe, old["clientId"], old["clientSecret"]).status_code == 401
    STATE["creds"] = new


# --------------------------------------------------------------------------- principal roles
def test_principal_role_create(floe):
    ok(floe, "principal-roles", "create", PRINCIPAL_ROLE, "--property", "k=v")


def test_principal_role_list(floe):
    assert {PRINCIPAL_ROLE, "service_admin"} <= names(ok(floe, "principal-roles", "list"))


def test_principal_role_get(floe):
    role = json.loads(ok(floe, "principal-roles", "get", PRINCIPAL_ROLE))
    assert role["name"] == PRINCIPAL_ROLE
    assert role["properties"] == {"k": "v"}


def test_principal_role_update(floe):
    ok(floe, "principal-roles", "update", PRINCIPAL_ROLE, "--set-property", "k2=v2")
    role = json.loads(ok(floe, "principal-roles", "get", PRINCIPAL_ROLE))
    assert role["properties"] == {"k": "v", "k2": "v2"}


def test_principal_role_grant_and_list_by_principal(floe):
    assert names(ok(floe, "principal-roles", "list", "--principal", PRINCIPAL)) == set()
    ok(floe, "principal-roles", "grant", PRINCIPAL_ROLE, "--principal", PRINCIPAL)
    assert names(ok(floe, "principal-roles", "list", "--principal", PRINCIPAL)) == {PRINCIPAL_ROLE}


# --------------------------------------------------------------------------- catalog roles
def test_catalog_role_create(floe):
    ok(floe, "catalog-roles", "create", CATALOG_ROLE, "--catalog", CAT, "--property", "k=v")


def test_catalog_role_list(floe):
    assert {CATALOG_ROLE, "catalog_admin"} <= names(ok(floe, "catalog-roles", "list", CAT))


def test_catalog_role_get(floe):
    role = json.loads(ok(floe, "catalog-roles", "get", CATALOG_ROLE, "--catalog", CAT))
    assert role["name"] == CATALOG_ROLE
    assert role["properties"] == {"k": "v"}


def test_catalog_role_update(floe):
    ok(floe, "catalog-roles", "update", CATALOG_ROLE, "--catalog", CAT, "--set-property", "k2=v2")
    role = json.loads(ok(floe, "catalog-roles", "get", CATALOG_ROLE, "--catalog", CAT))
    assert role["properties"] == {"k": "v", "k2": "v2"}


def test_catalog_role_grant_to_principal_role(floe):
    ok(floe, "catalog-roles", "grant", CATALOG_ROLE, "--catalog", CAT, "--principal-role", PRINCIPAL_ROLE)
    listed = names(ok(floe, "catalog-roles", "list", CAT, "--principal-role", PRINCIPAL_ROLE))
    assert listed == {CATALOG_ROLE}


# --------------------------------------------------------------------------- namespaces
def test_namespace_create(floe):
    ok(floe, "namespaces", "create", "--catalog", CAT, NS)
    ok(floe, "namespaces", "create", "--catalog", CAT, NS_CHILD, "--property", "a=b")
    ok(floe, "namespaces", "create", "--catalog", CAT, NS_OTHER)


def test_namespace_list(floe):
    top = {o["namespace"] for o in json_lines(ok(floe, "namespaces", "list", "--catalog", CAT))}
    assert top == {NS, NS_OTHER}
    kids = {o["namespace"] for o in json_lines(
        ok(floe, "namespaces", "list", "--catalog", CAT, "--parent", NS))}
    assert kids == {NS_CHILD}


def test_namespace_get(floe):
    ns = json.loads(ok(floe, "namespaces", "get", "--catalog", CAT, NS_CHILD))
    assert ns["namespace"] == NS_CHILD.split(".")
    assert ns["properties"].get("a") == "b"


def test_tables_views_list_and_find(floe):
    assert json_lines(ok(floe, "tables", "list", "--catalog", CAT, "--namespace", NS)) == []
    assert json_lines(ok(floe, "views", "list", "--catalog", CAT, "--namespace", NS)) == []
    assert "1 Namespace" in ok(floe, "find", "child")


# --------------------------------------------------------------------------- privileges
def grants(floe) -> list[dict]:
    return json_lines(ok(floe, "privileges", "list", "--catalog", CAT, "--catalog-role", CATALOG_ROLE))


def as_root(floe, method, path, body) -> requests.Response:
    r = token(floe, ROOT_ID, ROOT_SECRET)
    assert r.status_code == 200, r.text
    headers = {"Authorization": "Bearer " + r.json()["access_token"]}
    return requests.request(method, floe["base"] + path, headers=headers, json=body, timeout=10)


def test_privileges_grant_and_list(floe):
    role = ["--catalog", CAT, "--catalog-role", CATALOG_ROLE]
    # Grants name objects that exist (as in Polaris): the CLI's grant on a missing table
    # fails, so the table and view are created first, over REST.
    r = polaris(floe, "privileges", "table", "grant", *role, "--namespace", NS, "--table", "t1",
                "TABLE_READ_DATA")
    assert r.returncode != 0 and "NoSuchTableException" in r.stderr + r.stdout
    schema = {"type": "struct", "fields": [{"id": 1, "name": "x", "type": "long", "required": False}]}
    r = as_root(floe, "POST", f"/api/catalog/v1/{CAT}/namespaces/{NS}/tables", {"name": "t1", "schema": schema})
    assert r.status_code == 200, r.text
    r = as_root(floe, "POST", f"/api/catalog/v1/{CAT}/namespaces/{NS}/views", {
        "name": "v1", "schema": schema, "properties": {},
        "view-version": {"version-id": 1, "timestamp-ms": 1, "schema-id": 0, "default-namespace": [NS],
                         "summary": {}, "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"}]}})
    assert r.status_code == 200, r.text
    ok(floe, "privileges", "catalog", "grant", *role, "NAMESPACE_LIST")
    ok(floe, "privileges", "catalog", "grant", *role, "CATALOG_MANAGE_CONTENT")
    ok(floe, "privileges", "namespace", "grant", *role, "--namespace", NS, "TABLE_LIST")
    ok(floe, "privileges", "table", "grant", *role, "--namespace", NS, "--table", "t1", "TABLE_READ_DATA")
    ok(floe, "privileges", "view", "grant", *role, "--namespace", NS, "--view", "v1", "VIEW_READ_PROPERTIES")
    got = grants(floe)
    assert {"type": "catalog", "privilege": "NAMESPACE_LIST"} in got
    assert {"type": "catalog", "privilege": "CATALOG_MANAGE_CONTENT"} in got
    assert {"type": "namespace", "namespace": [NS], "privilege": "TABLE_LIST"} in got
    assert {"type": "table", "namespace": [NS], "tableName": "t1", "privilege": "TABLE_READ_DATA"} in got
    assert {"type": "view", "namespace": [NS], "viewName": "v1", "privilege": "VIEW_READ_PROPERTIES"} in got
    assert len(got) == 5


def test_fine_grained_table_privileges_grant_and_revoke(floe):
    """Polaris's per-update table privileges, through the CLI: granted, listed, revoked."""
    role = ["--catalog", CAT, "--catalog-role", CATALOG_ROLE]
    before = grants(floe)
    ok(floe, "privileges", "table", "grant", *role, "--namespace", NS, "--table", "t1", "TABLE_ADD_SNAPSHOT")
    ok(floe, "privileges", "namespace", "grant", *role, "--namespace", NS, "TABLE_MANAGE_STRUCTURE")
    got = grants(floe)
    assert {"type": "table", "namespace": [NS], "tableName": "t1", "privilege": "TABLE_ADD_SNAPSHOT"} in got
    assert {"type": "namespace", "namespace": [NS], "privilege": "TABLE_MANAGE_STRUCTURE"} in got
    ok(floe, "privileges", "table", "revoke", *role, "--namespace", NS, "--table", "t1", "TABLE_ADD_SNAPSHOT")
    ok(floe, "privileges", "namespace", "revoke", *role, "--namespace", NS, "TABLE_MANAGE_STRUCTURE")
    assert grants(floe) == before


def test_privileges_catalog_revoke(floe):
    ok(floe, "privileges", "catalog", "revoke", "--catalog", CAT, "--catalog-role", CATALOG_ROLE,
       "CATALOG_MANAGE_CONTENT")
    assert {"type": "catalog", "privilege": "CATALOG_MANAGE_CONTENT"} not in grants(floe)
    assert len(grants(floe)) == 4


# --------------------------------------------------------------------------- summaries
def test_principal_summarize_and_access(floe):
    out = ok(floe, "principals", "summarize", PRINCIPAL)
    assert PRINCIPAL_ROLE in out and CAT in out
    access = json.loads(ok(floe, "principals", "access", PRINCIPAL))
    assert access["principal"] == PRINCIPAL
    [prole] = access["principal_roles"]
    assert prole["name"] == PRINCIPAL_ROLE
    [crole] = prole["catalog_roles"]
    assert (crole["name"], crole["catalog"]) == (CATALOG_ROLE, CAT)
    assert {"type": "catalog", "privilege": "NAMESPACE_LIST"} in crole["privileges"]


def test_principal_role_summarize(floe):
    out = ok(floe, "principal-roles", "summarize", PRINCIPAL_ROLE)
    assert PRINCIPAL in out and f"{CATALOG_ROLE} (Catalog: {CAT})" in out


def test_catalog_summarize(floe):
    ok(floe, "catalogs", "summarize", CAT)


def test_namespace_summarize(floe):
    ok(floe, "namespaces", "summarize", "--catalog", CAT, NS)


# --------------------------------------------------------------------------- policies
def test_policies_create_attach_apply_and_delete(floe, tmp_path):
    where = ("--catalog", CAT, "--namespace", NS)
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"enable": True, "config": {"target_file_size_bytes": 134217728}}))
    ok(floe, "policies", "create", *where, "--policy-file", str(policy),
       "--policy-type", "system.data-compaction", "--policy-description", "compact", "compaction")
    got = json.loads(ok(floe, "policies", "get", *where, "compaction"))["policy"]
    assert (got["policy-type"], got["version"], got["description"]) == \
        ("system.data-compaction", 0, "compact")
    assert json.loads(got["content"])["config"]["target_file_size_bytes"] == 134217728
    listed = json.loads(ok(floe, "policies", "list", *where))
    assert listed["identifiers"] == [{"namespace": [NS], "name": "compaction"}]
    # Invalid content is refused by the server, not only by the CLI.
    policy.write_text(json.dumps({"enable": "yes"}))
    assert polaris(floe, "policies", "create", *where, "--policy-file", str(policy),
                   "--policy-type", "system.snapshot-expiry", "bad").returncode != 0
    # update reads the version, then sends it.
    policy.write_text(json.dumps({"enable": False}))
    ok(floe, "policies", "update", *where, "--policy-file", str(policy), "compaction")
    assert json.loads(ok(floe, "policies", "get", *where, "compaction"))["policy"]["version"] == 1

    ok(floe, "policies", "attach", *where, "--attachment-type", "catalog", "compaction")
    ok(floe, "policies", "attach", *where, "--attachment-type", "table-like",
       "--attachment-path", f"{NS}.t1", "compaction")

    def applicable(*args):
        out = ok(floe, "policies", "list", "--catalog", CAT, "--applicable", *args)
        return [(p["name"], p["inherited"]) for p in json_lines(out)]

    assert applicable() == [("compaction", False)]
    assert applicable("--namespace", NS) == [("compaction", True)]
    assert applicable("--namespace", NS, "--target-name", "t1") == [("compaction", False)]
    assert applicable("--policy-type", "system.snapshot-expiry") == []
    # Attached, it deletes only with --detach-all.
    assert polaris(floe, "policies", "delete", *where, "compaction").returncode != 0
    ok(floe, "policies", "detach", *where, "--attachment-type", "table-like",
       "--attachment-path", f"{NS}.t1", "compaction")
    assert applicable("--namespace", NS, "--target-name", "t1") == [("compaction", True)]
    ok(floe, "policies", "delete", *where, "--detach-all", "compaction")
    assert json.loads(ok(floe, "policies", "list", *where))["identifiers"] == []
    assert applicable() == []


# --------------------------------------------------------------------------- the CLI's grants, enforced
def test_cli_principal_gets_exactly_what_was_granted(floe):
    # NAMESPACE_LIST on the catalog: listing namespaces is allowed.
    r = as_principal(floe, "GET", f"/api/catalog/v1/{CAT}/namespaces")
    assert r.status_code == 200, r.text
    assert [NS] in r.json()["namespaces"]
    # TABLE_LIST on namespace NS only: allowed there, refused on a sibling namespace.
    r = as_principal(floe, "GET", f"/api/catalog/v1/{CAT}/namespaces/{NS}/tables")
    assert r.status_code == 200, r.text
    r = as_principal(floe, "GET", f"/api/catalog/v1/{CAT}/namespaces/{NS_OTHER}/tables")
    assert r.status_code == 403, r.text
    # Not granted: creating a namespace (CATALOG_MANAGE_CONTENT was revoked), another
    # catalog, the management API.
    r = as_principal(floe, "POST", f"/api/catalog/v1/{CAT}/namespaces", json={"namespace": ["nope"]})
    assert r.status_code == 403, r.text
    r = as_principal(floe, "GET", "/api/catalog/v1/default/namespaces")
    assert r.status_code == 403, r.text
    r = as_principal(floe, "GET", "/api/management/v1/principals")
    assert r.status_code == 403, r.text
    # The CLI itself, logged in as that principal: the same split.
    creds = {"client_id": STATE["creds"]["clientId"], "client_secret": STATE["creds"]["clientSecret"]}
    listed = json_lines(ok(floe, "namespaces", "list", "--catalog", CAT, **creds))
    assert {"namespace": NS} in listed
    r = polaris(floe, "principals", "list", **creds)
    assert r.returncode != 0 and "ForbiddenException" in r.stderr + r.stdout


def test_cli_revokes_are_enforced(floe):
    role = ["--catalog", CAT, "--catalog-role", CATALOG_ROLE]
    ok(floe, "privileges", "namespace", "revoke", *role, "--namespace", NS, "TABLE_LIST")
    ok(floe, "privileges", "table", "revoke", *role, "--namespace", NS, "--table", "t1", "TABLE_READ_DATA")
    ok(floe, "privileges", "view", "revoke", *role, "--namespace", NS, "--view", "v1", "VIEW_READ_PROPERTIES")
    assert grants(floe) == [{"type": "catalog", "privilege": "NAMESPACE_LIST"}]
    r = as_principal(floe, "GET", f"/api/catalog/v1/{CAT}/namespaces/{NS}/tables")
    assert r.status_code == 403, r.text
    ok(floe, "privileges", "catalog", "revoke", *role, "NAMESPACE_LIST")
    assert grants(floe) == []
    r = as_principal(floe, "GET", f"/api/catalog/v1/{CAT}/namespaces")
    assert r.status_code == 403, r.text


def test_catalog_role_revoke(floe):
    ok(floe, "catalog-roles", "revoke", CATALOG_ROLE, "--catalog", CAT, "--principal-role", PRINCIPAL_ROLE)
    assert names(ok(floe, "catalog-roles", "list", CAT, "--principal-role", PRINCIPAL_ROLE)) == set()


def test_principal_role_revoke(floe):
    ok(floe, "principal-roles", "revoke", PRINCIPAL_ROLE, "--principal", PRINCIPAL)
    assert names(ok(floe, "principal-roles", "list", "--principal", PRINCIPAL)) == set()


# --------------------------------------------------------------------------- deletes
def test_namespace_delete(floe):
    # The table and view made for the grants go first (the CLI has no table commands).
    for kind, name in (("tables", "t1"), ("views", "v1")):
        r = as_root(floe, "DELETE", f"/api/catalog/v1/{CAT}/namespaces/{NS}/{kind}/{name}", None)
        assert r.status_code == 204, r.text
    for ns in (NS_CHILD, NS, NS_OTHER):
        ok(floe, "namespaces", "delete", "--catalog", CAT, ns)
    assert json_lines(ok(floe, "namespaces", "list", "--catalog", CAT)) == []


def test_catalog_role_delete(floe):
    ok(floe, "catalog-roles", "delete", CATALOG_ROLE, "--catalog", CAT)
    assert CATALOG_ROLE not in names(ok(floe, "catalog-roles", "list", CAT))
    r = polaris(floe, "catalog-roles", "get", CATALOG_ROLE, "--catalog", CAT)
    assert r.returncode != 0 and "NotFoundException" in r.stderr + r.stdout


def test_principal_role_delete(floe):
    ok(floe, "principal-roles", "delete", PRINCIPAL_ROLE)
    assert PRINCIPAL_ROLE not in names(ok(floe, "principal-roles", "list"))


def test_principal_delete(floe):
    creds = STATE["creds"]
    ok(floe, "principals", "delete", PRINCIPAL)
    assert PRINCIPAL not in names(ok(floe, "principals", "list"))
    assert token(floe, creds["clientId"], creds["clientSecret"]).status_code == 401


def test_catalog_delete(floe):
    ok(floe, "catalogs", "delete", CAT)
    assert names(ok(floe, "catalogs", "list")) == {"default"}
    r = polaris(floe, "catalogs", "get", CAT)
    assert r.returncode != 0 and "NotFoundException" in r.stderr + r.stdout
