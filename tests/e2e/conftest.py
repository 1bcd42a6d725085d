"""Fixtures that run a real Floe server for the end-to-end tests.

FLOE_BIN names the server binary (default: target/release/floe, then
target/debug/floe). Each server gets a free loopback port and a fresh data dir;
``FloeServer`` can SIGTERM, kill -9 and restart the same server on the same
data dir (for the crash tests). When a test fails, the tail of every live
server's log is attached to the report.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
import tempfile
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
# tests/support: helpers shared with tests/engines (the S3 server).
if str(ROOT / "tests/support") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests/support"))
from ports import free_port, restartable_port  # noqa: E402,F401
from s3 import S3Server, S3ServerError, start_s3_server, stop_s3_server  # noqa: E402,F401
HEALTH_TIMEOUT = float(os.environ.get("FLOE_HEALTH_TIMEOUT", "60"))
HEALTH_PATH = os.environ.get("FLOE_HEALTH_PATH", "/readyz")

_live_servers: list["FloeServer"] = []


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


def fresh_database() -> str | None:
    """A new, empty database next to FLOE_TEST_DATABASE_URL's, or None without it."""
    base = os.environ.get("FLOE_TEST_DATABASE_URL")
    if not base:
        return None
    name = f"floe_e2e_{uuid.uuid4().hex[:16]}"
    subprocess.run(["psql", "-q", base, "-c", f"CREATE DATABASE {name}"], check=True)
    return base.rsplit("/", 1)[0] + "/" + name


class FloeServer:
    """One Floe process at a time on a fixed data dir."""

    def __init__(self, binary: Path, data_dir: Path, log_path: Path):
        self.binary = binary
        self.data_dir = data_dir
        self.log_path = log_path
        # With FLOE_TEST_DATABASE_URL, the server keeps its state in a fresh PostgreSQL
        # database of its own (kept across restarts of this server).
        self.database_url = fresh_database()
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        assert self.port is not None, "server not started"
        return f"http://127.0.0.1:{self.port}"

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # The root principal's credentials (set on first start); the e2e clients log in with
    # them. `extra_args` is for servers that run differently (e.g. the crash tests run
    # with --auth none: they test durability, and use plain HTTP calls).
    client_id = "e2e-root"
    client_secret = "e2e-root-secret-0123456789abcdef"
    extra_args: list[str] = []
    # Extra environment, e.g. the S3 keys of a server on object storage.
    extra_env: dict[str, str] = {}

    @property
    def credential(self) -> str:
        return f"{self.client_id}:{self.client_secret}"

    def start(self, port: int | None = None) -> "FloeServer":
        """Start the server (same port as before if possible) and wait for health."""
        assert not self.is_running(), "server already running"
        ports = [port or self.port or free_port(), free_port(), free_port()]
        last_error = ""
        for p in ports:
            self.port = p
            self.starts += 1
            with open(self.log_path, "ab") as log:
                log.write(f"\n=== start #{self.starts}: port {p} ===\n".encode())
                log.flush()
                self.proc = subprocess.Popen(
                    [str(self.binary), "serve", "--bind", f"127.0.0.1:{p}",
                     "--data-dir", str(self.data_dir)]
                    + (["--database-url", self.database_url] if self.database_url else [])
                    + self.extra_args,
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env={**os.environ, **self.extra_env, "NO_COLOR": "1",
                         "FLOE_BOOTSTRAP_CREDENTIALS": f"{self.client_id},{self.client_secret}"},
                    start_new_session=True,
                )
            deadline = time.monotonic() + HEALTH_TIMEOUT
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    last_error = f"server exited with status {self.proc.returncode}"
                    break
                try:
                    r = requests.get(self.url + HEALTH_PATH, timeout=2)
                    if r.status_code == 200:
                        return self
                    last_error = f"GET {HEALTH_PATH} -> {r.status_code}"
                except requests.RequestException as e:
                    last_error = f"GET {HEALTH_PATH}: {e.__class__.__name__}"
                time.sleep(0.1)
            else:
                self.kill9()
                pytest.fail(
                    f"Floe not healthy within {HEALTH_TIMEOUT}s ({last_error})\n{self.log_tail()}",
                    pytrace=False,
                )
            # exited early: maybe the port was taken meanwhile; try another one
        pytest.fail(f"Floe failed to start: {last_error}\n{self.log_tail()}", pytrace=False)

    def terminate(self, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not exit in time. Returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        return self.proc.returncode

    def kill9(self) -> None:
        """Kill -9, like a power cut for the process (no chance to flush or clean up)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def restart(self, kill: bool = True) -> "FloeServer":
        """kill -9 (or SIGTERM with kill=False), then start again on the same data dir."""
        if kill:
            self.kill9()
        else:
            self.terminate()
        return self.start()

    def log_tail(self, lines: int = 80) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no server log)"
        return f"----- last {lines} lines of {self.log_path} -----\n" + "\n".join(text[-lines:])


class ApiClient:
    """Plain HTTP calls with a bearer token; any 5xx fails the test."""

    def __init__(self, url: str, bearer: str):
        self.url = url
        self.s = requests.Session()
        self.s.headers["Authorization"] = "Bearer " + bearer

    def call(self, method: str, path: str, body=None, headers=None) -> requests.Response:
        r = self.s.request(method, self.url + path, json=body, headers=headers, timeout=60)
        assert r.status_code < 500, f"{method} {path}: {r.status_code} {r.text}"
        return r


def access_token(url: str, client_id: str = FloeServer.client_id,
                 secret: str = FloeServer.client_secret) -> str:
    """A token by OAuth2 client credentials (the root principal's by default)."""
    r = requests.post(url + "/v1/oauth/tokens", timeout=30, data={
        "grant_type": "client_credentials", "client_id": client_id,
        "client_secret": secret, "scope": "PRINCIPAL_ROLE:ALL"})
    assert r.status_code == 200, r.text
    return r.json()["access_token"]


@pytest.fixture(scope="session")
def floe_binary() -> Path:
    return floe_bin()


@pytest.fixture(scope="session")
def _e2e_tmp():
    path = Path(tempfile.mkdtemp(prefix="floe-e2e."))
    yield path
    if os.environ.get("KEEP_DATA") != "1":
        shutil.rmtree(path, ignore_errors=True)


def _server_factory(floe_binary, tmp):
    """Yields a function that makes servers, each on its own fresh data dir; all are
    stopped when the generator is closed."""
    made: list[FloeServer] = []

    def make(extra_args: list[str] | None = None,
             extra_env: dict[str, str] | None = None,
             port: int | None = None) -> FloeServer:
        n = len(made)
        work = Path(tempfile.mkdtemp(prefix=f"srv{n}.", dir=tmp))
        server = FloeServer(floe_binary, work / "data", work / "floe.log")
        server.extra_args = list(extra_args or [])
        server.extra_env = dict(extra_env or {})
        server.data_dir.mkdir()
        made.append(server)
        _live_servers.append(server)
        return server.start(port)

    yield make
    for server in made:
        try:
            server.terminate()
        finally:
            _live_servers.remove(server)


@pytest.fixture
def floe_server_factory(floe_binary, _e2e_tmp):
    """Servers for one test."""
    yield from _server_factory(floe_binary, _e2e_tmp)


@pytest.fixture(scope="module")
def module_server_factory(floe_binary, _e2e_tmp):
    """Servers shared by the tests of a module."""
    yield from _server_factory(floe_binary, _e2e_tmp)


@pytest.fixture(scope="module")
def floe(floe_binary, _e2e_tmp):
    """One server shared by the tests of a module."""
    work = Path(tempfile.mkdtemp(prefix="module.", dir=_e2e_tmp))
    server = FloeServer(floe_binary, work / "data", work / "floe.log")
    server.data_dir.mkdir()
    _live_servers.append(server)
    try:
        yield server.start()
    finally:
        try:
            server.terminate()
        finally:
            _live_servers.remove(server)


@pytest.fixture(scope="session")
def s3_server(_e2e_tmp):
    """One S3 server for the session, started by the project's own script."""
    work = _e2e_tmp / "s3"
    try:
        server = start_s3_server(work, free_port())
    except S3ServerError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield server
    finally:
        stop_s3_server(work)


@pytest.fixture(scope="module")
def floe_url(floe) -> str:
    return floe.url


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        for server in _live_servers:
            report.sections.append((f"floe server log ({server.data_dir})", server.log_tail()))
    return report


def purge_dropped(api: "ApiClient", catalog: str, namespace: list[str], name: str) -> None:
    """A drop with purgeRequested keeps the files while the table can be undropped
    (the drop retention); this purges the dropped table now, as an operator would."""
    r = api.call("GET", f"/api/management/v1/catalogs/{catalog}/dropped")
    assert r.status_code == 200, r.text
    ids = [d["id"] for d in r.json()["dropped"] if d["namespace"] == namespace and d["name"] == name]
    assert len(ids) == 1, r.json()
    r = api.call("DELETE", f"/api/management/v1/catalogs/{catalog}/dropped/{ids[0]}")
    assert r.status_code == 204, r.text
