"""Redaction that keeps equality: secrets stored as keyed fingerprints, compared by fingerprint.

What is redacted (key patterns, query strings, form bodies, JSON inside MCP text content, probe
values, ingested OTLP attributes), that no stored span holds the secret, and how the matchers
judge a redacted value (equality by fingerprint, regex not evaluated with the reason).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.examples.helpers import HELPDESK
from tests.support.processes import mcp_tool_server
from tests.support.proxy import run_spans, tracecard_for
from tests.support.tracecard import RunningServer, runtime_of
from tracecard.server.recording.redaction import Redactor
from tracecard.server.settings import RecordingSettings
from tracecard.traces.secrets import fingerprint, is_fingerprint

KEY = b"k" * 32
SECRET = "abc123token"

SUITE = """
schema_version = 1
name = "{name}"

[[tasks]]
id = "login"
instruction = "Log in as ann with the token you were given."
upstreams = ["{upstream}"]

[[tasks.invocation.calls]]
tool = "login"
arguments = {{ user = "ann", access_token = {matcher} }}

[[tasks.outcome.probes]]
id = "account"
upstream = "{upstream}"
tool = "account"

[[tasks.outcome.predicates]]
probe = "account"
path = "$.structuredContent.password"
op = "{op}"
value = "{password}"
"""


def test_secret_keys_are_matched_as_words_not_substrings() -> None:
    """`auth` is a word of `authToken` and `x-auth`, not of `author`: the helpdesk's
    `add_comment.author` must stay readable while every spelling of a credential is hidden."""
    redactor = Redactor(RecordingSettings(), KEY)
    secret = [
        "oauth_token",
        "Authorization",
        "authToken",
        "x-api-key",
        "password_hint",  # a hint gives the password away: the `password` word decides
        "auth_token",
        "api-key",
        "X-Auth-Token",
        "x-auth",
        "secret_key",
        "pwd",
        "passphrase",
        "apiKey",
        "APIKey",
        "accesstoken",  # one lower-case word ending in `token`
        "client.credentials",
    ]
    clear = ["author", "authority", "authors", "user", "tokenizer", "keyword", "secretary"]
    node = {name: f"v-{name}" for name in secret + clear} | {"max_tokens": 100}
    out = redactor.value(node)
    assert out["max_tokens"] == 100  # numbers are kept: counts are no secrets
    assert [n for n in secret if out[n] != fingerprint(KEY, node[n])] == []
    assert [n for n in clear if out[n] != node[n]] == []
    text, _ = redactor.text({"comment": {"author": "u-101", "authToken": "t"}})
    assert json.loads(text)["comment"] == {"author": "u-101", "authToken": fingerprint(KEY, "t")}
    custom = Redactor(RecordingSettings(redact_keys=["pin", "session id"]), KEY)
    assert custom.value({"pin": "1234", "pinned": "x", "sessionId": "s", "token": "t"}) == {
        "pin": fingerprint(KEY, "1234"),
        "pinned": "x",
        "sessionId": fingerprint(KEY, "s"),
        "token": "t",
    }
    with pytest.raises(ValueError, match=r"redact_keys: 'api\[-_\]\?key' is not a word"):
        RecordingSettings(redact_keys=["api[-_]?key"])  # the old regex form says what changed


def test_fingerprints_keep_equality_and_need_the_key() -> None:
    assert fingerprint(KEY, SECRET) == fingerprint(KEY, SECRET)
    assert fingerprint(KEY, SECRET) != fingerprint(b"other" * 8, SECRET)
    assert fingerprint(KEY, "1") != fingerprint(KEY, 1)
    assert is_fingerprint(fingerprint(KEY, SECRET)) and not is_fingerprint("[REDACTED]")


def test_query_form_and_json_in_text_are_redacted() -> None:
    redactor = Redactor(RecordingSettings(), KEY)
    query = redactor.query("q=cats&api_key=s3cr3t&page=2")
    assert "s3cr3t" not in query and "q=cats" in query and "page=2" in query
    result = {"content": [{"type": "text", "text": json.dumps({"access_token": SECRET, "n": 1})}]}
    text, _ = redactor.text(result)
    assert SECRET not in text
    inner = json.loads(json.loads(text)["content"][0]["text"])
    assert inner == {"access_token": fingerprint(KEY, SECRET), "n": 1}
    assert redactor.plain().value({"token": SECRET}) == {"token": SECRET}  # redact = false


@pytest.fixture(scope="module")
def tracecard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("redaction")
    helpdesk = {
        "command": [sys.executable, str(HELPDESK / "server.py"), "{sandbox}"],
        "per_run": True,
        "fixture": str(HELPDESK / "fixture"),
    }
    with mcp_tool_server() as url:
        upstreams = {"tools": {"url": url}, "bench": {"url": url, "redact": False}}
        upstreams["helpdesk"] = helpdesk
        with tracecard_for(upstreams, folder) as running:
            yield running


def _run(server: RunningServer, upstream: str, matcher: str, op: str = "eq") -> dict[str, Any]:
    """Create a one-run experiment, play a correct agent (login with the token), finish it."""
    name = f"redaction-{upstream}-{abs(hash(matcher + op))}"
    suite = SUITE.format(
        name=name, upstream=upstream, matcher=matcher, op=op, password="hunter2-ann"
    )
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert (
            http.post(
                "/api/suites", content=suite, headers={"content-type": "application/toml"}
            ).status_code
            == 201
        )
        created = http.post(
            "/api/experiments", json={"suite": name, "config": {"name": "ok"}, "trials": 1}
        )
        assert created.status_code == 201, created.text
        run = created.json()["runs"][0]

        async def agent() -> None:
            async with httpx2.AsyncClient(timeout=30) as client_http:
                transport = streamable_http_client(run["urls"][upstream], http_client=client_http)
                async with Client(transport) as client:
                    await client.call_tool("login", {"user": "ann", "access_token": SECRET})

        asyncio.run(agent())
        finished = http.post(f"/api/runs/{run['id']}/finish", json={"final_answer": "done"})
        assert finished.status_code == 200, finished.text
        return {"id": run["id"], "scores": {s["component"]: s for s in finished.json()["scores"]}}


def test_equality_on_a_redacted_argument_passes_and_no_span_holds_the_secret(
    tracecard: RunningServer,
) -> None:
    run = _run(tracecard, "tools", f'"{SECRET}"')
    assert run["scores"]["invocation"]["value"] == 1.0
    assert run["scores"]["outcome"]["value"] == 1.0  # eq on the redacted probe value
    spans = run_spans(tracecard.url, run["id"])
    leaks = [
        (s["name"], k)
        for s in spans
        for k, v in s["attributes"].items()
        if SECRET in str(v) or "hunter2" in str(v)
    ]
    assert leaks == []
    key = runtime_of(tracecard).fingerprint_key
    login = next(s for s in spans if s["name"] == "tools/call login")
    assert json.loads(login["attributes"]["gen_ai.tool.call.arguments"])["access_token"] == (
        fingerprint(key, SECRET)
    )
    assert fingerprint(key, SECRET) in login["attributes"]["gen_ai.tool.call.result"]
    evidence = json.dumps(run["scores"]["outcome"]["evidence"])
    assert "hunter2" not in evidence and fingerprint(key, "hunter2-ann") in evidence


def test_a_wrong_secret_still_fails(tracecard: RunningServer) -> None:
    run = _run(tracecard, "tools", '"wrong-token"', op="eq")
    assert run["scores"]["invocation"]["value"] == 0.0


def test_regex_and_contains_on_a_redacted_value_are_not_evaluated(
    tracecard: RunningServer,
) -> None:
    run = _run(tracecard, "tools", '{ regex = "^abc" }', op="contains")
    invocation, outcome = run["scores"]["invocation"], run["scores"]["outcome"]
    assert invocation["value"] is None and invocation["passed"] is None
    why = invocation["evidence"]["expected"][0]["closest"][0]["why"]
    assert why == [
        "access_token: not evaluated: the argument is redacted (stored as a keyed fingerprint): "
        "a regex check cannot be evaluated on it; compare it with exact/one_of/eq, or set "
        "`redact = false` on the upstream"
    ]
    assert outcome["value"] is None and "redacted" in outcome["evidence"]["reason"]


def test_redact_false_keeps_fake_benchmark_credentials_in_clear(
    tracecard: RunningServer,
) -> None:
    run = _run(tracecard, "bench", '{ regex = "^abc" }', op="contains")
    assert run["scores"]["invocation"]["value"] == 1.0
    assert run["scores"]["outcome"]["value"] == 1.0
    spans = run_spans(tracecard.url, run["id"])
    assert SECRET in json.dumps(spans)


def test_ingested_otlp_attributes_are_redacted(tracecard: RunningServer, tmp_path: Path) -> None:
    run = httpx.post(f"{tracecard.url}/api/runs", json={}, timeout=10).json()
    attributes = [
        {"key": "tracecard.run.id", "value": {"stringValue": run["id"]}},
        {"key": "http.request.header.authorization", "value": {"stringValue": "Bearer zzz"}},
        {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": '{"password": "pw1"}'}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
    ]
    document = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": run["trace_id"],
                                "spanId": "00000000000000b2",
                                "name": "chat m",
                                "kind": 3,
                                "startTimeUnixNano": "1",
                                "endTimeUnixNano": "2",
                                "attributes": attributes,
                            }
                        ]
                    }
                ]
            }
        ]
    }
    assert httpx.post(f"{tracecard.url}/v1/traces", json=document, timeout=10).status_code == 200
    span = next(
        s for s in run_spans(tracecard.url, run["id"]) if s["span_id"] == "00000000000000b2"
    )
    stored = span["attributes"]
    assert is_fingerprint(stored["http.request.header.authorization"])
    assert is_fingerprint(json.loads(stored["gen_ai.tool.call.arguments"])["password"])
    assert stored["gen_ai.usage.input_tokens"] == 12


def test_the_viewer_shows_the_fingerprint_with_a_note(tracecard: RunningServer) -> None:
    run = _run(tracecard, "tools", f'"{SECRET}"')
    login = next(s for s in run_spans(tracecard.url, run["id"]) if s["name"] == "tools/call login")
    page = httpx.get(f"{tracecard.url}/runs/{run['id']}/spans/{login['span_id']}", timeout=10)
    assert page.status_code == 200
    key = runtime_of(tracecard).fingerprint_key
    assert fingerprint(key, SECRET) in page.text and 'id="redaction-note"' in page.text
    assert SECRET not in page.text


COMMENT_SUITE = """
schema_version = 1
name = "redaction-author"

[[tasks]]
id = "comment"
instruction = "Comment on T-1003 as u-101."
upstreams = ["helpdesk"]

[[tasks.invocation.calls]]
tool = "add_comment"
arguments = { ticket_id = "T-1003", author = { regex = "^u-101$" } }

[tasks.outcome]
probes = [{ id = "state", kind = "file", path = "state.json" }]
predicates = [
  { probe = "state", path = "$.tickets['T-1003'].comments[0].author", op = "eq", value = "u-101" },
]
"""


def test_the_helpdesk_comment_author_is_stored_in_clear_and_checkable(
    tracecard: RunningServer,
) -> None:
    """`add_comment.author` is no secret: a suite checks it with a regex and an outcome
    predicate, and an agent that comments as someone else fails both."""
    with httpx.Client(base_url=tracecard.url, timeout=60) as http:
        posted = http.post(
            "/api/suites", content=COMMENT_SUITE, headers={"content-type": "application/toml"}
        )
        assert posted.status_code == 201, posted.text
        created = http.post(
            "/api/experiments",
            json={"suite": "redaction-author", "config": {"name": "c"}, "trials": 2},
        )
        assert created.status_code == 201, created.text
        runs = created.json()["runs"]

        async def agent(url: str, author: str) -> None:
            async with httpx2.AsyncClient(timeout=30) as client_http:
                async with Client(streamable_http_client(url, http_client=client_http)) as client:
                    arguments = {"ticket_id": "T-1003", "text": "VPN works", "author": author}
                    result = await client.call_tool("add_comment", arguments)
                    assert not result.is_error, result

        scores = []
        for run, author in zip(runs, ("u-101", "agent"), strict=True):
            asyncio.run(agent(run["urls"]["helpdesk"], author))
            finished = http.post(f"/api/runs/{run['id']}/finish", json={"final_answer": "ok"})
            assert finished.status_code == 200, finished.text
            scores.append({s["component"]: s for s in finished.json()["scores"]})
    right, wrong = scores
    assert right["invocation"]["value"] == 1.0 and right["outcome"]["passed"] is True
    assert wrong["invocation"]["value"] == 0.0 and wrong["outcome"]["passed"] is False
    spans = run_spans(tracecard.url, runs[0]["id"])
    call = next(s for s in spans if s["name"] == "tools/call add_comment")
    assert json.loads(call["attributes"]["gen_ai.tool.call.arguments"])["author"] == "u-101"
    assert '"author":"u-101"' in call["attributes"]["gen_ai.tool.call.result"]
