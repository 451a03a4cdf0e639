"""A web page the user visits tries to get into tracecard, in real headless Chromium.

A real tracecard (uvicorn) proxies a scripted upstream that logs every request it gets. Two
attacks, each a page that tries every request and writes what it saw into `window.__results`:
- cross-origin: the page is served by a second HTTP server on 127.0.0.2 (another origin), and
  posts text/plain bodies with fetch, submits forms, and reads spans;
- DNS rebinding: Chromium resolves `evil.example` to 127.0.0.1 (`--host-resolver-rules`); the
  page's first load comes from the attacker's server, after which its same-origin requests reach
  tracecard with `Host: evil.example:PORT`, as after a rebind.
Each request must reach tracecard and be refused (seen in the network log), the page must never
see a recorded payload, and nothing may be stored or forwarded. Chromium's own Local Network
Access checks are turned off so that tracecard's guard, not the browser, is what is tested.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlmodel import select

from tests.servers.fake_upstream import fake_upstream
from tests.support.proxy import MCP_HEADERS, rpc, tracecard_for
from tests.support.tracecard import RunningServer
from tests.viewer.test_browser import ARGS, CHROMIUM
from tracecard.traces.models import RunRow, VerdictRow
from tracecard.traces.store import Store

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]

SECRET = "payload-only-the-user-may-read"
EVIL_HOST = "127.0.0.2"
# Shared by both pages: try `attempts`, keep what the page could see of each answer.
ATTACK_JS = """
async function attempt(name, url, init) {
  try {
    const answer = await fetch(url, init);
    let text = "";
    try { text = await answer.text(); } catch (e) {}
    return {name, status: answer.status, type: answer.type, text};
  } catch (e) { return {name, error: String(e)}; }
}
function post(form, action, fields, enctype) {
  const sink = document.createElement("iframe");
  sink.name = "sink-" + form;
  document.body.append(sink);
  const element = document.createElement("form");
  element.method = "post"; element.action = action; element.target = sink.name;
  if (enctype) element.enctype = enctype;
  for (const [key, value] of Object.entries(fields)) {
    const input = document.createElement("input");
    input.name = key; input.value = value; element.append(input);
  }
  document.body.append(element);
  element.submit();
  return new Promise(done => {
    sink.addEventListener("load", () => done({name: form}), {once: true});
    setTimeout(() => done({name: form, timeout: true}), 5000);
  });
}
"""
RUN_JS = """
(async () => {
  const results = [];
  for (const [name, path, init] of FETCHES) results.push(await attempt(name, T + path, init));
  for (const [name, path, fields, type] of POSTS) {
    results.push(await post(name, T + path, fields, type));
  }
  window.__results = results;
})();
"""


def _plain(body: str) -> dict[str, Any]:
    """A fetch a page may send anywhere without a preflight: POST, text/plain, no-cors."""
    return {
        "method": "POST",
        "mode": "no-cors",
        "headers": {"content-type": "text/plain"},
        "body": body,
    }


def _page(base: str, run: str, forms: bool) -> str:
    """The attack page: `base` is where it sends its requests ('' for its own origin)."""
    call = json.dumps(rpc("tools/call", {"name": "delete_everything", "arguments": {}}))
    as_json = {"method": "POST", "headers": {"content-type": "application/json"}, "body": call}
    fetches = [
        ("spans", f"/api/runs/{run}/spans", {}),
        ("spans-no-cors", f"/api/runs/{run}/spans", {"mode": "no-cors"}),  # as <script src=>
        ("trace-page", f"/runs/{run}", {}),
        ("new-run", "/api/runs", _plain('{"config": {"name": "evil"}}')),
        ("mcp", "/mcp/tools", _plain(call)),
        ("mcp-json", "/mcp/tools", as_json),
        ("http-tool", "/http/api/write", _plain(call)),
        ("finish", f"/api/runs/{run}/finish", _plain('{"final_answer": "forged"}')),
        ("otlp", "/v1/traces", _plain("{}")),
    ]
    # an HTML form posts across origins with no script reading anything; text/plain forms can
    # spell a JSON body (`name={"final_answer": "forged", "x": "` + `=` + value `"}`)
    posts = [
        ("verdict-form", f"/runs/{run}/verdicts", {"component": "outcome", "agree": "no"}, ""),
        (
            "finish-form",
            f"/api/runs/{run}/finish",
            {'{"final_answer": "forged", "x": "': '"}'},
            "text/plain",
        ),
    ]
    steps = f"const T = {json.dumps(base)};\nconst FETCHES = {json.dumps(fetches)};\n"
    steps += f"const POSTS = {json.dumps(posts if forms else [])};\n"
    return f"<!doctype html><html><body><script>{ATTACK_JS}{steps}{RUN_JS}</script></body></html>"


@contextlib.contextmanager
def attacker_site(pages: dict[str, str], port: int = 0) -> Iterator[str]:
    """A second, unrelated HTTP server on 127.0.0.2: the attacker's web site."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path.split("?")[0], "").encode()
            self.send_response(200 if body else 404)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer((EVIL_HOST, port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{EVIL_HOST}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, Any, str]]:
    """tracecard with one recorded call whose result holds SECRET; the upstream's log emptied."""
    folder = tmp_path_factory.mktemp("hostile")
    with fake_upstream() as fake:
        upstreams = {
            "tools": {"url": f"{fake.url}/mcp"},
            "api": {"url": f"{fake.url}/api", "kind": "http"},
        }
        with tracecard_for(upstreams, folder) as server:
            run = httpx.post(f"{server.url}/api/runs", json={}, timeout=10).json()["id"]
            recorded = httpx.post(
                f"{server.url}/runs/{run}/mcp/tools",
                json=rpc("tools/call", {"name": "echo", "arguments": {"text": SECRET}}),
                headers=MCP_HEADERS,
                timeout=10,
            )
            assert recorded.status_code == 200 and SECRET in recorded.text
            spans = httpx.get(f"{server.url}/api/runs/{run}/spans", timeout=10)
            assert SECRET in spans.text
            fake.received.clear()
            yield server, fake, run


@contextlib.contextmanager
def chromium(tmp_path: Path, *extra: str) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=[
                *ARGS,
                "--disable-features=LocalNetworkAccessChecks,PrivateNetworkAccessSendPreflights",
                *extra,
            ],
        )
        try:
            yield context
        finally:
            context.close()


def _network_log(page: Any, origin: str) -> list[tuple[str, str, int]]:
    seen: list[tuple[str, str, int]] = []
    page.on(
        "response",
        lambda r: (
            seen.append((r.request.method, r.url.removeprefix(origin), r.status))
            if r.url.startswith(origin)
            else None
        ),
    )
    return seen


def _stored(server: RunningServer, run: str) -> tuple[int, list[str], str]:
    """(runs, verdict notes, the run's status) as stored."""
    store = Store(server.settings.db)
    try:
        with store.session() as session:
            runs = len(session.exec(select(RunRow)).all())
            notes = [v.note for v in session.exec(select(VerdictRow)).all()]
            row = session.get(RunRow, run)
            assert row is not None
            return runs, notes, row.status
    finally:
        store.dispose()


def test_a_page_on_another_origin_gets_nothing(target: Any, tmp_path: Path) -> None:
    server, fake, run = target
    before = _stored(server, run)
    with (
        attacker_site({"/": _page(server.url, run, forms=True)}) as site,
        chromium(tmp_path) as ctx,
    ):
        page = ctx.new_page()
        seen = _network_log(page, server.url)
        page.goto(f"{site}/")
        page.wait_for_function("window.__results !== undefined", timeout=30_000)
        results = page.evaluate("window.__results")
    assert all(SECRET not in str(r) for r in results)  # the page read no recorded payload
    outcome = {r["name"]: r for r in results}
    # CORS reads fail in the page (no CORS header, and tracecard refuses them: unit-tested)
    for name in ["spans", "trace-page", "mcp-json"]:
        assert outcome[name]["error"] == "TypeError: Failed to fetch", outcome[name]
    # every other request reached tracecard and was refused (the network log has the status):
    # by its Origin, or by Sec-Fetch-Site for the GET that sends no Origin
    by_path = {(m, p): s for m, p, s in seen}
    assert by_path[("GET", f"/api/runs/{run}/spans")] == 403
    for path in ["/api/runs", "/mcp/tools", "/http/api/write", f"/api/runs/{run}/finish"]:
        assert by_path[("POST", path)] == 403, path
    assert by_path[("POST", "/v1/traces")] == 403
    assert by_path[("POST", f"/runs/{run}/verdicts")] == 403
    assert all(status in (403, 415) for _, _, status in seen), seen
    assert fake.received == []  # nothing forwarded to any upstream
    assert _stored(server, run) == before and before[2] == "pending"  # nothing stored


def test_a_rebound_name_gets_nothing(target: Any, tmp_path: Path) -> None:
    server, fake, run = target
    before = _stored(server, run)
    port = server.url.rsplit(":", 1)[1]
    rebound = f"http://evil.example:{port}"
    rule = "--host-resolver-rules=MAP evil.example 127.0.0.1"
    with attacker_site({"/": _page("", run, forms=False)}) as site, chromium(tmp_path, rule) as ctx:
        page = ctx.new_page()
        seen = _network_log(page, rebound)
        # The first load of the page comes from the attacker's own server; every later request
        # of the page resolves evil.example to 127.0.0.1, as after a rebind.
        page.route(f"{rebound}/", lambda route: route.fulfill(response=route.fetch(url=f"{site}/")))
        page.goto(f"{rebound}/")
        page.wait_for_function("window.__results !== undefined", timeout=30_000)
        results = page.evaluate("window.__results")
    assert all(SECRET not in str(r) for r in results)
    readable = {r["name"]: r for r in results}
    # same-origin for the browser, so the page reads tracecard's refusals: all say why
    for name in ["spans", "trace-page", "mcp-json"]:
        assert readable[name]["status"] == 403, readable[name]
        assert "DNS rebinding" in readable[name]["text"]
    requests = {(m, p) for m, p, _ in seen if p != "/"}
    assert ("GET", f"/api/runs/{run}/spans") in requests and ("POST", "/mcp/tools") in requests
    assert all(status == 403 for _, path, status in seen if path != "/"), seen
    assert fake.received == []  # nothing forwarded to any upstream
    assert _stored(server, run) == before and before[2] == "pending"  # nothing stored


def test_the_viewer_itself_still_works(target: Any, tmp_path: Path) -> None:
    server, fake, _ = target
    # a scored run of its own (the form is offered only beside scores), the shared one untouched
    suite = {"schema_version": 1, "name": "hostile-greet", "tasks": [
        {"id": "greet", "instruction": "Say hi.", "completion": {"checks": [{"contains": "hi"}]}},
    ]}  # fmt: skip
    assert httpx.post(f"{server.url}/api/suites", json=suite, timeout=10).status_code == 201
    created = httpx.post(
        f"{server.url}/api/runs", json={"suite": "hostile-greet", "task_id": "greet"}, timeout=10
    )
    run = created.json()["id"]
    finished = httpx.post(
        f"{server.url}/api/runs/{run}/finish", json={"final_answer": "done"}, timeout=30
    )
    assert finished.status_code in (200, 201) and finished.json().get("scores"), finished.text
    fake.received.clear()
    runs, notes, _ = _stored(server, run)
    with chromium(tmp_path) as ctx:
        page = ctx.new_page()
        page.goto(f"{server.url}/runs/{run}")
        form = page.locator("form.verdict-form")
        form.get_by_label("right").check()
        form.get_by_label("Note").fill("checked in Chromium")
        form.get_by_role("button", name="Record verdict").click()
        page.locator("#verdicts .verdicts").get_by_text("checked in Chromium").wait_for()
    assert _stored(server, run)[:2] == (runs, [*notes, "checked in Chromium"])
    assert fake.received == []
