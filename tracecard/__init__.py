"""tracecard: a trace-aware evaluation server for tool-calling agents.

Everything installed lives under this one namespace. The four layers are the repository's root
folders, linked here (`tracecard/server -> ../server`, ...) so that the source checkout, the
editable install and the wheel all import the same names: `tracecard.server`,
`tracecard.viewer`, `tracecard.scorers`, `tracecard.traces`. Imports point down only:
server -> viewer -> scorers -> traces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.2.0"
__all__ = ["AsyncTracecardClient", "TracecardClient", "TracecardError", "__version__"]

if TYPE_CHECKING:
    from tracecard.client import AsyncTracecardClient, TracecardClient, TracecardError


def __getattr__(name: str) -> object:
    # Lazy: `import tracecard.scorers` must not load httpx for a client it does not use.
    if name in ("AsyncTracecardClient", "TracecardClient", "TracecardError"):
        from tracecard import client

        return getattr(client, name)
    raise AttributeError(name)
