"""Fixtures for the multi-node tests; the machinery is in floe_multinode.py, whose
docstring lists the environment variables.

A module that sets STORAGES = ("file", "s3") runs its tests once per storage (test ids
[file] and [s3]): its `cluster` / `cluster_factory` / `fresh_cluster` nodes keep their
warehouse in a directory, then on S3 (one S3 server for the session, started only if
some test needs it). FLOE_MN_STORAGES narrows the list (e.g. "file"). Other modules run
on files only, with unchanged ids."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

import floe_multinode
from floe_multinode import Cluster, S3Store, base_database_url, floe_bin, live_nodes

KNOWN_STORAGES = ("file", "s3")


def pytest_generate_tests(metafunc):
    declared = getattr(metafunc.module, "STORAGES", None)
    if declared is None or "storage" not in metafunc.fixturenames:
        return
    wanted = os.environ.get("FLOE_MN_STORAGES", " ".join(KNOWN_STORAGES)).split()
    unknown = [w for w in wanted if w not in KNOWN_STORAGES]
    if unknown:
        raise pytest.UsageError(f"FLOE_MN_STORAGES: unknown storage(s) {unknown}; "
                                f"known: {' '.join(KNOWN_STORAGES)}")
    chosen = [s for s in declared if s in wanted]
    if not chosen:
        chosen = [pytest.param("file", marks=pytest.mark.skip(
            reason=f"none of this module's storages {declared} in FLOE_MN_STORAGES"))]
    metafunc.parametrize("storage", chosen, indirect=True, scope="module")


@pytest.fixture(scope="session")
def floe_binary() -> Path:
    base_database_url()  # skip early, before looking for a binary
    return floe_bin()


@pytest.fixture(scope="session")
def _mn_tmp():
    path = Path(tempfile.mkdtemp(prefix="floe-mn."))
    yield path
    if os.environ.get("KEEP_DATA") != "1":
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_store(_mn_tmp):
    """One S3 server (SeaweedFS with STS) for the session, by scripts/s3-server.sh."""
    store = S3Store.start(_mn_tmp / "s3")
    floe_multinode.s3_store = store
    try:
        yield store
    finally:
        floe_multinode.s3_store = None
        store.stop()


@pytest.fixture(scope="module")
def storage(request) -> str:
    """Where the module's clusters keep their warehouse: "file" unless the module
    declares STORAGES (then parametrized, see pytest_generate_tests)."""
    return getattr(request, "param", "file")


def _cluster_maker(binary: Path, tmp: Path, request, made: list, storage: str):
    prefix = request.module.__name__.rsplit(".", 1)[-1].replace("test_", "")[:12]
    s3 = request.getfixturevalue("s3_store") if storage == "s3" else None

    def make(size: int = 2) -> Cluster:
        work = Path(tempfile.mkdtemp(prefix=f"{prefix}.", dir=tmp))
        c = Cluster(binary, work, prefix, size, s3=s3)
        made.append(c)
        return c.start()
    return make


@pytest.fixture(scope="module")
def cluster_factory(floe_binary, _mn_tmp, storage, request):
    """make(size=2) -> a started Cluster on a fresh database; all stopped at module end."""
    made: list[Cluster] = []
    yield _cluster_maker(floe_binary, _mn_tmp, request, made, storage)
    for c in made:
        c.stop()


@pytest.fixture
def fresh_cluster(floe_binary, _mn_tmp, storage, request):
    """Like cluster_factory, but the clusters are stopped at the end of the test."""
    made: list[Cluster] = []
    yield _cluster_maker(floe_binary, _mn_tmp, request, made, storage)
    for c in made:
        c.stop()


@pytest.fixture(scope="module")
def cluster(cluster_factory) -> Cluster:
    """Two nodes shared by the tests of a module."""
    return cluster_factory(2)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        for node in live_nodes:
            report.sections.append((f"{node.name} log ({node.log_path})", node.log_tail()))
            notable = [l for l in node.log_text().splitlines()
                       if " ERROR " in l or " WARN " in l or "status=5" in l]
            if notable:
                report.sections.append((f"{node.name} log: errors, warnings, 5xx (last 30)",
                                        "\n".join(notable[-30:])))
    return report
