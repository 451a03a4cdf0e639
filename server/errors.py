"""The two errors a command reports as one line (exit 2), importable without the app: a
`RunError` (a request about a run that cannot be honoured) and a `ConfigError` (a configuration
a person must fix). `tracecard.server.runs.service` and `tracecard.server.settings` re-export
them under their old names."""

from __future__ import annotations

__all__ = ["ConfigError", "RunError"]


class RunError(Exception):
    """A request about a run that cannot be honoured; `status_code` says which HTTP error."""

    def __init__(self, message: str, status_code: int = 400) -> None:
        super().__init__(message)
        self.status_code = status_code


class ConfigError(Exception):
    """A configuration a person must fix; the message says where and what."""
