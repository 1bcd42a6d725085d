"""Fixtures that run Spark and DuckDB against a real `floe serve` with authentication on.

Every test module gets its own Floe server (``--auth internal``, fixed bootstrap
credentials for the root principal, and a short ``--token-lifetime`` so that the tests
can cross a token's expiry in seconds). One Spark session serves the whole run: starting
a JVM costs several seconds, so catalogs are registered on it at run time, one per
server and credential (``spark_catalog``). DuckDB connections are cheap and made per
test (``duckdb_connect``).

Tables on S3 (test_s3.py) use the SeaweedFS server of scripts/s3-server.sh, through the
helpers in tests/support/s3.py that tests/e2e shares. The engines must reach S3 with
what the catalog gives them only, so this module removes every AWS_* variable from the
environment of the test process at import, before any engine starts (the Spark JVM
inherits it, DuckDB runs in this process), and the JVM is told to read no AWS config or
credentials file and not to ask an instance metadata service. A Floe server gets its S3
keys explicitly (``floe_env``).

Environment:
  FLOE_BIN               server binary (default: target/release/floe)
  ENGINES_ICEBERG_JAR    the iceberg-spark-runtime jar (default: the one tests/engines/run.sh
                         put in .cache/engines-jars/)
  ENGINES_ICEBERG_AWS_JAR  the iceberg-aws-bundle jar (S3FileIO and the AWS SDK; same default
                         place)
  FLOE_HEALTH_TIMEOUT    seconds to wait for /healthz (default 60)
  KEEP_DATA=1            keep the servers' data dirs and logs
"""

from __future__ import annotations

import glob
import importlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
# tests/support: helpers shared with tests/e2e (the S3 server).
if str(ROOT / "tests/support") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests/support"))
from s3 import S3Server, S3ServerError, start_s3_server, stop_s3_server  # noqa: E402

# No engine may find S3 keys of its own (see the module docstring).
AWS_ENV_REMOVED = sorted(k for k in os.environ if k.startswith("AWS_"))
for _name in AWS_ENV_REMOVED:
    del os.environ[_name]

HEALTH_TIMEOUT = float(os.environ.get("FLOE_HEALTH_TIMEOUT", "60"))

# Short enough that a test can sleep past it in seconds. Not shorter: Iceberg Java refreshes
# its token when 90% of the lifetime has passed, and the remaining 10% (1 s here) must cover
# a late refresh thread on a busy 2-core machine.
TOKEN_LIFETIME = 10

ROOT_CLIENT_ID = "engines-root"
ROOT_CLIENT_SECRET = "engines-root-secret-0123456789abcdef"

# One line of Floe's request log (`--log info`), e.g.
#   ... INFO floe::request: method=POST path=/v1/oauth/tokens status=200 micros=166 ...
REQUEST_LINE = re.compile(r"floe::request\S*\s+method=(\S+) path=(\S+) status=(\d+)")

_live_servers: list["FloeServer"] = []


def floe_bin() -> Path:
    """The server binary; waits a little if it is missing (it may be being rebuilt)."""
    env = os.environ.get("FLOE_BIN")
    path = Path(env) if env else ROOT / "target/release/floe"
    if not path.is_absolute():
        path = ROOT / path
    deadline = time.monotonic() + 120
    while not (path.is_file() and os.access(path, os.X_OK)):
        if time.monotonic() > deadline:
            pytest.fail(f"Floe binary not found at {path}; build it or set FLOE_BIN", pytrace=False)
        time.sleep(2)
    return path


_ports_handed_out: set[int] = set()


def free_port() -> int:
    """A free loopback port not handed out before in this run.

    A Spark catalog outlives the module whose server it talked to and keeps trying to
    refresh its token; a later server on the same port would see those requests.
    """
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _ports_handed_out:
            _ports_handed_out.add(port)
            return port


class FloeServer:
    """One `floe serve --auth internal` process on a fresh data dir."""

    client_id = ROOT_CLIENT_ID
    client_secret = ROOT_CLIENT_SECRET
    token_lifetime = TOKEN_LIFETIME

    def __init__(self, binary: Path, work: Path, extra_env: dict[str, str] | None = None):
        self.binary = binary
        # e.g. the S3 keys of a server with catalogs on S3 (the engines never get them)
        self.extra_env = dict(extra_env or {})
        self.data_dir = work / "data"
        self.log_path = work / "floe.log"
        self.data_dir.mkdir(parents=True)
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token_url(self) -> str:
        return self.url + "/v1/oauth/tokens"

    @property
    def credential(self) -> str:
        return f"{self.client_id}:{self.client_secret}"

    def start(self) -> "FloeServer":
        last_error = ""
        for _ in range(3):  # a free port can be taken before the server binds it
            self.port = free_port()
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    [str(self.binary), "serve", "--bind", f"127.0.0.1:{self.port}",
                     "--data-dir", str(self.data_dir), "--auth", "internal",
                     "--token-lifetime", str(self.token_lifetime), "--fsync", "false",
                     # info, not warn: the tests read the request log to see which token
                     # requests the engines made and whether any request got a 401.
                     "--log", "info"],
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
                    if requests.get(self.url + "/healthz", timeout=2).status_code == 200:
                        return self
                except requests.RequestException as e:
                    last_error = f"GET /healthz: {e.__class__.__name__}"
                time.sleep(0.1)
            else:
                self.stop()
                pytest.fail(f"Floe not healthy within {HEALTH_TIMEOUT}s ({last_error})\n"
                            + self.log_tail(), pytrace=False)
        pytest.fail(f"Floe failed to start: {last_error}\n{self.log_tail()}", pytrace=False)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no server log)"
        return f"----- last {lines} lines of {self.log_path} -----\n" + "\n".join(text[-lines:])

    # --- the request log ----------------------------------------------------------

    def log_mark(self) -> int:
        """A position in the request log, once the lines of requests already answered are in."""
        size = self.log_path.stat().st_size
        while True:  # the server writes a request's log line after it sent the response
            time.sleep(0.2)
            now = self.log_path.stat().st_size
            if now == size:
                return size
            size = now

    def requests_since(self, mark: int, until: int | None = None) -> list[tuple[str, str, int]]:
        """(method, path, status) of every request logged between two marks (or the end)."""
        if until is None:
            until = self.log_mark()
        with open(self.log_path, "rb") as f:
            f.seek(mark)
            data = f.read(until - mark)
        return [(m, p, int(s)) for m, p, s in REQUEST_LINE.findall(data.decode(errors="replace"))]

    # --- plain HTTP helpers ----------------------------------------------------------

    def token(self, client_id: str | None = None, client_secret: str | None = None) -> str:
        r = requests.post(self.token_url, timeout=10, data={
            "grant_type": "client_credentials", "scope": "PRINCIPAL_ROLE:ALL",
            "client_id": client_id or self.client_id,
            "client_secret": client_secret or self.client_secret})
        r.raise_for_status()
        return r.json()["access_token"]

    def probe(self, token: str, path: str = "/v1/default/namespaces") -> int:
        """The status of a plain GET with `token`."""
        return requests.get(self.url + path, headers={"Authorization": "Bearer " + token},
                            timeout=10).status_code

    def management(self, method: str, path: str, body: dict | None = None) -> requests.Response:
        """A call to the management API as the root principal; fails the test on an error."""
        r = requests.request(method, f"{self.url}/api/management/v1{path}", json=body,
                             headers={"Authorization": "Bearer " + self.token()}, timeout=10)
        assert r.ok, f"{method} {path} -> {r.status_code} {r.text}"
        return r

    def create_principal(self, name: str, principal_roles: list[str] = ()) -> tuple[str, str]:
        """A new principal holding `principal_roles` (created if missing); its (id, secret)."""
        creds = self.management("POST", "/principals", {"principal": {"name": name}}).json()
        for role in principal_roles:
            existing = self.management("GET", "/principal-roles").json()["roles"]
            if role not in {r["name"] for r in existing}:
                self.management("POST", "/principal-roles", {"principalRole": {"name": role}})
            self.management("PUT", f"/principals/{name}/principal-roles",
                            {"principalRole": {"name": role}})
        return creds["credentials"]["clientId"], creds["credentials"]["clientSecret"]


@pytest.fixture(scope="session")
def _engines_tmp():
    path = Path(tempfile.mkdtemp(prefix="floe-engines."))
    yield path
    if os.environ.get("KEEP_DATA") == "1":
        print(f"\nengine test data kept in {path}")
    else:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def floe_env() -> dict[str, str]:
    """Extra environment of the module's Floe server; a module overrides it (test_s3.py)."""
    return {}


@pytest.fixture(scope="module")
def floe(_engines_tmp, request, floe_env) -> FloeServer:
    """One Floe server (auth on, short-lived tokens) shared by the tests of a module."""
    work = Path(tempfile.mkdtemp(prefix=request.module.__name__ + ".", dir=_engines_tmp))
    server = FloeServer(floe_bin(), work, floe_env)
    _live_servers.append(server)
    try:
        yield server.start()
    finally:
        server.stop()
        _live_servers.remove(server)


@pytest.fixture(scope="module")
def s3_server(_engines_tmp) -> S3Server:
    """A SeaweedFS S3 server with STS (scripts/s3-server.sh) for the module."""
    work = Path(tempfile.mkdtemp(prefix="s3.", dir=_engines_tmp))
    try:
        server = start_s3_server(work, free_port())
    except S3ServerError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield server
    finally:
        stop_s3_server(work)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        for server in _live_servers:
            report.sections.append((f"floe server log ({server.data_dir})", server.log_tail()))
    return report


# --- Spark -------------------------------------------------------------------------------

def _jar(env: str, artifact: str) -> str:
    jar = os.environ.get(env)
    if jar:
        return jar
    found = sorted(glob.glob(str(ROOT / f".cache/engines-jars/{artifact}-*.jar")))
    if not found:
        pytest.fail(f"no {artifact} jar in .cache/engines-jars; run tests/engines/run.sh "
                    f"or set {env}", pytrace=False)
    return found[-1]


def iceberg_jar() -> str:
    return _jar("ENGINES_ICEBERG_JAR", "iceberg-spark-runtime-3.5_2.12")


def iceberg_aws_jar() -> str:
    """iceberg-aws-bundle: S3FileIO, its REST signer client and the AWS SDK it needs."""
    return _jar("ENGINES_ICEBERG_AWS_JAR", "iceberg-aws-bundle")


@pytest.fixture(scope="session")
def spark(_engines_tmp):
    """One local Spark session for the whole run, with Iceberg's runtime and SQL extensions."""
    from pyspark.sql import SparkSession

    # Spark otherwise resolves the host name, finds a non-loopback address and warns; the
    # driver only ever talks to itself and to Floe on 127.0.0.1.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]").appName("floe-engines")
        .config("spark.jars", f"{iceberg_jar()},{iceberg_aws_jar()}")
        # MERGE/UPDATE/DELETE on Iceberg tables need the extensions.
        .config("spark.sql.extensions",
                "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.sql.warehouse.dir", str(_engines_tmp / "spark-warehouse"))
        # The AWS SDK reads no config or credentials file (not ~/.aws) and asks no
        # instance metadata service: S3 is reached with what the catalog hands out only.
        .config("spark.driver.extraJavaOptions", " ".join([
            f"-Djava.io.tmpdir={_engines_tmp}",
            f"-Daws.configFile={_engines_tmp}/no-aws-config",
            f"-Daws.sharedCredentialsFile={_engines_tmp}/no-aws-credentials",
            "-Daws.disableEc2Metadata=true"]))
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    # Iceberg's REST client warns about each catalog it configures, and the refresh threads
    # of catalogs whose server a finished module stopped log their failures; keep errors.
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_catalog(spark):
    """register(server, credential, name="floe") -> the name of a new Spark catalog.

    Spark builds a catalog the first time a query names it and keeps it for the session, so
    each registration gets a name not used before (``floe``, then ``floe_2``, ...).
    """
    used: set[str] = set()

    def register(server: FloeServer, credential: str, name: str = "floe",
                 warehouse: str = "default", extra: dict[str, str] | None = None) -> str:
        unique, n = name, 1
        while unique in used:
            n += 1
            unique = f"{name}_{n}"
        used.add(unique)
        prefix = f"spark.sql.catalog.{unique}"
        for key, value in {
            "": "org.apache.iceberg.spark.SparkCatalog",
            ".type": "rest",
            ".uri": server.url,
            ".warehouse": warehouse,
            ".rest.auth.type": "oauth2",
            ".credential": credential,
            ".scope": "PRINCIPAL_ROLE:ALL",
            # Said explicitly: Iceberg warns that the fallback to <uri>/v1/oauth/tokens will go.
            ".oauth2-server-uri": server.token_url,
            # Iceberg's default, spelled out because the tests depend on it: the catalog
            # refreshes its token (token exchange) before it expires.
            ".token-refresh-enabled": "true",
            **{"." + k: v for k, v in (extra or {}).items()},
        }.items():
            spark.conf.set(prefix + key, value)
        return unique

    return register


@pytest.fixture(scope="module")
def floe_spark(floe, spark_catalog) -> str:
    """A Spark catalog on this module's server, as the root principal."""
    return spark_catalog(floe, floe.credential)


# --- DuckDB ------------------------------------------------------------------------------

# Loaded in this order: iceberg needs avro, and if avro is not loaded yet DuckDB tries to
# download it from its extension repository, which CI cannot reach.
DUCKDB_EXTENSIONS = ("httpfs", "avro", "iceberg")


def duckdb_extension_path(name: str) -> str:
    """The extension binary that the PyPI package duckdb-extension-<name> ships.

    The package holds extensions/v<duckdb version>/<name>.duckdb_extension (DuckDB's own
    signed build; it loads with unsigned extensions disallowed), without the platform
    directory that an extension_directory would need, so it is loaded by path.
    """
    import duckdb

    package = importlib.import_module(f"duckdb_extension_{name}")
    path = Path(package.__file__).parent / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    assert path.is_file(), f"{path} missing: duckdb-extension-{name} must match duckdb {duckdb.__version__}"
    return str(path)


@pytest.fixture
def duckdb_connect():
    """connect() -> a new in-memory DuckDB connection with httpfs, avro and iceberg loaded."""
    import duckdb

    made = []

    def connect():
        con = duckdb.connect(config={
            # Never reach for extensions.duckdb.org: everything comes from PyPI packages.
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
        })
        for name in DUCKDB_EXTENSIONS:
            con.execute(f"LOAD '{duckdb_extension_path(name)}'")
        made.append(con)
        return con

    yield connect
    for con in made:
        con.close()


def _duckdb_attach(con, server: FloeServer, client_id: str, client_secret: str,
                   alias: str = "floe", warehouse: str = "default", options: str = "") -> None:
    con.execute(f"""CREATE SECRET {alias}_secret (TYPE ICEBERG, CLIENT_ID '{client_id}',
                    CLIENT_SECRET '{client_secret}', OAUTH2_SERVER_URI '{server.token_url}')""")
    con.execute(f"ATTACH '{warehouse}' AS {alias} (TYPE ICEBERG, SECRET {alias}_secret, "
                f"ENDPOINT '{server.url}'{', ' + options if options else ''})")


@pytest.fixture
def duckdb_attach():
    """attach(con, server, client_id, client_secret, alias="floe", warehouse="default",
    options=""): CREATE SECRET of TYPE ICEBERG with the client credentials, then ATTACH the
    catalog `warehouse` as `alias` (`options`: more ATTACH options, comma-separated)."""
    return _duckdb_attach


@pytest.fixture
def duck(floe, duckdb_connect):
    """A DuckDB connection with the catalog attached as `floe`, as the root principal."""
    con = duckdb_connect()
    _duckdb_attach(con, floe, floe.client_id, floe.client_secret)
    return con


# --- PyIceberg ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pyiceberg_catalog(floe):
    """PyIceberg's REST catalog on this module's server, as the root principal."""
    from pyiceberg.catalog import load_catalog

    return load_catalog("floe", type="rest", uri=floe.url, warehouse="default",
                        credential=floe.credential, scope="PRINCIPAL_ROLE:ALL",
                        **{"oauth2-server-uri": floe.token_url})
