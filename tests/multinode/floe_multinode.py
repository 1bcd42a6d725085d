"""Support for the multi-node tests: several real `floe serve` processes over one
PostgreSQL database (and one shared warehouse: a directory, or a prefix of an S3
bucket), and REST helpers.
(A module of its own, not conftest.py, so that tests can import it even when pytest
also collects another directory with a conftest.py.)

Environment:
- FLOE_TEST_DATABASE_URL (required, else the suite is skipped): URL of a throwaway
  cluster whose user may CREATE DATABASE; every cluster fixture gets a fresh database
  next to it.
- FLOE_TEST_PG_DIR (needed by the fault tests that restart or stop PostgreSQL): the
  cluster's directory, as given to scripts/pg-cluster.sh.
- FLOE_BIN: server binary (default target/release/floe, then target/debug/floe).
- FLOE_MN_LOG: the nodes' --log filter. The default adds debug for Floe's two retry
  loops (lines containing "retrying"), so tests can count internal retries.
- KEEP_DATA=1 keeps the temporary directories (node logs, warehouse) afterwards.
- FLOE_MN_STORAGES: the storages that modules declaring STORAGES run on (default
  "file s3"; "file" leaves S3 out). On S3 every node of a cluster gets the same
  --warehouse s3://lake/<prefix> and --storage-config, and the S3 admin keys in its
  environment; one SeaweedFS with STS (scripts/s3-server.sh) serves the session.

Everything talks to 127.0.0.1 only; every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
PG_SCRIPT = ROOT / "scripts" / "pg-cluster.sh"
# tests/support: helpers shared with tests/e2e and tests/engines (the S3 server).
if str(ROOT / "tests/support") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests/support"))
from ports import free_port, restartable_port  # noqa: E402,F401
from s3 import S3Server, S3ServerError, start_s3_server, stop_s3_server  # noqa: E402
HEALTH_TIMEOUT = float(os.environ.get("FLOE_HEALTH_TIMEOUT", "60"))
LOG_FILTER = os.environ.get(
    "FLOE_MN_LOG", "info,floe::catalog::objects=debug,floe::store::postgres=debug"
)
DEFAULT_TIMEOUT = 60.0  # seconds per HTTP request unless a test says otherwise

# Nodes currently started by a fixture; their logs are attached to failing tests.
live_nodes: list["Node"] = []
# The session's S3 server, once a fixture has started it (see S3Store).
s3_store: "S3Store | None" = None


# ---------------------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------------------


def floe_bin() -> Path:
    env = os.environ.get("FLOE_BIN")
    if env:
        path = Path(env)
        if not path.is_absolute():
            path = ROOT / path
        candidates = [path]
    else:
        candidates = [ROOT / "target/release/floe", ROOT / "target/debug/floe"]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    pytest.fail(
        "Floe binary not found (looked at %s); build it or set FLOE_BIN"
        % ", ".join(str(p) for p in candidates),
        pytrace=False,
    )


def base_database_url() -> str:
    url = os.environ.get("FLOE_TEST_DATABASE_URL")
    if not url:
        pytest.skip(
            "FLOE_TEST_DATABASE_URL is not set: the multi-node tests need a throwaway "
            "PostgreSQL cluster (scripts/pg-cluster.sh start DIR PORT prints one)"
        )
    return url


def pg_dir() -> Path:
    d = os.environ.get("FLOE_TEST_PG_DIR")
    if not d:
        pytest.skip(
            "FLOE_TEST_PG_DIR is not set: this fault test restarts or stops PostgreSQL "
            "with scripts/pg-cluster.sh and needs the cluster's directory"
        )
    return Path(d)


def psql(url: str, sql: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["psql", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", sql],
        capture_output=True, text=True, timeout=timeout,
    )


def fresh_database(prefix: str) -> tuple[str, str]:
    """Creates an empty database next to FLOE_TEST_DATABASE_URL's: (name, url)."""
    base = base_database_url()
    name = f"floe_mn_{prefix}_{uuid.uuid4().hex[:10]}"
    r = psql(base, f"CREATE DATABASE {name}")
    if r.returncode != 0:
        pytest.fail(f"CREATE DATABASE {name} failed: {r.stderr}", pytrace=False)
    return name, base.rsplit("/", 1)[0] + "/" + name


def drop_database(name: str) -> None:
    base = os.environ.get("FLOE_TEST_DATABASE_URL")
    if base:
        try:
            psql(base, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        except (OSError, subprocess.SubprocessError):
            pass


def pg_cluster(command: str, timeout: float = 120.0) -> None:
    """scripts/pg-cluster.sh COMMAND $FLOE_TEST_PG_DIR (restart, down, up).

    Output goes to a file, not a pipe: `pg_ctl restart` is run without -l, so the
    restarted server keeps the caller's stdout/stderr open (and logs to them) for as
    long as it runs; reading them through a pipe would never see EOF."""
    directory = pg_dir()
    out_path = Path(tempfile.gettempdir()) / f"floe-mn-pg-{command}-{uuid.uuid4().hex[:8]}.log"
    with open(out_path, "wb") as out:
        r = subprocess.run(
            ["bash", str(PG_SCRIPT), command, str(directory)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=timeout,
        )
    text = out_path.read_text(errors="replace")
    out_path.unlink()  # a restarted server may keep writing to it; that is harmless
    if r.returncode != 0:
        raise AssertionError(f"pg-cluster.sh {command} failed ({r.returncode}):\n{text[-3000:]}")


def pg_is_up() -> bool:
    try:
        return psql(base_database_url(), "SELECT 1", timeout=10).returncode == 0
    except subprocess.SubprocessError:
        return False


def pg_ensure_up(timeout: float = 60.0) -> None:
    """Brings the shared cluster back if a fault test left it down (best effort, bounded)."""
    if pg_is_up():
        return
    try:
        pg_cluster("up")
    except AssertionError:
        pass  # maybe it was starting already; wait below
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pg_is_up():
            return
        time.sleep(0.5)
    raise AssertionError("PostgreSQL did not come back up")


# ---------------------------------------------------------------------------------------
# S3
# ---------------------------------------------------------------------------------------


class S3Store(S3Server):
    """The shared S3 server (tests/support/s3.py), plus what the multinode checks need:
    the nodes' environment and reads of what they wrote, with the admin key."""

    @classmethod
    def start(cls, directory: Path) -> "S3Store":
        """Starts the server on a free port (another try on a new port if it is taken)."""
        error = None
        for _ in range(3):
            try:
                server = start_s3_server(directory, free_port())
            except S3ServerError as e:
                error = e
                continue
            store = cls(server.endpoint, directory)
            store.token_duration_s = server.token_duration_s
            return store
        pytest.fail(str(error), pytrace=False)

    def stop(self) -> None:
        stop_s3_server(self.work)

    def node_env(self) -> dict[str, str]:
        """A node's environment: the caller's without any AWS_*, plus the admin keys."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(self.server_env)
        return env

    def client(self):
        return super().client(max_attempts=3)

    @staticmethod
    def split(location: str) -> tuple[str, str]:
        """s3://bucket/key -> (bucket, key)."""
        assert location.startswith("s3://"), location
        bucket, _, key = location[len("s3://"):].partition("/")
        return bucket, key

    def read(self, location: str) -> bytes | None:
        """The object at an s3:// location; None if there is none."""
        bucket, key = self.split(location)
        try:
            return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()
        except Exception as e:  # botocore's NoSuchKey
            if getattr(e, "response", {}).get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise

    def keys(self, location: str) -> list[str]:
        """Every key under an s3:// prefix."""
        bucket, prefix = self.split(location.rstrip("/") + "/")
        keys = []
        for page in self.client().get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix):
            keys += [o["Key"] for o in page.get("Contents", [])]
        return keys


# ---------------------------------------------------------------------------------------
# Nodes and clusters
# ---------------------------------------------------------------------------------------


# Every node starts with authentication on and the same root credentials (they are
# written to the shared database by whichever node starts first); every Api client logs
# in with them, so tokens are checked on every request, and a token from one node works
# on the others (the signing key is in the database).
ROOT_CLIENT_ID = "mn-root"
ROOT_SECRET = "mn-root-secret-" + "0123456789abcdef"


class Node:
    """One `floe serve` process (at a time) with its own data dir and log file."""

    def __init__(self, name: str, binary: Path, database_url: str, warehouse: str,
                 data_dir: Path, log_path: Path, extra_args: list[str] | None = None,
                 env: dict[str, str] | None = None):
        self.name = name
        self.extra_args = list(extra_args or [])
        self.env = dict(env) if env is not None else None  # None: the caller's, at spawn
        self.binary = binary
        self.database_url = database_url
        self.warehouse = warehouse
        self.data_dir = data_dir
        self.log_path = log_path
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        assert self.port is not None, f"{self.name} not started"
        return f"http://127.0.0.1:{self.port}"

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self, port: int | None = None) -> None:
        assert not self.is_running(), f"{self.name} already running"
        self.port = port or self.port or free_port()
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== {self.name} start #{self.starts}: port {self.port} ===\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [str(self.binary), "serve",
                 "--bind", f"127.0.0.1:{self.port}",
                 "--database-url", self.database_url,
                 "--warehouse", self.warehouse,
                 "--data-dir", str(self.data_dir),
                 "--log", LOG_FILTER, *self.extra_args],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**(os.environ if self.env is None else self.env), "NO_COLOR": "1",
                     "FLOE_BOOTSTRAP_CREDENTIALS": f"{ROOT_CLIENT_ID},{ROOT_SECRET}"},
                start_new_session=True,
            )

    def wait_healthy(self, timeout: float = HEALTH_TIMEOUT) -> str | None:
        """None once /readyz answers 200; else why not (the process exited, or time ran out)."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return f"exited with status {self.proc.returncode if self.proc else None}"
            try:
                r = requests.get(self.url + "/readyz", timeout=2)
                if r.status_code == 200:
                    return None
                last = f"GET /readyz -> {r.status_code}"
            except requests.RequestException as e:
                last = f"GET /readyz: {e.__class__.__name__}"
            time.sleep(0.1)
        return f"not healthy within {timeout}s ({last})"

    def start(self, port: int | None = None) -> "Node":
        """Start and wait for health; retries on a fresh port if the process exits early."""
        why = None
        for attempt in range(3):
            self.spawn(port if attempt == 0 else free_port())
            why = self.wait_healthy()
            if why is None:
                return self
            if self.is_running():
                break  # running but unhealthy: not a port clash
        self.kill9()
        pytest.fail(f"{self.name} failed to start: {why}\n{self.log_tail()}", pytrace=False)

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def terminate(self, timeout: float = 15.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)

    def restart(self) -> "Node":
        """kill -9, then start again (same port when it is free)."""
        self.kill9()
        return self.start()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_text().splitlines()
        return f"----- last {lines} lines of {self.log_path} -----\n" + "\n".join(text[-lines:])

    def log_grep(self, needle: str, limit: int = 20) -> list[str]:
        return [l for l in self.log_text().splitlines() if needle in l][:limit]


class Cluster:
    """Several nodes over one fresh database and one shared warehouse: a directory, or
    with `s3` a fresh prefix of its bucket (then every node gets the same
    --storage-config and the S3 keys, and warehouse_dir is None)."""

    def __init__(self, binary: Path, work: Path, prefix: str, size: int,
                 s3: S3Store | None = None):
        self.db_name, self.database_url = fresh_database(prefix)
        self.work = work
        self.s3 = s3
        extra_args: list[str] = []
        env = None
        if s3 is None:
            self.storage = "file"
            self.warehouse_dir = work / "warehouse"
            self.warehouse_dir.mkdir(parents=True)
            self.warehouse = f"file://{self.warehouse_dir}"
        else:
            self.storage = "s3"
            self.warehouse_dir = None
            self.warehouse = f"s3://{s3.bucket}/mn-{prefix}-{uuid.uuid4().hex[:10]}"
            extra_args = ["--storage-config", json.dumps(s3.storage_config())]
            env = s3.node_env()
        self.nodes = []
        for i in range(size):
            d = work / f"node{i}"
            d.mkdir()
            self.nodes.append(Node(f"node{i}", binary, self.database_url, self.warehouse,
                                   d / "data", d / "floe.log", extra_args, env))

    def start(self) -> "Cluster":
        # All nodes start at once on the empty database: migrations and the default
        # catalog's bootstrap must tolerate each other.
        for n in self.nodes:
            live_nodes.append(n)
            n.spawn()
        for n in self.nodes:
            why = n.wait_healthy()
            if why is not None:
                n.kill9()
                n.start()  # one more try, alone (fails the test with the log if it fails)
        return self

    def stop(self) -> None:
        for n in self.nodes:
            try:
                n.terminate()
            finally:
                if n in live_nodes:
                    live_nodes.remove(n)
        drop_database(self.db_name)

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    def count_in_logs(self, needle: str) -> dict[str, int]:
        return {n.name: sum(1 for l in n.log_text().splitlines() if needle in l)
                for n in self.nodes}

    def log_lines(self, needle: str, limit: int = 20) -> str:
        out = []
        for n in self.nodes:
            out += [f"{n.name}: {l}" for l in n.log_grep(needle, limit)]
        return "\n".join(out[:limit])


# ---------------------------------------------------------------------------------------
# REST helpers
# ---------------------------------------------------------------------------------------


def ns_path(levels) -> str:
    """A namespace in a path: levels joined by %1F."""
    if isinstance(levels, str):
        levels = [levels]
    return "%1F".join(quote(l, safe="") for l in levels)


def describe(r: requests.Response, limit: int = 600) -> str:
    req = r.request
    body = r.text if len(r.text) <= limit else r.text[:limit] + "..."
    return f"{req.method} {req.url} -> {r.status_code} {body}"


def fetch_token(base_url: str, client_id: str = ROOT_CLIENT_ID, secret: str = ROOT_SECRET,
                scope: str = "PRINCIPAL_ROLE:ALL") -> str:
    """An access token by OAuth2 client credentials."""
    r = requests.post(base_url + "/v1/oauth/tokens", timeout=DEFAULT_TIMEOUT, data={
        "grant_type": "client_credentials", "client_id": client_id,
        "client_secret": secret, "scope": scope})
    assert r.status_code == 200, f"token: {r.status_code} {r.text}"
    return r.json()["access_token"]


class Api:
    """A client of one node. Not thread-safe: give each thread its own."""

    def __init__(self, base_url: str, timeout: float = DEFAULT_TIMEOUT):
        self.base = base_url
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers["Authorization"] = "Bearer " + fetch_token(base_url)

    def request(self, method: str, path: str, body=None, timeout: float | None = None,
                **kw) -> requests.Response:
        return self.session.request(
            method, self.base + path, json=body, timeout=timeout or self.timeout, **kw
        )

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    # ---- catalog calls ----

    def create_catalog(self, name: str, warehouse: str, storage_config: dict | None = None):
        """A catalog under the warehouse. On a file: warehouse its storage is FILE; on
        another (s3://) the request names none, and the node's --storage-config applies."""
        catalog = {"type": "INTERNAL", "name": name,
                   "properties": {"default-base-location": f"{warehouse}/{name}"}}
        if storage_config is not None:
            catalog["storageConfigInfo"] = storage_config
        elif warehouse.startswith("file:"):
            catalog["storageConfigInfo"] = {"storageType": "FILE"}
        return self.post("/api/management/v1/catalogs", {"catalog": catalog})

    def create_namespace(self, catalog: str, levels: list[str], properties=None):
        return self.post(f"/v1/{catalog}/namespaces",
                         {"namespace": levels, "properties": properties or {}})

    def create_table(self, catalog: str, levels, name: str, schema=None, **extra):
        return self.post(f"/v1/{catalog}/namespaces/{ns_path(levels)}/tables",
                         {"name": name, "schema": schema or simple_schema(), **extra})

    def load_table(self, catalog: str, levels, name: str, **kw):
        return self.get(f"/v1/{catalog}/namespaces/{ns_path(levels)}/tables/{quote(name, safe='')}", **kw)

    def commit_table(self, catalog: str, levels, name: str, body, **kw):
        return self.post(f"/v1/{catalog}/namespaces/{ns_path(levels)}/tables/{quote(name, safe='')}",
                         body, **kw)

    def set_properties(self, catalog: str, levels, name: str, updates: dict, **kw):
        return self.commit_table(catalog, levels, name, {
            "requirements": [], "updates": [{"action": "set-properties", "updates": updates}]}, **kw)

    def create_view(self, catalog: str, levels, name: str, sql: str, schema=None):
        return self.post(f"/v1/{catalog}/namespaces/{ns_path(levels)}/views", {
            "name": name,
            "schema": schema or simple_schema(),
            "view-version": {
                "version-id": 1, "schema-id": 0, "timestamp-ms": now_ms(),
                "summary": {"engine-name": "floe-multinode-tests"},
                "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}],
                "default-namespace": list(levels),
            },
            "properties": {},
        })

    def load_view(self, catalog: str, levels, name: str, **kw):
        return self.get(f"/v1/{catalog}/namespaces/{ns_path(levels)}/views/{quote(name, safe='')}", **kw)


def list_all(api: Api, path: str, key: str) -> list:
    """Every item of a (possibly paginated) list endpoint; bounded in pages."""
    items, token = [], None
    for _ in range(1000):
        r = api.get(path, params={"pageToken": token} if token else None)
        assert r.status_code == 200, describe(r)
        body = r.json()
        items += body[key]
        token = body.get("next-page-token")
        if not token:
            return items
    raise AssertionError(f"more than 1000 pages at {path}")


def now_ms() -> int:
    return int(time.time() * 1000)


def simple_schema() -> dict:
    return {"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "id", "required": True, "type": "long"},
        {"id": 2, "name": "data", "required": False, "type": "string"},
    ]}


def bench_schema() -> dict:
    """The Polaris benchmark's table: required int column1..column10, identifier field 1."""
    return {"type": "struct", "schema-id": 0, "identifier-field-ids": [1], "fields": [
        {"id": i, "name": f"column{i}", "required": True, "type": "int"} for i in range(1, 11)
    ]}


def assert_error_model(r: requests.Response, status: int, error_type: str) -> None:
    """The spec's ErrorModel: {"error": {"message", "type", "code"}}."""
    assert r.status_code == status, describe(r)
    try:
        body = r.json()
    except ValueError:
        raise AssertionError(f"not JSON: {describe(r)}")
    err = body.get("error") if isinstance(body, dict) else None
    assert isinstance(err, dict), describe(r)
    assert err.get("type") == error_type, describe(r)
    assert err.get("code") == status, describe(r)
    assert isinstance(err.get("message"), str) and err["message"], describe(r)


def local_path(location: str) -> Path:
    for prefix in ("file://", "file:"):
        if location.startswith(prefix):
            return Path(location[len(prefix):])
    return Path(location)


def assert_complete_metadata(metadata_location: str) -> dict:
    """The metadata file exists and is one complete JSON document (on S3: read with the
    admin key from the session's S3 server)."""
    if metadata_location.startswith("s3://"):
        assert s3_store is not None, f"no S3 server to read {metadata_location} from"
        data = s3_store.read(metadata_location)
        assert data is not None, f"metadata object missing: {metadata_location}"
        text = data.decode()
    else:
        path = local_path(metadata_location)
        assert path.is_file(), f"metadata file missing: {metadata_location}"
        text = path.read_text()
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise AssertionError(f"metadata file {metadata_location} is not complete JSON: {e}")
    assert "format-version" in doc and ("table-uuid" in doc or "view-uuid" in doc), metadata_location
    return doc


def assert_all_metadata_files_complete(cluster: "Cluster") -> int:
    """Every metadata file in the cluster's warehouse (temporaries aside) is one complete
    JSON document: in its directory, or under its S3 prefix (read with the admin key)."""
    if cluster.s3 is not None:
        keys = [k for k in cluster.s3.keys(cluster.warehouse) if k.endswith(".metadata.json")]
        for key in keys:
            assert_complete_metadata(f"s3://{cluster.s3.bucket}/{key}")
        return len(keys)
    count = 0
    for path in cluster.warehouse_dir.rglob("*.metadata.json"):
        if path.name.startswith("."):
            continue  # a temporary, never a pointer target
        try:
            json.loads(path.read_text())
        except ValueError as e:
            raise AssertionError(f"{path} is not complete JSON: {e}")
        count += 1
    return count


def run_threads(fns, timeout: float) -> list:
    """Runs each fn in its own thread at once; returns their results (exceptions re-raised).
    Fails if any thread is still running after `timeout` seconds."""
    results = [None] * len(fns)
    errors: list[BaseException | None] = [None] * len(fns)
    start = threading.Barrier(len(fns)) if fns else None

    def wrap(i, fn):
        try:
            start.wait(30)
            results[i] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors[i] = e

    threads = [threading.Thread(target=wrap, args=(i, fn), daemon=True) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    alive = sum(t.is_alive() for t in threads)
    assert alive == 0, f"{alive} client threads still running after {timeout}s"
    for e in errors:
        if e is not None:
            raise e
    return results
