"""HTTP errors the proxy answers with itself, in the JSON API's error shape."""

from __future__ import annotations

from typing import Any

import orjson

from tracecard.server.asgi import BodyTooLarge, Send, send_bytes


class ProxyError(Exception):
    """An HTTP error the proxy answers with before (or instead of) forwarding."""

    def __init__(self, status: int, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.extra = extra

    @classmethod
    def too_large(cls, error: BodyTooLarge) -> ProxyError:
        return cls(413, str(error), limit=error.limit)


async def send_error(send: Send, error: ProxyError) -> None:
    """The error as `{"status_code", "detail", ...}`, the same shape as the JSON API's errors."""
    body = orjson.dumps({"status_code": error.status, "detail": error.detail, **error.extra})
    await send_bytes(send, error.status, body)
