"""A scripted OpenAI-compatible model for the workers' tests: it answers after a pause, counts
the requests in flight and notes when each arrived; with `retry_after_s` it answers the first
request 429 with that `Retry-After`."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = json.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
).encode()
LIMITED = b'{"error": {"message": "rate limited", "type": "rate_limit_exceeded"}}'


class ScriptedModel:
    """Serves `/v1/chat/completions` on 127.0.0.1 (`url`) until `close`."""

    def __init__(self, pause_s: float = 0.0, retry_after_s: float | None = None) -> None:
        self.pause_s = pause_s
        self.retry_after_s = retry_after_s
        self.in_flight = 0
        self.most = 0
        self.requests = 0
        self.arrivals: list[float] = []  # time.monotonic() of each request
        self.limited_at: float | None = None  # when the 429 was answered
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with model._lock:
                    model.arrivals.append(time.monotonic())
                    model.in_flight += 1
                    model.requests += 1
                    model.most = max(model.most, model.in_flight)
                    limit = model.retry_after_s is not None and model.limited_at is None
                    if limit:
                        model.limited_at = time.monotonic()
                if not limit:
                    time.sleep(model.pause_s)
                with model._lock:
                    model.in_flight -= 1
                self.send_response(429 if limit else 200)
                if limit:
                    self.send_header("Retry-After", f"{model.retry_after_s:g}")
                body = LIMITED if limit else ANSWER
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
