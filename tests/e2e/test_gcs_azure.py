"""Floe on Google Cloud Storage and Azure Blob Storage, each against an emulator started
by the project's own script: fake-gcs-server (scripts/gcs-server.sh) and Azurite
(scripts/azurite.sh).

Every test runs once per store. Floe reaches the emulator with the keys of its own
environment only, named by the catalog's `storageName` (a service-account file with the
emulator's base URL for GCS; the emulator switch and the account key for Azure); the
test looks at the bucket from outside through the emulator's own API, never through
Floe: the metadata files are where `metadata-location` says, a create of an existing
table writes nothing, a table registers from a metadata file on the store, and a purge
deletes the table's objects and nothing else. Neither store vends credentials: asked
for them, Floe answers without any.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import json
import subprocess
import tempfile
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import requests

from conftest import ROOT, ApiClient as Client, FloeServer, access_token, free_port, purge_dropped

MGMT = "/api/management/v1"
VENDED = {"X-Iceberg-Access-Delegation": "vended-credentials"}
SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "x", "type": "long", "required": False}]}
START_TIMEOUT = 900  # the first start installs the emulator (go install / npm install)


class Emulator:
    """One emulator: how Floe is pointed at it, and a plain-HTTP view of its bucket."""

    kind: str  # the storageType
    script: str
    storage_name: str
    bucket = "lake"

    def __init__(self, endpoint: str, work: Path):
        self.endpoint = endpoint
        self.work = work
        self.http = requests.Session()

    def server_env(self) -> dict[str, str]:
        raise NotImplementedError

    def location(self, key: str) -> str:
        raise NotImplementedError

    def key_of(self, location: str) -> str:
        raise NotImplementedError

    def storage_config(self, prefix: str) -> dict:
        return {"storageType": self.kind, "storageName": self.storage_name,
                "allowedLocations": [self.location(prefix) + "/"]}

    def keys(self, prefix: str) -> list[str]:
        raise NotImplementedError

    def get(self, key: str) -> bytes:
        raise NotImplementedError

    def put(self, key: str, data: bytes) -> None:
        raise NotImplementedError

    def snapshot(self, prefix: str) -> dict[str, bytes]:
        return {k: self.get(k) for k in self.keys(prefix)}

    def create_if_absent(self, key: str, data: bytes) -> int:
        """A conditional create the way object_store sends it (Floe's PutMode::Create);
        returns the status."""
        raise NotImplementedError


class FakeGcs(Emulator):
    kind = "GCS"
    script = "scripts/gcs-server.sh"
    storage_name = "gcs_emulator"

    def server_env(self) -> dict[str, str]:
        # object_store's test fields of a service-account file: no OAuth, another base URL.
        account = self.work / "service-account.json"
        account.write_text(json.dumps({
            "gcs_base_url": self.endpoint, "disable_oauth": True,
            "client_email": "", "private_key_id": "", "private_key": ""}))
        return {"FLOE_STORAGE_GCS_EMULATOR_SERVICE_ACCOUNT_PATH": str(account)}

    def location(self, key: str) -> str:
        return f"gs://{self.bucket}/{key}"

    def key_of(self, location: str) -> str:
        head = f"gs://{self.bucket}/"
        assert location.startswith(head), location
        return location[len(head):]

    def keys(self, prefix: str) -> list[str]:
        out, token = [], None
        while True:
            params = {"prefix": prefix, **({"pageToken": token} if token else {})}
            r = self.http.get(f"{self.endpoint}/storage/v1/b/{self.bucket}/o", params=params,
                              timeout=30)
            assert r.status_code == 200, r.text
            body = r.json()
            out += [o["name"] for o in body.get("items", [])]
            token = body.get("nextPageToken")
            if not token:
                return sorted(out)

    def get(self, key: str) -> bytes:
        r = self.http.get(f"{self.endpoint}/storage/v1/b/{self.bucket}/o/"
                          f"{urllib.parse.quote(key, safe='')}", params={"alt": "media"},
                          timeout=30)
        assert r.status_code == 200, f"{key}: {r.status_code} {r.text}"
        return r.content

    def put(self, key: str, data: bytes) -> None:
        r = self.http.post(f"{self.endpoint}/upload/storage/v1/b/{self.bucket}/o",
                           params={"uploadType": "media", "name": key}, data=data, timeout=30)
        assert r.status_code == 200, r.text

    def create_if_absent(self, key: str, data: bytes) -> int:
        # The XML API, as object_store calls it.
        return self.http.put(f"{self.endpoint}/{self.bucket}/{key}", data=data, timeout=30,
                             headers={"x-goog-if-generation-match": "0"}).status_code


class Azurite(Emulator):
    kind = "AZURE"
    script = "scripts/azurite.sh"
    storage_name = "azurite"
    account = "devstoreaccount1"
    # Azurite's published development key.
    key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

    def server_env(self) -> dict[str, str]:
        # object_store's emulator mode talks to AZURITE_BLOB_STORAGE_URL (one for the
        # whole process) with path-style addresses; the key is the catalog's own.
        service = self.endpoint.rsplit("/", 1)[0]
        return {"AZURITE_BLOB_STORAGE_URL": service,
                "FLOE_STORAGE_AZURITE_USE_EMULATOR": "true",
                "FLOE_STORAGE_AZURITE_ACCOUNT_KEY": self.key}

    def storage_config(self, prefix: str) -> dict:
        return {**super().storage_config(prefix),
                "tenantId": "00000000-0000-0000-0000-000000000000"}

    def location(self, key: str) -> str:
        return f"abfss://{self.bucket}@{self.account}.dfs.core.windows.net/{key}"

    def key_of(self, location: str) -> str:
        for host in ("dfs", "blob"):
            head = f"{self.bucket}@{self.account}.{host}.core.windows.net/"
            scheme, _, rest = location.partition("://")
            if scheme in ("abfs", "abfss", "wasb", "wasbs") and rest.startswith(head):
                return rest[len(head):]
        raise AssertionError(f"not a location in the container: {location}")

    # The standard headers in the blob service's string to sign, in order.
    SIGNED = ["Content-Encoding", "Content-Language", "Content-Length", "Content-MD5",
              "Content-Type", "Date", "If-Modified-Since", "If-Match", "If-None-Match",
              "If-Unmodified-Since", "Range"]

    def request(self, method: str, path: str, params: dict | None = None,
                headers: dict | None = None, data: bytes | None = None) -> requests.Response:
        """A request signed with Shared Key; path is the blob's name ('' for the container)."""
        params = dict(params or {})
        headers = {"x-ms-date": email.utils.formatdate(usegmt=True),
                   "x-ms-version": "2021-08-06", **(headers or {})}
        if data:
            headers["Content-Length"] = str(len(data))
        url_path = f"/{self.account}/{self.bucket}" + (
            "/" + urllib.parse.quote(path) if path else "")
        string_to_sign = "\n".join(
            [method] + [headers.get(h, "") for h in self.SIGNED]
            + [f"{k}:{v}" for k, v in sorted(headers.items()) if k.startswith("x-ms-")]
            + [f"/{self.account}{url_path}"
               + "".join(f"\n{k}:{v}" for k, v in sorted(params.items()))])
        signature = base64.b64encode(hmac.new(base64.b64decode(self.key),
                                              string_to_sign.encode(), hashlib.sha256).digest())
        headers["Authorization"] = f"SharedKey {self.account}:{signature.decode()}"
        service = self.endpoint.rsplit("/", 1)[0]
        return self.http.request(method, service + url_path, params=params, headers=headers,
                                 data=data, timeout=30)

    def keys(self, prefix: str) -> list[str]:
        out, marker = [], None
        while True:
            params = {"restype": "container", "comp": "list", "prefix": prefix,
                      **({"marker": marker} if marker else {})}
            r = self.request("GET", "", params)
            assert r.status_code == 200, r.text
            root = ET.fromstring(r.content)
            out += [b.findtext("Name") for b in root.iter("Blob")]
            marker = root.findtext("NextMarker")
            if not marker:
                return sorted(out)

    def get(self, key: str) -> bytes:
        r = self.request("GET", key)
        assert r.status_code == 200, f"{key}: {r.status_code} {r.text}"
        return r.content

    def put(self, key: str, data: bytes) -> None:
        r = self.request("PUT", key, headers={"x-ms-blob-type": "BlockBlob",
                                               "Content-Type": "application/octet-stream"},
                         data=data)
        assert r.status_code == 201, r.text

    def create_if_absent(self, key: str, data: bytes) -> int:
        return self.request("PUT", key, data=data, headers={
            "x-ms-blob-type": "BlockBlob", "Content-Type": "application/octet-stream",
            "If-None-Match": "*"}).status_code


STORES = {"gcs": FakeGcs, "azure": Azurite}


@pytest.fixture(scope="module", params=sorted(STORES))
def store(request, _e2e_tmp):
    """The emulator, started by its script (once per store for this module)."""
    cls = STORES[request.param]
    work = Path(tempfile.mkdtemp(prefix=f"{request.param}.", dir=_e2e_tmp))
    script = ROOT / cls.script
    out = subprocess.run(["bash", str(script), "start", str(work / "emulator"), str(free_port())],
                         capture_output=True, text=True, timeout=START_TIMEOUT)
    if out.returncode != 0:
        pytest.fail(f"{cls.script} did not start:\n{out.stderr[-4000:]}", pytrace=False)
    try:
        yield cls(out.stdout.strip().splitlines()[-1], work)
    finally:
        subprocess.run(["bash", str(script), "stop", str(work / "emulator")], timeout=120)


@pytest.fixture(scope="module")
def lake(store, module_server_factory):
    """A Floe server whose environment points at the emulator, with the catalog 'lake' on
    it under a fresh prefix, and the namespace 'ns'."""
    server = module_server_factory(extra_env=store.server_env())
    root = Client(server.url, access_token(server.url))
    prefix = f"wh-{uuid.uuid4().hex[:8]}"
    r = root.call("POST", f"{MGMT}/catalogs", {"catalog": {
        "name": "lake", "type": "INTERNAL",
        "properties": {"default-base-location": store.location(prefix)},
        "storageConfigInfo": store.storage_config(prefix)}})
    assert r.status_code == 201, r.text
    assert root.call("POST", "/v1/lake/namespaces", {"namespace": ["ns"]}).status_code == 200
    yield server, root, prefix


def create(root: Client, name: str, headers=None, **extra) -> dict:
    r = root.call("POST", "/v1/lake/namespaces/ns/tables",
                  {"name": name, "schema": SCHEMA, **extra}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def set_properties(root: Client, name: str, table_uuid: str, props: dict) -> requests.Response:
    return root.call("POST", f"/v1/lake/namespaces/ns/tables/{name}", {
        "identifier": {"namespace": ["ns"], "name": name},
        "requirements": [{"type": "assert-table-uuid", "uuid": table_uuid}],
        "updates": [{"action": "set-properties", "updates": props}]})


def no_storage_failures(server: FloeServer) -> None:
    log = server.log_path.read_text(errors="replace")
    assert "purge could not delete all files" not in log, server.log_tail()


def test_emulator_honours_conditional_creates(store, lake):
    """The precondition Floe's metadata writes rely on (object_store's PutMode::Create),
    against the emulator itself: a second create of a key is refused and changes nothing."""
    _, _, prefix = lake
    key = f"{prefix}/probe/{uuid.uuid4().hex}"
    assert store.create_if_absent(key, b"first") in (200, 201)
    assert store.create_if_absent(key, b"second") in (409, 412)
    assert store.get(key) == b"first"


def test_metadata_files_live_where_metadata_location_says(store, lake):
    server, root, prefix = lake
    t = create(root, "t1")
    first = t["metadata-location"]
    assert first.startswith(store.location(f"{prefix}/ns/t1-")), first
    table_dir = store.key_of(t["metadata"]["location"])
    assert store.key_of(first).startswith(table_dir + "/metadata/")
    on_store = json.loads(store.get(store.key_of(first)))
    assert on_store["table-uuid"] == t["metadata"]["table-uuid"]
    assert on_store["location"] == t["metadata"]["location"]
    assert store.keys(table_dir + "/") == [store.key_of(first)]

    # A commit writes a new file next to the first, which stays.
    r = set_properties(root, "t1", t["metadata"]["table-uuid"], {"owner": "e2e"})
    assert r.status_code == 200, r.text
    second = r.json()["metadata-location"]
    assert second != first
    on_store = json.loads(store.get(store.key_of(second)))
    assert on_store["properties"]["owner"] == "e2e"
    assert [e["metadata-file"] for e in on_store["metadata-log"]] == [first]
    assert store.keys(table_dir + "/") == sorted([store.key_of(first), store.key_of(second)])
    loaded = root.call("GET", "/v1/lake/namespaces/ns/tables/t1").json()
    assert loaded["metadata-location"] == second
    assert loaded["metadata"]["properties"]["owner"] == "e2e"

    # A commit whose requirement fails writes nothing.
    r = set_properties(root, "t1", str(uuid.uuid4()), {"owner": "nobody"})
    assert r.status_code == 409, r.text
    assert store.keys(table_dir + "/") == sorted([store.key_of(first), store.key_of(second)])
    no_storage_failures(server)


def test_second_create_fails_and_overwrites_nothing(store, lake):
    _, root, prefix = lake
    t = create(root, "dup")
    before = store.snapshot(prefix + "/")
    other = {"type": "struct", "fields": [{"id": 1, "name": "y", "type": "string",
                                           "required": False}]}
    r = root.call("POST", "/v1/lake/namespaces/ns/tables", {"name": "dup", "schema": other})
    assert r.status_code == 409, r.text
    assert r.json()["error"]["type"] == "AlreadyExistsException"
    # Another name at the same location: refused too (locations never overlap).
    r = root.call("POST", "/v1/lake/namespaces/ns/tables",
                  {"name": "dup_elsewhere", "schema": SCHEMA, "location": t["metadata"]["location"]})
    assert 400 <= r.status_code < 500 and r.status_code != 404, r.text
    assert store.snapshot(prefix + "/") == before
    loaded = root.call("GET", "/v1/lake/namespaces/ns/tables/dup").json()
    assert loaded["metadata-location"] == t["metadata-location"]
    assert loaded["metadata"]["schemas"] == t["metadata"]["schemas"]
    assert root.call("GET", "/v1/lake/namespaces/ns/tables/dup_elsewhere").status_code == 404


def test_register_from_a_metadata_file_on_the_store(store, lake):
    server, root, prefix = lake
    src = create(root, "reg_src")
    r = set_properties(root, "reg_src", src["metadata"]["table-uuid"], {"origin": "src"})
    assert r.status_code == 200, r.text
    src_file = r.json()["metadata-location"]

    # A drop without purge leaves the files; the last one registers under a new name.
    assert root.call("DELETE", "/v1/lake/namespaces/ns/tables/reg_src").status_code == 204
    assert store.get(store.key_of(src_file))
    r = root.call("POST", "/v1/lake/namespaces/ns/register",
                  {"name": "reg_t", "metadata-location": src_file})
    assert r.status_code == 200, r.text
    assert r.json()["metadata-location"] == src_file
    assert r.json()["metadata"]["table-uuid"] == src["metadata"]["table-uuid"]
    loaded = root.call("GET", "/v1/lake/namespaces/ns/tables/reg_t").json()
    assert loaded["metadata-location"] == src_file
    assert loaded["metadata"]["properties"]["origin"] == "src"

    # A file Floe never wrote: put on the store by someone else, with its own location.
    imported_dir = f"{prefix}/ns/imported"
    doc = json.loads(store.get(store.key_of(src_file)))
    doc.update({"location": store.location(imported_dir), "table-uuid": str(uuid.uuid4()),
                "metadata-log": []})
    imported_key = f"{imported_dir}/metadata/00000-{uuid.uuid4()}.metadata.json"
    store.put(imported_key, json.dumps(doc).encode())
    r = root.call("POST", "/v1/lake/namespaces/ns/register",
                  {"name": "imported", "metadata-location": store.location(imported_key)})
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["table-uuid"] == doc["table-uuid"]
    # It takes commits: the next file goes into its own metadata directory.
    r = set_properties(root, "imported", doc["table-uuid"], {"committed": "yes"})
    assert r.status_code == 200, r.text
    next_file = r.json()["metadata-location"]
    assert store.key_of(next_file).startswith(imported_dir + "/metadata/")
    assert json.loads(store.get(store.key_of(next_file)))["properties"]["committed"] == "yes"
    assert store.keys(imported_dir + "/") == sorted([imported_key, store.key_of(next_file)])

    # The same name again, a missing file, and a file outside the catalog: refused.
    r = root.call("POST", "/v1/lake/namespaces/ns/register",
                  {"name": "reg_t", "metadata-location": src_file})
    assert r.status_code == 409, r.text
    missing = store.location(f"{prefix}/ns/nowhere/metadata/00000-{uuid.uuid4()}.metadata.json")
    r = root.call("POST", "/v1/lake/namespaces/ns/register",
                  {"name": "reg_missing", "metadata-location": missing})
    assert 400 <= r.status_code < 500, r.text
    outside_key = f"outside-{prefix}/metadata/00000-{uuid.uuid4()}.metadata.json"
    store.put(outside_key, json.dumps({**doc, "location": store.location(f"outside-{prefix}")})
              .encode())
    r = root.call("POST", "/v1/lake/namespaces/ns/register",
                  {"name": "reg_outside", "metadata-location": store.location(outside_key)})
    assert r.status_code in (400, 403), r.text
    for name in ("reg_missing", "reg_outside"):
        assert root.call("GET", f"/v1/lake/namespaces/ns/tables/{name}").status_code == 404
    no_storage_failures(server)


def test_purge_deletes_the_table_and_nothing_else(store, lake):
    server, root, prefix = lake
    a, b = create(root, "purge_a"), create(root, "purge_b")
    r = set_properties(root, "purge_a", a["metadata"]["table-uuid"], {"v": "2"})
    assert r.status_code == 200, r.text
    a_dir, b_dir = store.key_of(a["metadata"]["location"]), store.key_of(b["metadata"]["location"])
    # More files than one request deletes at a time on GCS (10 in flight).
    for i in range(12):
        store.put(f"{a_dir}/data/{i:02}.parquet", b"a")
    # A prefix match that is not a path match, and a place outside the catalog.
    store.put(f"{a_dir}-sibling/keep", b"s")
    store.put(f"outside-{prefix}/keep", b"o")
    assert len(store.keys(a_dir + "/")) == 14
    keep = store.snapshot(b_dir + "/")
    r = root.call("DELETE", "/v1/lake/namespaces/ns/tables/purge_a?purgeRequested=true")
    assert r.status_code == 204, r.text
    assert store.keys(a_dir + "/"), "files stay while the table can be undropped"
    purge_dropped(root, "lake", ["ns"], "purge_a")
    assert store.keys(a_dir + "/") == []
    assert store.get(f"{a_dir}-sibling/keep") == b"s"
    assert store.get(f"outside-{prefix}/keep") == b"o"
    assert store.snapshot(b_dir + "/") == keep
    assert root.call("GET", "/v1/lake/namespaces/ns/tables/purge_a").status_code == 404
    assert root.call("GET", "/v1/lake/namespaces/ns/tables/purge_b").status_code == 200
    no_storage_failures(server)


def test_no_credentials_are_vended(store, lake):
    """Credential vending is S3 only: asked for credentials, a GCS or Azure catalog
    answers 200 without any (the client then needs storage access of its own)."""
    _, root, _ = lake
    t = create(root, "vend", headers=VENDED)
    assert not t.get("storage-credentials"), t.get("storage-credentials")
    r = root.call("GET", "/v1/lake/namespaces/ns/tables/vend", headers=VENDED)
    assert r.status_code == 200, r.text
    body = r.json()
    assert not body.get("storage-credentials"), body.get("storage-credentials")
    secretish = ("token", "secret", "key", "sas", "credential")
    assert not [k for k in body.get("config", {}) if any(s in k.lower() for s in secretish)], \
        body.get("config")
    r = root.call("GET", "/v1/lake/namespaces/ns/tables/vend/credentials")
    assert r.status_code == 200, r.text
    assert r.json() == {"storage-credentials": []}


def test_bad_storage_configs_are_refused(store, lake):
    _, root, prefix = lake
    good = store.storage_config("bad")
    bad = [{**good, "allowedLocations": ["s3://lake/x/"]},
           {**good, "storageName": "not a name"},
           {**good, "sasToken": "leak"}]
    if store.kind == "AZURE":
        bad.append({k: v for k, v in good.items() if k != "tenantId"})
    for config in bad:
        r = root.call("POST", f"{MGMT}/catalogs", {"catalog": {
            "name": "bad", "type": "INTERNAL", "properties": {}, "storageConfigInfo": config}})
        assert r.status_code == 400, f"{config}: {r.status_code} {r.text}"
    assert root.call("GET", f"{MGMT}/catalogs/bad").status_code == 404
    # A table outside the allowed locations.
    r = root.call("POST", "/v1/lake/namespaces/ns/tables", {
        "name": "outside", "schema": SCHEMA, "location": store.location(f"elsewhere-{prefix}/t")})
    assert r.status_code in (400, 403), r.text
    assert store.keys(f"elsewhere-{prefix}/") == []


# The names under which GCS and Azure keys usually travel: refused in a storage config and
# in catalog properties alike, so the management API never holds (or returns) one.
def test_gcs_and_azure_keys_are_refused_in_configs_and_properties(store, lake):
    _, root, _ = lake
    good = store.storage_config("keys")
    accepted = []
    for field in ["accountKey", "account_key", "privateKey", "private_key",
                  "connectionString", "serviceAccountKey"]:
        r = root.call("POST", f"{MGMT}/catalogs", {"catalog": {
            "name": "keys", "type": "INTERNAL", "properties": {},
            "storageConfigInfo": {**good, field: "leak"}}})
        if r.status_code != 400:
            accepted.append(f"storageConfigInfo.{field}: {r.status_code}")
        root.call("DELETE", f"{MGMT}/catalogs/keys")
    for prop in ["adls.account-key", "adls.connection-string", "gcs.service-account-key",
                 "gcs.private-key"]:
        r = root.call("POST", f"{MGMT}/catalogs", {"catalog": {
            "name": "keys", "type": "INTERNAL", "properties": {prop: "leak"},
            "storageConfigInfo": good}})
        if r.status_code != 400:
            accepted.append(f"property {prop}: {r.status_code}")
        root.call("DELETE", f"{MGMT}/catalogs/keys")
    assert accepted == []


def test_azure_wasbs_and_abfss_name_the_same_blobs(store, lake):
    """A table given a wasbs://…blob.core.windows.net location in a catalog whose allowed
    location is written abfss://…dfs.core.windows.net: the same container and path."""
    if store.kind != "AZURE":
        pytest.skip("Azure locations only")
    server, root, prefix = lake
    key_dir = f"{prefix}/ns/wasb_t"
    location = f"wasbs://{store.bucket}@{store.account}.blob.core.windows.net/{key_dir}"
    t = create(root, "wasb_t", location=location)
    assert t["metadata"]["location"] == location
    assert t["metadata-location"].startswith(location + "/metadata/")
    assert store.keys(key_dir + "/") == [store.key_of(t["metadata-location"])]
    # Another table at the same place, spelled abfss://: the locations overlap.
    r = root.call("POST", "/v1/lake/namespaces/ns/tables",
                  {"name": "abfs_t", "schema": SCHEMA, "location": store.location(key_dir)})
    assert 400 <= r.status_code < 500 and r.status_code != 404, r.text
    r = root.call("DELETE", "/v1/lake/namespaces/ns/tables/wasb_t?purgeRequested=true")
    assert r.status_code == 204, r.text
    purge_dropped(root, "lake", ["ns"], "wasb_t")
    assert store.keys(key_dir + "/") == []
    no_storage_failures(server)
