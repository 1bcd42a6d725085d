"""Fixtures for the multi-node tests; the machinery is in floe_multinode.py, whose
docstring lists the environment variables."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from floe_multinode import Cluster, base_database_url, floe_bin, live_nodes


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


def _cluster_maker(binary: Path, tmp: Path, request, made: list):
    prefix = request.module.__name__.rsplit(".", 1)[-1].replace("test_", "")[:12]

    def make(size: int = 2) -> Cluster:
        work = Path(tempfile.mkdtemp(prefix=f"{prefix}.", dir=tmp))
        c = Cluster(binary, work, prefix, size)
        made.append(c)
        return c.start()
    return make


@pytest.fixture(scope="module")
def cluster_factory(floe_binary, _mn_tmp, request):
    """make(size=2) -> a started Cluster on a fresh database; all stopped at module end."""
    made: list[Cluster] = []
    yield _cluster_maker(floe_binary, _mn_tmp, request, made)
    for c in made:
        c.stop()


@pytest.fixture
def fresh_cluster(floe_binary, _mn_tmp, request):
    """Like cluster_factory, but the clusters are stopped at the end of the test."""
    made: list[Cluster] = []
    yield _cluster_maker(floe_binary, _mn_tmp, request, made)
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
