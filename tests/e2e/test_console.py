"""The web console in a real browser: Playwright drives Debian's Chromium against a running
`floe serve` (authentication on) whose tables PyIceberg wrote, with several snapshots.

Every page is checked for what it shows against what the REST API says, every test fails
on a JavaScript error or a request to any other host (the console must work offline), and
screenshots land in $CONSOLE_SCREENSHOTS (default: the session's temp dir; the README's
picture, docs/console.png, is this suite's console.png).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest
import requests

from conftest import ApiClient, FloeServer, access_token, free_port

playwright_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = os.environ.get("CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")
# As root in a container: no sandbox; and no background traffic to Google's hosts.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
MGMT = "/api/management/v1"
NS = ["lake", "sales"]


@pytest.fixture(scope="module")
def shots(_e2e_tmp) -> Path:
    path = Path(os.environ.get("CONSOLE_SCREENSHOTS") or (_e2e_tmp / "screenshots"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def lake(floe):
    """A namespace tree, a partitioned and sorted table with nested types and five
    snapshots (written by PyIceberg), a tag, a view with two dialects and two versions,
    and a dropped table."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.sorting import SortField, SortOrder
    from pyiceberg.transforms import DayTransform, IdentityTransform
    from pyiceberg.types import (ListType, LongType, MapType, NestedField, StringType,
                                 StructType, TimestamptzType)

    catalog = load_catalog("floe", type="rest", uri=floe.url, warehouse="default",
                           credential=floe.credential, scope="PRINCIPAL_ROLE:ALL")
    catalog.create_namespace("lake")
    catalog.create_namespace(tuple(NS))
    catalog.create_namespace(("lake", "staging"))
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "region", StringType(), required=False),
        NestedField(3, "ts", TimestamptzType(), required=False),
        NestedField(4, "customer", StructType(
            NestedField(5, "name", StringType(), required=False),
            NestedField(6, "tags", ListType(7, StringType(), element_required=False), required=False),
        ), required=False),
        NestedField(8, "attrs", MapType(9, StringType(), 10, LongType(), value_required=False), required=False),
        identifier_field_ids=[1],
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"),
                         PartitionField(source_id=3, field_id=1001, transform=DayTransform(), name="ts_day"))
    order = SortOrder(SortField(source_id=1, transform=IdentityTransform()))
    table = catalog.create_table(("lake", "sales", "orders"), schema=schema, partition_spec=spec, sort_order=order,
                                 properties={"owner": "console-test"})
    arrow = table.schema().as_arrow()

    def rows(start, n, region):
        return pa.Table.from_pylist([{
            "id": i, "region": region, "ts": datetime(2026, 11, 1 + i % 20, tzinfo=timezone.utc),
            "customer": {"name": f"c{i}", "tags": ["a", "b"]}, "attrs": [("k", i)],
        } for i in range(start, start + n)], schema=arrow)

    table.append(rows(0, 10, "eu"))
    table.append(rows(10, 20, "us"))
    table.append(rows(30, 5, "eu"))
    table.delete("region = 'us'")
    table.append(rows(100, 7, "apac"))
    table = catalog.load_table(("lake", "sales", "orders"))
    first = table.metadata.snapshots[0].snapshot_id
    table.manage_snapshots().create_tag(first, "first-load").commit()

    api = ApiClient(floe.url, access_token(floe.url))
    view = {
        "name": "eu_orders", "schema": {"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "id", "type": "long", "required": False}]},
        "view-version": {"version-id": 1, "timestamp-ms": 1763900000000, "schema-id": 0, "default-namespace": NS,
                         "summary": {"engine-name": "spark"}, "representations": [
                             {"type": "sql", "sql": "SELECT id FROM orders WHERE region = 'eu'", "dialect": "spark"},
                             {"type": "sql", "sql": "SELECT id FROM lake.sales.orders WHERE region = 'eu'", "dialect": "trino"}]},
        "properties": {"comment": "EU orders"},
    }
    base = "/v1/default/namespaces/lake%1Fsales/views"
    assert api.call("POST", base, view).status_code == 200
    update = {"requirements": [], "updates": [
        {"action": "add-view-version", "view-version": {
            "version-id": 2, "timestamp-ms": 1763900100000, "schema-id": 0, "default-namespace": NS,
            "summary": {"engine-name": "trino"}, "representations": [
                {"type": "sql", "sql": "SELECT id FROM orders WHERE region IN ('eu', 'uk')", "dialect": "spark"},
                {"type": "sql", "sql": "SELECT id FROM lake.sales.orders WHERE region IN ('eu', 'uk')", "dialect": "trino"}]}},
        {"action": "set-current-view-version", "view-version-id": -1}]}
    r = api.call("POST", f"{base}/eu_orders", update)
    assert r.status_code == 200, r.text
    catalog.create_table(("lake", "staging", "scratch"), schema=Schema(NestedField(1, "x", LongType())))
    catalog.drop_table(("lake", "staging", "scratch"))
    loaded = api.call("GET", "/v1/default/namespaces/lake%1Fsales/tables/orders").json()
    # A Delta table beside them, through Polaris's generic table API.
    generic = {"name": "clicks", "format": "delta", "doc": "Click stream, kept by Spark's Delta",
               "base-location": loaded["metadata"]["location"].rsplit("/", 1)[0] + "/clicks_delta",
               "properties": {"delta.minReaderVersion": "3"}}
    r = api.call("POST", "/api/catalog/polaris/v1/default/namespaces/lake%1Fsales/generic-tables", generic)
    assert r.status_code == 200, r.text
    # Policies: snapshot expiry on all of `lake`, compaction on the orders table.
    polaris = "/api/catalog/polaris/v1/default/namespaces"
    for ns, body, target in [
        ("lake", {"name": "expiry", "type": "system.snapshot-expiry",
                  "content": '{"enable":true,"config":{"max_snapshot_age_days":7}}'},
         {"type": "namespace", "path": ["lake"]}),
        ("lake%1Fsales", {"name": "compact", "type": "system.data-compaction", "content": '{"enable":true}'},
         {"type": "table-like", "path": NS + ["orders"]}),
    ]:
        r = api.call("POST", f"{polaris}/{ns}/policies", body)
        assert r.status_code == 200, r.text
        r = api.call("PUT", f"{polaris}/{ns}/policies/{body['name']}/mappings", {"target": target})
        assert r.status_code == 204, r.text
    return {"api": api, "table": loaded, "generic": generic}


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM} (scripts/test-all.sh installs Debian's chromium)",
                    pytrace=False)
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    """A fresh browser context; fails the test on a JavaScript error, a console error or a
    request to anything but the server, or any 5xx. A test with servers of its own asks for
    `floe_server_factory` before `page`, so that the page closes before they stop."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    # A 4xx is an answer the console shows (e.g. a refused grant); a 5xx, never expected,
    # fails the test (the browser logs both as "Failed to load resource").
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type == "error" and "with a status of 4" not in m.text else None)
    page.on("response", lambda r: problems.append(f"{r.status} from {r.url}") if r.status >= 500 else None)
    page.on("request", lambda r: problems.append(f"request elsewhere: {r.url}")
            if not r.url.startswith("http://127.0.0.1:") else None)
    page.set_default_timeout(15_000)
    yield page
    context.close()
    assert not problems, "\n".join(problems)


def sign_in(page, url, client_id=FloeServer.client_id, secret=FloeServer.client_secret):
    page.goto(url + "/ui/")
    page.wait_for_url("**/ui/#/login")
    page.fill("#login-credentials input[name=client_id]", client_id)
    page.fill("#login-credentials input[name=client_secret]", secret)
    page.click("#login-credentials button[type=submit]")
    page.wait_for_selector("[data-testid=catalog]")


def open_namespace(page, url, levels):
    """Go to a namespace's page and wait until *that* page shows: a hash change keeps the
    previous page on screen until the new one has loaded, so waiting for a section every
    page has would read the old one."""
    page.goto(f"{url}/ui/#/c/default/ns/{'%1F'.join(levels)}")
    page.wait_for_selector(f"main h1:text-is('{'.'.join(levels)}')")


def test_sign_in_then_browse_to_a_table(page, floe, lake, shots):
    sign_in(page, floe.url)
    assert page.locator("[data-testid=who]").inner_text() == FloeServer.client_id
    assert page.locator("[data-testid=catalog] h2").all_inner_texts() == ["default"]
    page.click("[data-testid=catalog]")
    tree = page.locator("[data-testid=namespace]")
    tree.first.wait_for()
    assert tree.all_inner_texts() == ["lake"]
    page.click("ul.tree details summary")  # open lake: its children load
    page.locator("[data-testid=namespace]", has_text="sales").wait_for()
    page.locator("[data-testid=namespace]", has_text="sales").click()
    page.wait_for_url("**/ns/lake%1Fsales")
    page.locator("[data-testid=table]", has_text="orders").click()
    page.wait_for_selector("[data-testid=snapshot-chart]")
    page.screenshot(path=str(shots / "console.png"), full_page=True,
                    clip={"x": 0, "y": 0, "width": 1280, "height": 1480})

    metadata = lake["table"]["metadata"]
    current = next(s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"])
    assert page.locator("[data-testid=figure-records] .value").inner_text() == \
        f"{int(current['summary']['total-records']):,}"
    assert page.locator("[data-testid=figure-snapshots] .value").inner_text() == str(len(metadata["snapshots"]))


def test_table_page_shows_what_load_table_says(page, floe, lake, shots):
    sign_in(page, floe.url)
    page.goto(floe.url + "/ui/#/c/default/t/lake%1Fsales/orders")
    page.wait_for_selector("[data-testid=snapshot-chart]")
    metadata = lake["table"]["metadata"]

    # Schema: nested fields indented under their parents, identifier field marked.
    schema = page.locator("[data-testid=schema] tbody tr")
    names = [(r.get_attribute("data-depth"), r.locator("td.field-name").inner_text()) for r in schema.all()]
    assert names == [("0", "id"), ("0", "region"), ("0", "ts"), ("0", "customer"), ("1", "name"), ("1", "tags"),
                     ("2", "element"), ("0", "attrs"), ("1", "key"), ("1", "value")]
    assert "list<string>" in schema.nth(5).inner_text()
    assert "map<string, long>" in schema.nth(7).inner_text()
    assert "identifier" in (schema.nth(0).get_attribute("class") or "")

    spec = page.locator("[data-testid=partition-spec] tbody tr").all_inner_texts()
    assert [" ".join(r.split()) for r in spec] == ["region region identity", "ts_day ts day"]
    assert " ".join(page.locator("[data-testid=sort-order] tbody tr").inner_text().split()) == \
        "id identity asc nulls-first"

    # Snapshots: one chart column and one row per snapshot, figures from the summaries.
    snapshots = metadata["snapshots"]
    assert len(snapshots) == 5
    assert page.locator("[data-testid=snapshot-chart] g.column").count() == len(snapshots)
    rows = page.locator("[data-testid=snapshots] tbody tr")
    assert rows.count() == len(snapshots)
    delete = next(s for s in snapshots if s["summary"]["operation"] in ("delete", "overwrite"))
    row = page.locator(f"[data-testid=snapshots] tr[data-snapshot-id='{delete['snapshot-id']}']")
    assert delete["summary"]["deleted-records"] == "20"
    assert "20" in row.locator("td").nth(6).inner_text()
    tip = page.locator(f"[data-testid=snapshot-chart] g[data-snapshot-id='{delete['snapshot-id']}'] title")
    assert "−20" in tip.text_content()

    refs = {r.split("\t")[0]: r for r in page.locator("[data-testid=refs] tbody tr").all_inner_texts()}
    assert set(refs) == {"main", "first-load"}
    assert str(snapshots[0]["snapshot-id"]) in refs["first-load"] and "tag" in refs["first-load"]
    assert page.locator("[data-testid=metadata-log] tbody tr").count() == len(metadata["metadata-log"])
    assert "console-test" in page.locator("section", has_text="Properties").last.inner_text()
    page.screenshot(path=str(shots / "console-table-full.png"), full_page=True)


def test_view_page_shows_sql_per_dialect_and_versions(page, floe, lake, shots):
    sign_in(page, floe.url)
    page.goto(floe.url + "/ui/#/c/default/ns/lake%1Fsales")
    page.locator("[data-testid=view]", has_text="eu_orders").click()
    page.wait_for_selector("[data-testid=current-sql]")
    current = page.locator("[data-testid=current-sql] .dialect")
    assert [d.get_attribute("data-dialect") for d in current.all()] == ["spark", "trino"]
    assert "FROM lake.sales.orders WHERE region IN ('eu', 'uk')" in current.nth(1).inner_text()
    versions = page.locator("[data-testid=view-versions] details")
    assert [v.get_attribute("data-version-id") for v in versions.all()] == ["2", "1"]
    old = versions.nth(1)
    old.locator("summary").click()
    assert {d.get_attribute("data-dialect") for d in old.locator(".dialect").all()} == {"spark", "trino"}
    assert "SELECT id FROM orders WHERE region = 'eu'" in old.inner_text()
    page.screenshot(path=str(shots / "console-view.png"), full_page=True)


def test_generic_tables_are_listed_and_shown(page, floe, lake):
    sign_in(page, floe.url)
    page.goto(floe.url + "/ui/#/c/default/ns/lake%1Fsales")
    page.locator("[data-testid=generic-table]", has_text="clicks").click()
    overview = page.locator("[data-testid=generic-overview]")
    overview.wait_for()
    text = overview.inner_text()
    generic = lake["generic"]
    for shown in ("delta", generic["base-location"], generic["doc"]):
        assert shown in text, text
    assert "delta.minReaderVersion" in page.inner_text("main")
    # A namespace without any has no such section.
    open_namespace(page, floe.url, ["lake"])
    assert page.locator("h2:has-text('Generic tables')").count() == 0


def test_policies_show_where_they_apply(page, floe, lake):
    sign_in(page, floe.url)
    page.goto(floe.url + "/ui/#/c/default/ns/lake%1Fsales")
    rows = page.locator("[data-testid=policies] tbody tr")
    rows.first.wait_for()
    assert [" ".join(r.split()[:4]) for r in rows.all_inner_texts()] == [
        "lake.expiry system.snapshot-expiry inherited 0"]
    assert "max_snapshot_age_days" in rows.first.inner_text()
    page.locator("[data-testid=table]", has_text="orders").click()
    page.wait_for_selector("[data-testid=snapshot-chart]")
    rows = page.locator("[data-testid=policies] tbody tr")
    got = {r.get_attribute("data-policy"): r.locator("td").all_inner_texts()[1:3] for r in rows.all()}
    assert got == {"lake.expiry": ["system.snapshot-expiry", "inherited"],
                   "lake.sales.compact": ["system.data-compaction", "attached here"]}, got
    # A namespace under `lake` inherits its policy; on `lake` itself it is attached.
    open_namespace(page, floe.url, ["lake", "staging"])
    assert page.locator("[data-testid=policies] tr[data-policy='lake.expiry']").count() == 1
    open_namespace(page, floe.url, ["lake"])
    assert page.locator("[data-testid=policies] tbody tr td").all_inner_texts()[:3] == [
        "lake.expiry", "system.snapshot-expiry", "attached here"]


def test_undrop_from_the_console(page, floe, lake):
    sign_in(page, floe.url)
    page.goto(floe.url + "/ui/#/c/default/dropped")
    row = page.locator("[data-testid=dropped] tr[data-name='lake.staging.scratch']")
    row.wait_for()
    row.locator("input[name=to]").fill("lake.staging.scratch_restored")
    row.locator("form.undrop button").click()
    page.wait_for_selector("text=Restored lake.staging.scratch_restored")
    api = lake["api"]
    assert api.call("GET", "/v1/default/namespaces/lake%1Fstaging/tables/scratch_restored").status_code == 200
    assert api.call("GET", "/v1/default/namespaces/lake%1Fstaging/tables/scratch").status_code == 404
    assert page.locator("[data-testid=dropped] tr[data-name='lake.staging.scratch']").count() == 0


def test_admin_creates_a_principal_and_its_secret_shows_once(page, floe, lake, shots):
    sign_in(page, floe.url)
    page.click("#nav a[data-nav=security]")
    page.wait_for_selector("[data-testid=principals]")
    page.fill("#create-principal input[name=name]", "analyst")
    page.click("#create-principal button[type=submit]")
    secret = page.locator("[data-testid=new-client-secret]")
    secret.wait_for()
    client_id = page.locator("[data-testid=new-client-id]").inner_text()
    # The credentials work, and the secret is in no later response.
    token = access_token(floe.url, client_id, secret.inner_text())
    assert token
    listed = lake["api"].call("GET", f"{MGMT}/principals").text
    assert "analyst" in listed and secret.inner_text() not in listed
    page.reload()
    page.wait_for_selector("[data-testid=principals]")
    assert page.locator("[data-testid=new-client-secret]").count() == 0
    page.screenshot(path=str(shots / "console-security.png"), full_page=True)


def test_grants_are_managed_from_the_console(page, floe, lake):
    api = lake["api"]
    sign_in(page, floe.url)
    page.goto(floe.url + "/ui/#/c/default/roles")
    page.fill("#create-catalog-role input[name=name]", "auditors")
    page.click("#create-catalog-role button[type=submit]")
    grant_form = page.locator("form.grant-form[data-role=auditors]")
    grant_form.wait_for()
    grant_form.locator("select[name=type]").select_option("namespace")
    grant_form.locator("input[name=namespace]").fill("lake.sales")
    grant_form.locator("select[name=privilege]").select_option("TABLE_READ_DATA")
    grant_form.locator("button[type=submit]").click()
    grants = page.locator("[data-testid=grants-auditors] tbody tr")
    grants.first.wait_for()
    assert " ".join(grants.first.inner_text().split()) == "namespace lake.sales TABLE_READ_DATA Revoke"
    listed = api.call("GET", f"{MGMT}/catalogs/default/catalog-roles/auditors/grants").json()["grants"]
    assert listed == [{"type": "namespace", "namespace": NS, "privilege": "TABLE_READ_DATA"}]
    # A grant the server refuses (a table privilege on the catalog) shows why, changes nothing.
    grant_form = page.locator("form.grant-form[data-role=auditors]")
    grant_form.locator("select[name=type]").select_option("table")
    grant_form.locator("input[name=namespace]").fill("lake.sales")
    grant_form.locator("input[name=name]").fill("no_such_table")
    grant_form.locator("select[name=privilege]").select_option("TABLE_DROP")
    grant_form.locator("button[type=submit]").click()
    grant_form.locator(".notice.error").wait_for()
    assert api.call("GET", f"{MGMT}/catalogs/default/catalog-roles/auditors/grants").json()["grants"] == listed
    # A policy's privileges, on a policy (the fixture's lake.expiry).
    grant_form = page.locator("form.grant-form[data-role=auditors]")
    grant_form.locator("select[name=type]").select_option("policy")
    assert "POLICY_ATTACH" in grant_form.locator("select[name=privilege]").inner_text()
    grant_form.locator("input[name=namespace]").fill("lake")
    grant_form.locator("input[name=name]").fill("expiry")
    grant_form.locator("select[name=privilege]").select_option("POLICY_READ")
    grant_form.locator("button[type=submit]").click()
    page.locator("[data-testid=grants-auditors] tbody tr", has_text="policy lake.expiry").wait_for()
    on_policy = {"type": "policy", "namespace": ["lake"], "policyName": "expiry", "privilege": "POLICY_READ"}
    got = api.call("GET", f"{MGMT}/catalogs/default/catalog-roles/auditors/grants").json()["grants"]
    assert sorted(got, key=str) == sorted(listed + [on_policy], key=str)
    page.locator("[data-testid=grants-auditors] tbody tr", has_text="policy lake.expiry").locator(
        "button", has_text="Revoke").click()
    page.locator("[data-testid=grants-auditors] tbody tr", has_text="policy lake.expiry").wait_for(state="detached")
    page.locator("[data-testid=grants-auditors] button", has_text="Revoke").click()
    page.locator("[data-testid=grants-auditors]", has_text="No grants.").wait_for()
    assert api.call("GET", f"{MGMT}/catalogs/default/catalog-roles/auditors/grants").json()["grants"] == []


def test_a_reader_sees_only_what_it_was_granted(page, floe, lake):
    api = lake["api"]
    # A second catalog the reader gets nothing in; a role that may read `default`.
    assert api.call("POST", f"{MGMT}/catalogs", {"catalog": {
        "name": "hidden", "type": "INTERNAL", "properties": {"default-base-location": f"file://{floe.data_dir}/hidden"},
        "storageConfigInfo": {"storageType": "FILE", "allowedLocations": [f"file://{floe.data_dir}/hidden"]}}}).status_code == 201
    created = api.call("POST", f"{MGMT}/principals", {"principal": {"name": "reader"}}).json()
    assert api.call("POST", f"{MGMT}/principal-roles", {"principalRole": {"name": "readers"}}).status_code == 201
    assert api.call("PUT", f"{MGMT}/principals/reader/principal-roles", {"principalRole": {"name": "readers"}}).status_code == 201
    assert api.call("POST", f"{MGMT}/catalogs/default/catalog-roles", {"catalogRole": {"name": "browse"}}).status_code == 201
    for privilege in ("CATALOG_READ_PROPERTIES", "NAMESPACE_LIST", "NAMESPACE_READ_PROPERTIES", "TABLE_LIST",
                      "VIEW_LIST", "TABLE_READ_PROPERTIES"):
        r = api.call("PUT", f"{MGMT}/catalogs/default/catalog-roles/browse/grants",
                     {"grant": {"type": "catalog", "privilege": privilege}})
        assert r.status_code == 201, r.text
    assert api.call("PUT", f"{MGMT}/principal-roles/readers/catalog-roles/default",
                    {"catalogRole": {"name": "browse"}}).status_code == 201

    sign_in(page, floe.url, created["credentials"]["clientId"], created["credentials"]["clientSecret"])
    assert page.locator("[data-testid=catalog] h2").all_inner_texts() == ["default"]
    assert page.locator("#nav a[data-nav=security]").is_hidden()
    page.goto(floe.url + "/ui/#/c/default/t/lake%1Fsales/orders")
    page.wait_for_selector("[data-testid=schema]")
    # Security pages are refused by the server, not just hidden.
    page.goto(floe.url + "/ui/#/security")
    # The error page's own heading: a notice alone could be one of the previous page's.
    page.wait_for_selector("main h1:text-is('Something went wrong')")
    assert "403" in page.locator("main .notice.error").inner_text()


def test_sign_in_with_a_token_from_an_oidc_provider(floe_server_factory, page, _e2e_tmp):
    """The console takes an access token the identity provider issued: here the test plays
    the provider with its fixture key (tests/fixtures), as tests/it/http_oidc.rs does."""
    import jwt
    from cryptography.hazmat.primitives import serialization

    key_pem = (Path(__file__).resolve().parents[1] / "fixtures/oidc-test-key.pem").read_bytes()
    key = serialization.load_pem_private_key(key_pem, password=None)
    jwk = jwt.algorithms.ECAlgorithm.to_jwk(key.public_key(), as_dict=True) | {"kid": "console", "alg": "ES256", "use": "sig"}
    jwks = _e2e_tmp / "console-jwks.json"
    jwks.write_text(json.dumps({"keys": [jwk]}))
    issuer = "https://idp.floe.test/realms/data"
    server = floe_server_factory(["--auth", "both", "--oidc-issuer", issuer, "--oidc-jwks", str(jwks),
                                  "--oidc-audience", "floe", "--oidc-roles-claim", "roles",
                                  "--oidc-create-principals"])
    now = int(time.time())

    def token(**claims):
        body = {"iss": issuer, "aud": "floe", "sub": "alice@example.com", "iat": now, "exp": now + 600,
                "roles": ["service_admin"]} | claims
        return jwt.encode(body, key, algorithm="ES256", headers={"kid": "console"})

    page.goto(server.url + "/ui/")
    page.wait_for_url("**/ui/#/login")
    # A token for another audience is refused, and the console stays signed out.
    page.fill("#login-token input[name=token]", token(aud="other-service"))
    page.click("#login-token button[type=submit]")
    page.locator("#login-token .notice.error").wait_for()
    assert "401" in page.locator("#login-token .notice.error").inner_text()
    page.fill("#login-token input[name=token]", token())
    page.click("#login-token button[type=submit]")
    page.wait_for_selector("[data-testid=catalog]")
    assert page.locator("[data-testid=who]").inner_text() == "alice@example.com"
    assert page.locator("[data-testid=catalog] h2").all_inner_texts() == ["default"]
    page.click("[data-testid=who] + button")  # sign out
    page.wait_for_url("**/ui/#/login")
    page.locator("#login-token").wait_for()  # drawn, so it cannot land after the docs
    # Signed out, the catalogs page sends the browser back to sign in.
    page.goto(server.url + "/ui/#/docs")
    page.wait_for_selector("details.operation")
    page.goto(server.url + "/ui/#/")
    page.wait_for_url("**/ui/#/login")
    page.locator("#login-token").wait_for()


IDP_SCRIPT = Path(__file__).resolve().parents[2] / "scripts/oidc-provider.sh"


@pytest.fixture
def identity_provider(_e2e_tmp):
    """Starts an OpenID Connect provider (oidc-provider from npm, by the project's own
    script) for a console that will listen on a given port; stops it afterwards."""
    started: list[Path] = []

    def start(console_port: int, roles: str = "service_admin") -> str:
        work = _e2e_tmp / f"idp-{console_port}"
        started.append(work)
        for _ in range(3):
            r = subprocess.run(["bash", str(IDP_SCRIPT), "start", str(work), str(free_port()),
                                f"http://127.0.0.1:{console_port}/ui/", roles],
                               capture_output=True, text=True, timeout=300)
            if r.returncode == 0:
                return r.stdout.strip().splitlines()[-1]
        pytest.fail(f"the identity provider did not start: {r.stderr[-2000:]}", pytrace=False)

    yield start
    for work in started:
        subprocess.run(["bash", str(IDP_SCRIPT), "stop", str(work)], timeout=60)


def test_sign_in_at_the_identity_providers_login_page(identity_provider, floe_server_factory, page):
    """The authorization code flow with PKCE against a real OpenID Connect provider: the
    console sends the user to the provider's login and consent pages, gets a code back,
    exchanges it for an access token (JWT, audience floe) and uses it; the server verifies
    that token like any other. Failed returns leave the console signed out, saying why."""
    port = free_port()
    issuer = identity_provider(port)
    server = floe_server_factory(["--auth", "both", "--oidc-issuer", issuer, "--oidc-audience", "floe",
                                  "--oidc-roles-claim", "roles", "--oidc-create-principals",
                                  "--console-oidc-client-id", "floe-console",
                                  "--console-oidc-scope", "openid catalog"], port=port)
    assert server.port == port, "the console's redirect URI names this port"
    config = requests.get(server.url + "/ui/config.json", timeout=10).json()["oidc"]
    assert config == {"issuer": issuer, "client_id": "floe-console", "scope": "openid catalog",
                      "authorization_endpoint": f"{issuer}/auth", "token_endpoint": f"{issuer}/token"}
    policy = requests.get(server.url + "/ui/", timeout=10).headers["content-security-policy"]
    assert f"connect-src 'self' {issuer};" in policy

    page.goto(server.url + "/ui/")
    page.wait_for_url("**/ui/#/login")
    page.click("[data-testid=login-oidc]")
    page.wait_for_url(f"{issuer}/interaction/**")
    page.fill("input[name=login]", "carol")
    page.fill("input[name=password]", "any password")
    page.click("button[type=submit]")
    page.wait_for_selector("text=Continue")  # the provider's consent page
    page.click("button[type=submit]")
    page.wait_for_selector("[data-testid=catalog]")
    assert page.url == server.url + "/ui/#/", "the code must leave the address bar"
    assert page.locator("[data-testid=who]").inner_text() == "carol"
    assert page.locator("[data-testid=catalog] h2").all_inner_texts() == ["default"]
    token = page.evaluate("sessionStorage.getItem('floe.token')")
    principal = requests.get(server.url + "/api/management/v1/principals/carol", timeout=10,
                             headers={"Authorization": f"Bearer {token}"})
    assert principal.status_code == 200, principal.text  # created on first sight

    # A return the console did not start (a forged or replayed state), even one that only
    # claims an error, signs out whoever was signed in and shows none of its words.
    assert token and page.evaluate("sessionStorage.getItem('floe.token')") == token, "signed in before"
    for query in ["?code=stolen&state=forged",
                  "?error=access_denied&error_description=call+0800+to+restore+your+account"]:
        page.goto(server.url + "/ui/" + query)
        page.wait_for_url("**/ui/#/login")
        said = page.locator("#main > .notice.error").inner_text()
        assert "not started in this tab" in said and "0800" not in said, said
        assert page.evaluate("sessionStorage.getItem('floe.token')") is None

    # A sign-in this tab started that the provider refused, or whose answer names another
    # issuer (RFC 9207): no token, and the sign-in page says why.
    for query, why in [(f"error=access_denied&error_description=denied+by+the+user&iss={issuer}",
                        "denied by the user"),
                       ("code=c&iss=http://127.0.0.1:9/", "the answer came from http://127.0.0.1:9/")]:
        page.evaluate("sessionStorage.setItem('floe.oidc', JSON.stringify({state: 's1', verifier: 'v'}))")
        page.goto(server.url + "/ui/?state=s1&" + query)
        page.wait_for_url("**/ui/#/login")
        assert why in page.locator("#main > .notice.error").inner_text()
        assert page.evaluate("sessionStorage.getItem('floe.token')") is None
        assert page.evaluate("sessionStorage.getItem('floe.oidc')") is None, "the state is single-use"


def test_console_sign_in_needs_an_external_issuer(floe_binary, tmp_path):
    r = subprocess.run([str(floe_binary), "serve", "--data-dir", str(tmp_path), "--bind", "127.0.0.1:0",
                        "--console-oidc-client-id", "floe-console"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "--console-oidc-client-id" in r.stderr and "--auth external or --auth both" in r.stderr


def test_without_authentication_there_is_no_sign_in(floe_server_factory, page):
    server = floe_server_factory(["--auth", "none"])
    page.goto(server.url + "/ui/")
    page.wait_for_selector("[data-testid=catalog]")
    assert page.locator("[data-testid=catalog] h2").all_inner_texts() == ["default"]
    assert page.locator("[data-testid=who]").count() == 0
    assert page.locator("#nav a[data-nav=security]").is_visible()


def test_api_reference_works_offline(page, floe):
    page.goto(floe.url + "/docs")
    page.wait_for_url("**/ui/#/docs")
    page.wait_for_selector("details.operation")
    operations = page.locator("details.operation")
    assert operations.count() > 30
    load = page.locator("details.operation[data-operation='GET /v1/{prefix}/namespaces/{namespace}/tables/{table}']")
    load.locator("summary").click()
    assert "LoadTableResult" in load.inner_text()
    page.locator(".tabs a", has_text="Polaris management").click()
    page.wait_for_selector("details.operation[data-operation='POST /principals']")
    page.locator(".tabs a", has_text="Polaris catalog extensions").click()
    attach = page.locator("details.operation[data-operation="
                          "'PUT /api/catalog/polaris/v1/{prefix}/namespaces/{namespace}/policies/{policy-name}/mappings']")
    attach.locator("summary").click()
    assert "AttachPolicyRequest" in attach.inner_text()
    page.locator(".tabs a", has_text="Floe's own").click()
    page.wait_for_selector("details.operation[data-operation='POST /api/management/v1/catalogs/{catalog}/dropped/{id}/undrop']")


def test_console_files_and_documents_over_http(floe):
    index = requests.get(floe.url + "/ui/", timeout=10)
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in index.headers["content-security-policy"]
    etag = index.headers["etag"]
    again = requests.get(floe.url + "/ui/", headers={"If-None-Match": etag}, timeout=10)
    assert again.status_code == 304 and again.content == b""
    assert requests.get(floe.url + "/ui", allow_redirects=False, timeout=10).headers["location"] == "/ui/"
    listed = requests.get(floe.url + "/openapi", timeout=10).json()["documents"]
    for doc in listed:
        r = requests.get(floe.url + doc["url"], timeout=10)
        assert r.status_code == 200 and r.json()["openapi"].startswith("3.")
    for missing in ("/ui/nope.js", "/openapi/nope.json", "/ui/..%2Fsrc%2Fmain.rs"):
        r = requests.get(floe.url + missing, timeout=10)
        assert r.status_code == 404, missing
        assert r.json()["error"]["code"] == 404
    # The console's own calls still need a token.
    assert requests.get(floe.url + f"{MGMT}/catalogs", timeout=10).status_code == 401
