"""`floe serve --config FILE`: settings from one TOML file, below flags and environment
variables, with unknown keys refused."""
from __future__ import annotations

import os
import subprocess

import requests

from conftest import ApiClient, access_token, floe_bin


def catalogs(server) -> list[str]:
    api = ApiClient(server.url, access_token(server.url))
    r = api.call("GET", "/api/management/v1/catalogs")
    assert r.status_code == 200, r.text
    return sorted(c["name"] for c in r.json()["catalogs"])


def test_settings_come_from_the_file(floe_server_factory, tmp_path):
    config = tmp_path / "floe.toml"
    config.write_text('default-catalog = "from_file"\nevents = false\nlog = "warn"\n')
    server = floe_server_factory(["--config", str(config)])
    assert catalogs(server) == ["from_file"]
    # events = false took effect: the catalog's creation left no event.
    api = ApiClient(server.url, access_token(server.url))
    page = api.call("POST", "/v1/from_file/events", {}).json()
    assert page["events"] == []


def test_environment_and_flags_win_over_the_file(floe_server_factory, tmp_path):
    config = tmp_path / "floe.toml"
    config.write_text('default-catalog = "from_file"\n')
    by_env = floe_server_factory(["--config", str(config)], {"FLOE_DEFAULT_CATALOG": "from_env"})
    assert catalogs(by_env) == ["from_env"]
    by_flag = floe_server_factory(["--config", str(config), "--default-catalog", "from_flag"],
                                  {"FLOE_DEFAULT_CATALOG": "from_env"})
    assert catalogs(by_flag) == ["from_flag"]


def test_a_bad_file_stops_the_start_with_a_clear_message(tmp_path):
    for text, message in [
        ('bnd = "127.0.0.1:1"\n', "unknown setting 'bnd'"),
        ('[server]\nbind = "x"\n', "unknown setting 'server'"),
        ("bind = [1]\n", "setting 'bind' must be a string, number or boolean"),
        ("bind = \n", "not valid TOML"),
        ('db-pool-size = "many"\n', "db-pool-size"),
    ]:
        config = tmp_path / "bad.toml"
        config.write_text(text)
        out = subprocess.run([str(floe_bin()), "serve", "--config", str(config),
                              "--data-dir", str(tmp_path / "data")],
                             capture_output=True, text=True, timeout=30,
                             env={**os.environ, "NO_COLOR": "1"})
        assert out.returncode == 2, (text, out.returncode, out.stderr)
        assert message in out.stderr, (text, out.stderr)
    missing = subprocess.run([str(floe_bin()), "serve", "--config", str(tmp_path / "none.toml")],
                             capture_output=True, text=True, timeout=30)
    assert missing.returncode == 2 and "reading the config file" in missing.stderr
