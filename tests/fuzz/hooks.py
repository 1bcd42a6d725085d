"""Schemathesis hooks for tests/fuzz/run.sh (loaded through SCHEMATHESIS_HOOKS).

Two things, both printed at start so that nothing is hidden:

1. Spec errata, applied to the loaded spec in memory (the copy in this directory stays
   verbatim). Set FLOE_FUZZ_ERRATA=0 to fuzz against the spec exactly as published.
   - The view operations, and the shared 406 `UnsupportedOperationResponse`, declare some
     error responses with the bare `ErrorModel` schema ({"message","type","code"}), while
     every other operation, and the examples of those very responses, use
     `IcebergErrorResponse` ({"error": {...}}). Floe answers every error
     with the wrapper, so those responses are checked against `IcebergErrorResponse`.

2. The management API's run keeps its own principal and its `service_admin` role out of
   the mutations (see PROTECTED below), so that the run is not locked out.

3. FLOE_FUZZ_FRESH_KEYS=1 (run.sh's default): every well-formed `Idempotency-Key` is replaced by
   a fresh UUID, so that requests reach the handlers instead of being refused as a reuse of
   one key for a different request (the spec's example key, and hypothesis's seeded UUIDs,
   repeat across operations). With 0, most mutations are refused as a reused key (see 4).

4. Accepted deviations from the spec (the project's rules), dropped with `filter_failure`:
   - POST /v1/{prefix}/namespaces under a parent that does not exist answers
     404 NoSuchNamespaceException, a status the spec does not declare for that operation.
   - POST .../tables/{table}/sign (S3 remote signing) for a table or namespace that does not
     exist answers 404 NoSuchTableException / NoSuchNamespaceException: the spec declares no
     404 for this operation, but no other status says "no such table".
   - A mutation whose Idempotency-Key was already used for another request is a 422
     (IETF Idempotency-Key draft), undeclared for most operations.
   - The management API (polaris-management.json) answers bad input with 400, a missing
     object with 404 and a taken name or a non-empty catalog with 409, each with the
     error body, where its spec declares none of them for the operation.
"""

from __future__ import annotations

import json
import os
import sys
import uuid

import schemathesis

ERROR_MODEL = "#/components/schemas/ErrorModel"
ICEBERG_ERROR = "#/components/schemas/IcebergErrorResponse"
METHODS = ("get", "put", "post", "delete", "head", "patch", "options")


def _note(msg: str) -> None:
    print(f"[fuzz hooks] {msg}", file=sys.stderr)


@schemathesis.hook
def before_load_schema(context, raw_schema):
    if os.environ.get("FLOE_FUZZ_ERRATA", "1") == "0":
        _note("spec errata OFF: fuzzing the spec as published")
        return
    fixed = []
    for path, item in raw_schema.get("paths", {}).items():
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            for status, resp in op.get("responses", {}).items():
                for media in (resp.get("content") or {}).values():
                    schema = media.get("schema")
                    if isinstance(schema, dict) and schema.get("$ref") == ERROR_MODEL:
                        media["schema"] = {"$ref": ICEBERG_ERROR}
                        fixed.append(f"{method.upper()} {path} {status}")
    # Shared responses too: the 406 `UnsupportedOperationResponse` (answered by scan
    # planning's incremental scans) names the bare schema, with a wrapped example.
    for name, resp in raw_schema.get("components", {}).get("responses", {}).items():
        for media in (resp.get("content") or {}).values():
            schema = media.get("schema")
            if isinstance(schema, dict) and schema.get("$ref") == ERROR_MODEL:
                media["schema"] = {"$ref": ICEBERG_ERROR}
                fixed.append(f"components.responses.{name}")
    if fixed:
        _note(f"spec erratum: bare ErrorModel -> IcebergErrorResponse in {len(fixed)} responses: " + "; ".join(fixed))


# The management API's run logs in as a principal of its own (run.sh), which holds the
# `service_admin` principal role. Schemathesis learns names from responses and reuses
# them, so it would soon reset or rotate that principal's credentials, or take its role
# away, and every later request would be a 401 or 403. A mutation naming either is sent
# for a name that does not exist instead (its 404 is still checked).
PROTECTED = {
    "principalName": os.environ.get("FLOE_FUZZ_PRINCIPAL", ""),
    "principalRoleName": "service_admin",
}


def _protect(case) -> None:
    params = case.path_parameters
    if not params or case.method.upper() not in ("POST", "PUT", "DELETE"):
        return
    for name, value in PROTECTED.items():
        if value and params.get(name) == value:
            params[name] = value + "-not-this-one"


@schemathesis.hook
def before_call(context, case, kwargs):
    _protect(case)
    headers = case.headers
    if os.environ.get("FLOE_FUZZ_FRESH_KEYS") != "1" or not headers:
        return
    for name, value in list(headers.items()):
        if name.lower() != "idempotency-key":
            continue
        try:
            uuid.UUID(str(value))
        except ValueError:
            continue  # a malformed key stays: its 400 is part of what is tested
        headers[name] = str(uuid.uuid4())


def _error(response) -> dict:
    """The `error` object of an error body; empty when the body is not one."""
    try:
        body = json.loads(response.content or b"")
    except (ValueError, TypeError):
        return {}
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body["error"]
    return {}


def _error_type(response) -> str | None:
    return _error(response).get("type")


def _error_code(response) -> int | None:
    return _error(response).get("code")


@schemathesis.hook
def filter_failure(context, failure, case, response) -> bool:
    op = case.operation
    if (
        op.method.upper() == "POST"
        and op.path == "/v1/{prefix}/namespaces"
        and response.status_code == 404
        and failure.code == "ST103"
        and _error_type(response) == "NoSuchNamespaceException"
    ):
        return False  # accepted: create under a missing parent namespace
    if (
        op.method.upper() == "POST"
        and op.path.endswith("/tables/{table}/sign")
        and response.status_code == 404
        and failure.code == "ST103"
        and _error_type(response) in ("NoSuchTableException", "NoSuchNamespaceException")
    ):
        return False  # accepted: signing for a table that does not exist
    if (
        response.status_code == 422
        and failure.code == "ST103"
        and _error_type(response) == "UnprocessableEntityException"
        and b"Idempotency-Key was already used" in (response.content or b"")
    ):
        return False  # accepted: a reused Idempotency-Key
    if (
        os.environ.get("FLOE_FUZZ_SPEC") == "polaris-management.json"
        and failure.code == "ST103"
        and response.status_code in (400, 404, 409)
        and _error_code(response) == response.status_code
    ):
        # accepted: the management spec declares no 400 for any operation, and no 404 or
        # 409 for some where they are the answer (a missing catalog's roles; a catalog
        # that is not empty; a name taken). Polaris answers them the same way.
        return False
    return True
