"""Settings: TOML file, environment overrides, and the refusal to expose tracecard tokenless."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.in_process import in_process_tracecard
from tracecard.server.settings import ConfigError, Settings, find_config, load_settings

TOML = """
upstream_timeout_s = 5
[upstreams.tools]
url = "http://127.0.0.1:9000/mcp"
headers = { "X-Key" = "abc" }
[upstreams.api]
url = "http://127.0.0.1:9001"
kind = "http"
[recording]
payload_cap_bytes = 1000
"""


def test_toml_then_environment(tmp_path: Path) -> None:
    path = tmp_path / "tracecard.toml"
    path.write_text(TOML)
    environ = {
        "TRACECARD_UPSTREAMS__TOOLS__URL": "http://127.0.0.1:9999/mcp",
        "TRACECARD_RECORDING__INJECT_TRACEPARENT": "false",
        "TRACECARD_MAX_BODY_BYTES": "1234",
        "TRACECARD_TEST_IGNORED": "x",
    }
    settings = load_settings(path, environ=environ)
    assert settings.upstreams["tools"].url == "http://127.0.0.1:9999/mcp"
    assert settings.upstreams["tools"].headers == {"X-Key": "abc"}
    assert settings.upstreams["api"].kind == "http"
    assert settings.recording.payload_cap_bytes == 1000
    assert settings.recording.inject_traceparent is False
    assert settings.max_body_bytes == 1234 and settings.upstream_timeout_s == 5
    assert settings.config_path == str(path)


def test_bad_config_names_the_file_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[upstreams.x]\nurl = "http://a"\ncommand = ["b"]\n')
    with pytest.raises(ConfigError, match=r"bad\.toml:1: upstreams\.x: give exactly one of"):
        load_settings(path, environ={})
    with pytest.raises(ConfigError, match="no such config file"):
        load_settings(tmp_path / "missing.toml", environ={})


def test_binding_beyond_loopback_needs_a_token() -> None:
    with pytest.raises(ConfigError, match="0.0.0.0 exposes tracecard.*API token"):
        load_settings(environ={"TRACECARD_HOST": "0.0.0.0"})
    assert load_settings(environ={"TRACECARD_HOST": "0.0.0.0", "TRACECARD_API_TOKEN": "t"})


def test_with_a_token_the_api_and_the_proxy_need_it(tmp_path: Path) -> None:
    settings = Settings(db=f"sqlite:///{tmp_path / 'db.sqlite'}", api_token="s3cret")
    with in_process_tracecard(settings) as tracecard:
        http = tracecard.client
        assert http.get("/healthz").status_code == 200  # open for probes
        assert http.post("/api/runs", json={}).status_code == 401
        assert http.post("/mcp/x", json={}).status_code == 401
        bearer = {"Authorization": "Bearer s3cret"}
        assert http.post("/api/runs", json={}, headers=bearer).status_code == 201
        header = {"Tracecard-Token": "s3cret"}
        assert http.post("/mcp/x", json={}, headers=header).status_code == 404


def test_a_browser_signs_in_with_the_token(tmp_path: Path) -> None:
    settings = Settings(db=f"sqlite:///{tmp_path / 'db.sqlite'}", api_token="s3cret")
    with in_process_tracecard(settings) as tracecard:
        browser = tracecard.client
        page = browser.get("/", headers={"Accept": "text/html"})
        assert page.status_code == 303 and page.headers["location"] == "/login"
        form = browser.get("/login")
        assert form.status_code == 200 and 'name="token"' in form.text.replace("=token", '="token"')
        assert "script-src" not in form.headers["content-security-policy"]  # no script at all
        wrong = browser.post("/login", data={"token": "guess"})
        assert wrong.status_code == 401 and "not this server" in wrong.text
        assert "tracecard_token" not in browser.cookies
        right = browser.post("/login", data={"token": "s3cret"})
        assert right.status_code == 303 and "HttpOnly" in right.headers["set-cookie"]
        assert browser.get("/api/runs/none").status_code == 404  # signed in: past the guard


def test_an_agents_environment_does_not_break_the_settings() -> None:
    # tracecard run gives agents TRACECARD_RUN_ID etc.; a server started there must still load
    environ = {"TRACECARD_RUN_ID": "abc", "TRACECARD_INSTRUCTION": "x", "TRACECARD_PORT": "9123"}
    assert load_settings(environ=environ).port == 9123


def test_environment_values_take_the_models_types() -> None:
    # #14 item 9: a token of digits is a string, not a JSON number the model then refuses
    settings = load_settings(environ={"TRACECARD_API_TOKEN": "20261201", "TRACECARD_PORT": "81"})
    assert settings.api_token == "20261201" and settings.port == 81


def test_an_environment_error_names_the_variable() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"TRACECARD_PORT": "eighty"})
    assert str(caught.value).startswith("TRACECARD_PORT: port: Input should be a valid integer")
    with pytest.raises(ConfigError, match=r"^TRACECARD_UPSTREAMS__T__PER_RUN: upstreams\.t\."):
        load_settings(
            environ={
                "TRACECARD_UPSTREAMS__T__URL": "http://a",
                "TRACECARD_UPSTREAMS__T__PER_RUN": "sometimes",
            }
        )


def test_a_list_that_is_not_json_names_its_variable() -> None:
    # #14.9: was "SettingsError: error parsing value for field ..." (an unexpected error)
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"TRACECARD_ALLOWED_HOSTS": "tracecard.lan"})
    assert str(caught.value).startswith("TRACECARD_ALLOWED_HOSTS: allowed_hosts: not valid JSON")
    assert "written as JSON" in str(caught.value)
    nested = {"TRACECARD_UPSTREAMS__T__URL": "http://a", "TRACECARD_UPSTREAMS__T__HEADERS": "x"}
    with pytest.raises(ConfigError, match=r"^TRACECARD_UPSTREAMS__T__HEADERS: upstreams\.t\.head"):
        load_settings(environ=nested)  # the bad one of the two, not the table's first
    assert load_settings(environ={"TRACECARD_ALLOWED_HOSTS": '["tracecard.lan"]'}).allowed_hosts


def test_a_flag_error_names_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"^--port: port: Input should be a valid integer"):
        load_settings(environ={}, port="x")


def test_off_loopback_refusal_is_in_plain_words() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"TRACECARD_HOST": "0.0.0.0"})
    message = str(caught.value)
    assert message.startswith("settings: binding 0.0.0.0 exposes tracecard")
    assert "(top)" not in message and "Value error" not in message


def test_a_config_error_has_the_line_and_the_path_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # #14 item 11: the same `file:line: field: reason` format as a suite error
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tc.toml").write_text(
        '[upstreams.a]\nurl = "http://a"\n\n[upstreams.b]\nurl = "http://b"\nper_rn = true\n'
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_settings("conf/tc.toml", environ={})
    assert str(caught.value) == "conf/tc.toml:6: upstreams.b.per_rn: unknown field"
    (tmp_path / "broken.toml").write_text('port = 1\nhost = "a\n')
    with pytest.raises(ConfigError, match=r"^broken\.toml:2: not valid TOML"):
        load_settings("broken.toml", environ={})


def test_tracecard_toml_is_found_in_the_folder_or_a_parent(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert find_config(tmp_path / "a" / "b") is None or not str(
        find_config(tmp_path / "a" / "b")
    ).startswith(str(tmp_path))
    (tmp_path / "a" / "tracecard.toml").write_text("port = 1\n")
    assert find_config(tmp_path / "a" / "b") == (tmp_path / "a" / "tracecard.toml").resolve()
    assert find_config(tmp_path / "a") == (tmp_path / "a" / "tracecard.toml").resolve()
