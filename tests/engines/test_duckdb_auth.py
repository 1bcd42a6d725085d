"""DuckDB's iceberg extension and Floe's tokens: refresh past expiry, refusals.

What DuckDB 1.5 does (read from its behaviour here, and from the extension's source): an
ICEBERG secret with CLIENT_ID/CLIENT_SECRET fetches a token when the secret is created
(client credentials, sent as HTTP Basic) and keeps the token's expires_in; before each
catalog request it fetches a new one once half the lifetime (at most 30 s before the end)
has passed, and on a 401 it fetches one and retries once. A secret made of a bare TOKEN
has nothing to refresh with: once that token expires every catalog request is a 401, and
the user has to create the secret again with a new token and ATTACH again.

No Spark catalog talks to this module's server, so its request log is DuckDB's alone.
"""

from __future__ import annotations

import time

import duckdb
import pytest


@pytest.fixture(scope="module")
def seeded(pyiceberg_catalog):
    """auth.items (3 rows), written with PyIceberg."""
    import pyarrow as pa
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    pyiceberg_catalog.create_namespace("auth")
    table = pyiceberg_catalog.create_table(
        "auth.items", Schema(NestedField(1, "n", LongType(), required=False)))
    table.append(pa.table({"n": pa.array([1, 2, 3], pa.int64())}))
    return table


def test_client_credentials_secret_refreshes_past_expiry(floe, duck, seeded):
    assert duck.sql("SELECT sum(n) FROM floe.auth.items").fetchall() == [(6,)]
    stale = floe.token()

    before_sleep = floe.log_mark()
    time.sleep(floe.token_lifetime + 1)
    after_sleep = floe.log_mark()
    assert floe.requests_since(before_sleep, after_sleep) == [], "DuckDB has no refresh thread"
    assert floe.probe(stale) == 401, "a token older than --token-lifetime must be refused"
    after_probe = floe.log_mark()

    assert duck.sql("SELECT sum(n) FROM floe.auth.items").fetchall() == [(6,)]
    duck.execute("INSERT INTO floe.auth.items VALUES (4)")
    assert duck.sql("SELECT sum(n) FROM floe.auth.items").fetchall() == [(10,)]

    # DuckDB saw that its token was past its refresh point and fetched a new one *before*
    # its first catalog request; no request was refused.
    after = floe.requests_since(after_probe)
    assert after[0] == ("POST", "/v1/oauth/tokens", 200), after
    assert [r for r in after if r[2] == 401] == [], after


def test_token_secret_expires_and_a_new_attach_recovers(floe, duckdb_connect, seeded):
    con = duckdb_connect()
    con.execute(f"CREATE SECRET tok (TYPE ICEBERG, TOKEN '{floe.token()}')")
    con.execute(f"ATTACH 'default' AS floe (TYPE ICEBERG, SECRET tok, ENDPOINT '{floe.url}')")
    assert con.sql("SELECT count(*) FROM floe.auth.items").fetchall()[0][0] >= 3

    time.sleep(floe.token_lifetime + 1)
    with pytest.raises(duckdb.Error) as expired:
        con.sql("SELECT count(*) FROM floe.auth.items").fetchall()
    message = str(expired.value)
    assert "401" in message and "expired" in message, message

    # What a user does: a new token in the secret, and the catalog attached again (the
    # attached catalog holds the token it was attached with).
    con.execute(f"CREATE OR REPLACE SECRET tok (TYPE ICEBERG, TOKEN '{floe.token()}')")
    con.execute("DETACH floe")
    con.execute(f"ATTACH 'default' AS floe (TYPE ICEBERG, SECRET tok, ENDPOINT '{floe.url}')")
    assert con.sql("SELECT count(*) FROM floe.auth.items").fetchall()[0][0] >= 3


def test_wrong_credentials_are_refused(floe, duckdb_connect):
    con = duckdb_connect()
    mark = floe.log_mark()
    # The secret fetches its token when it is created, so that is where the refusal shows.
    with pytest.raises(duckdb.Error) as refused:
        con.execute(f"""CREATE SECRET bad (TYPE ICEBERG, CLIENT_ID '{floe.client_id}',
                        CLIENT_SECRET 'not-the-secret', OAUTH2_SERVER_URI '{floe.token_url}')""")
    message = str(refused.value)
    assert "401" in message and "not authorized" in message, message
    assert floe.requests_since(mark) == [("POST", "/v1/oauth/tokens", 401)]


def test_principal_without_privileges_is_refused(floe, duckdb_connect, duckdb_attach, seeded):
    client_id, secret = floe.create_principal("nobody")
    con = duckdb_connect()
    duckdb_attach(con, floe, client_id, secret)
    mark = floe.log_mark()
    with pytest.raises(duckdb.Error) as refused:
        con.sql("SELECT * FROM floe.auth.items").fetchall()
    message = str(refused.value)
    assert "403" in message and "not authorized" in message, message
    assert [s for _, p, s in floe.requests_since(mark) if "/auth/" in p] == [403]
    with pytest.raises(duckdb.Error) as write:
        con.execute("CREATE TABLE floe.auth.mine (x INTEGER)")
    assert "403" in str(write.value), str(write.value)
