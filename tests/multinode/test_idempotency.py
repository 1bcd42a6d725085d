"""Idempotency keys across nodes: a client that loses the response of a create or a
commit and retries (on the other node, as a load balancer may send it) gets one effect
and the first answer; many retries of one key at once, spread over both nodes, take
effect once. The record lives in PostgreSQL, written in the same transaction as the
change, so every node sees it.
"""

from __future__ import annotations

import threading
import uuid

from floe_multinode import Api, describe, ns_path, run_threads, simple_schema

STORAGES = ("file", "s3")  # conftest.py runs this module once per storage

CATALOG = "idem"
NAMESPACE = ["k"]


def key() -> str:
    return str(uuid.uuid4())


def create_table(api: Api, name: str, idempotency_key: str):
    return api.post(f"/v1/{CATALOG}/namespaces/{ns_path(NAMESPACE)}/tables",
                    {"name": name, "schema": simple_schema()},
                    headers={"Idempotency-Key": idempotency_key})


def test_a_retry_on_the_other_node_gets_the_first_answer(cluster):
    a, b = Api(cluster.urls[0]), Api(cluster.urls[1])
    assert a.create_catalog(CATALOG, cluster.warehouse).status_code == 201
    assert a.create_namespace(CATALOG, NAMESPACE).status_code == 200

    # A create whose answer was lost, retried through the other node.
    k = key()
    first = create_table(a, "t", k)
    assert first.status_code == 200, describe(first)
    retry = create_table(b, "t", k)
    assert retry.status_code == 200, describe(retry)
    assert retry.content == first.content
    assert retry.headers.get("Idempotency-Replayed") == "true"

    # A commit whose answer was lost, retried through the other node: one new version.
    k = key()
    body = {"updates": [{"action": "set-properties", "updates": {"n": "1"}}]}
    first = b.commit_table(CATALOG, NAMESPACE, "t", body, headers={"Idempotency-Key": k})
    assert first.status_code == 200, describe(first)
    retry = a.commit_table(CATALOG, NAMESPACE, "t", body, headers={"Idempotency-Key": k})
    assert retry.status_code == 200, describe(retry)
    assert retry.content == first.content
    loaded = a.load_table(CATALOG, NAMESPACE, "t").json()
    assert loaded["metadata-location"] == first.json()["metadata-location"]
    assert len(loaded["metadata"]["metadata-log"]) == 1  # exactly one commit after the create

    # The same key for another request, on either node: 422, nothing changed.
    other = {"updates": [{"action": "set-properties", "updates": {"n": "2"}}]}
    for api in (a, b):
        r = api.commit_table(CATALOG, NAMESPACE, "t", other, headers={"Idempotency-Key": k})
        assert r.status_code == 422, describe(r)
    assert a.load_table(CATALOG, NAMESPACE, "t").json()["metadata"]["properties"]["n"] == "1"


def test_simultaneous_retries_over_both_nodes_take_effect_once(cluster):
    setup = Api(cluster.urls[0])
    setup.create_catalog(CATALOG, cluster.warehouse)
    setup.create_namespace(CATALOG, NAMESPACE)
    assert setup.create_table(CATALOG, NAMESPACE, "hot").status_code == 200
    rounds = 5
    for round_no in range(rounds):
        create_key, commit_key = key(), key()
        body = {"updates": [{"action": "set-properties", "updates": {f"r{round_no}": "x"}}]}
        answers: dict[str, list] = {"create": [], "commit": []}
        lock = threading.Lock()

        def task(i):
            api = Api(cluster.urls[i % 2])
            created = create_table(api, f"c{round_no}", create_key)
            committed = api.commit_table(CATALOG, NAMESPACE, "hot", body,
                                         headers={"Idempotency-Key": commit_key})
            with lock:
                answers["create"].append((created.status_code, created.content))
                answers["commit"].append((committed.status_code, committed.content))

        run_threads([lambda i=i: task(i) for i in range(8)], timeout=120)
        for what, got in answers.items():
            statuses = {s for s, _ in got}
            assert statuses == {200}, f"{what}: {statuses}"
            assert len({c for _, c in got}) == 1, f"{what}: different answers to one key"
    # One commit per round, whatever the number of retries.
    final = setup.load_table(CATALOG, NAMESPACE, "hot").json()["metadata"]
    assert len(final["metadata-log"]) == rounds
    assert all(final["properties"][f"r{r}"] == "x" for r in range(rounds))
    names = setup.get(f"/v1/{CATALOG}/namespaces/{ns_path(NAMESPACE)}/tables").json()
    created = {i["name"] for i in names["identifiers"]}
    assert {f"c{r}" for r in range(rounds)} <= created
