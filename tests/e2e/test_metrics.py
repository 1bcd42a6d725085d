"""Operating Floe: /healthz, /readyz and Prometheus metrics at /metrics, scraped and
parsed with the Prometheus project's own parser (prometheus_client's OpenMetrics
parser), against a real server with authentication on."""
from __future__ import annotations

import requests
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from conftest import ApiClient, access_token

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "x", "type": "long", "required": False}]}


def scrape(url: str) -> dict:
    r = requests.get(url + "/metrics", timeout=10)  # no token: public, like /healthz
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/openmetrics-text")
    return r.text, {f.name: f for f in text_string_to_metric_families(r.text)}


def samples(family, **labels):
    return [s for s in family.samples if all(s.labels.get(k) == v for k, v in labels.items())]


def test_metrics_count_requests_by_route_template(floe_server_factory):
    server = floe_server_factory()
    api = ApiClient(server.url, access_token(server.url))
    secret_name = "payroll_2026_confidential"
    assert api.call("POST", "/v1/default/namespaces", {"namespace": ["ops"]}).status_code == 200
    created = api.call("POST", "/v1/default/namespaces/ops/tables",
                       {"name": secret_name, "schema": SCHEMA})
    assert created.status_code == 200
    table = f"/v1/default/namespaces/ops/tables/{secret_name}"
    for _ in range(3):
        assert api.call("GET", table).status_code == 200
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "1"}}]}
    assert api.call("POST", table, commit).status_code == 200
    stale = {"requirements": [{"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}],
             "updates": []}
    assert api.call("POST", table, stale).status_code == 409
    assert api.call("GET", "/v1/default/namespaces/ops/tables/missing").status_code == 404
    assert api.call("GET", "/no/such/route").status_code == 404

    text, families = scrape(server.url)
    # Raw paths never become labels: the table's name appears nowhere.
    assert secret_name not in text
    requests_total = families["floe_http_requests"]
    route = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"
    loads = samples(requests_total, method="GET", route=route, status="2xx")
    assert loads and loads[0].value == 3, loads
    assert samples(requests_total, method="GET", route=route, status="4xx")[0].value == 1
    assert samples(requests_total, route="unmatched", status="4xx")
    duration = families["floe_http_request_duration_seconds"]
    assert duration.type == "histogram"
    buckets = samples(duration, method="GET", route=route)
    inf = [s for s in buckets if s.name.endswith("_bucket") and s.labels["le"] == "+Inf"]
    assert inf and inf[0].value == 4
    commits = families["floe_commit_attempts"]
    assert samples(commits, outcome="committed")[0].value >= 2  # the create and the commit
    assert samples(commits, outcome="rejected")[0].value >= 1
    # Every checkpoint place is a series from the start (a checkpoint needs 16,000 WAL
    # pages; the store's own tests drive them and check the counts).
    checkpoints = families["floe_wal_checkpoints"]
    assert {s.labels["place"] for s in checkpoints.samples if s.name.endswith("_total")} == {
        "background", "tail", "inline", "failed"}
    writes = families["floe_store_write_duration_seconds"]
    assert [s for s in writes.samples if s.name.endswith("_count")][0].value >= 3
    build = families["floe_build_info"]
    assert samples(build, store="postgres" if server.database_url else "embedded")[0].value == 1
    # Known label values exist from the start, at 0.
    assert samples(commits, outcome="failed")[0].value == 0
    assert samples(families["floe_cache_lookups"], cache="credentials", result="hit")


def test_health_and_readiness(floe_server_factory):
    server = floe_server_factory()
    for path in ("/healthz", "/readyz"):
        r = requests.get(server.url + path, timeout=10)
        assert r.status_code == 200, (path, r.text)
    assert requests.get(server.url + "/readyz", timeout=10).json() == {"status": "ready"}
    # Everything else still needs a token.
    assert requests.get(server.url + "/v1/default/namespaces", timeout=10).status_code == 401


def test_metrics_can_be_turned_off(floe_server_factory):
    server = floe_server_factory(["--metrics", "false"])
    api = ApiClient(server.url, access_token(server.url))
    assert api.call("GET", "/v1/default/namespaces").status_code == 200
    _, families = scrape(server.url)
    assert "floe_http_requests" not in families or not families["floe_http_requests"].samples


def test_the_grafana_dashboard_queries_metrics_that_exist(floe_server_factory):
    import json
    import re
    from pathlib import Path

    server = floe_server_factory()
    text, families = scrape(server.url)
    dashboard = json.loads((Path(__file__).resolve().parents[2] / "docs/grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    names = {n for e in exprs for n in re.findall(r"\bfloe_[a-z_]+", e)}
    assert names
    # The pool's connection states exist only on PostgreSQL.
    postgres_only = {"floe_db_pool_connections"}
    for name in names:
        family = re.sub(r"_(bucket|total|count|sum)$", "", name)
        if family in postgres_only and not server.database_url:
            continue
        assert family in families, f"the dashboard queries {name}, which /metrics does not serve"
