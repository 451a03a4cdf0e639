"""A stdio process has one handshake; its clients each declared their own capabilities.

tracecard performs a process's `initialize` once, declaring the capabilities of the agent whose
`initialize` started it. A shared process (not `per_run`) then serves later agents too, whose
capabilities may differ: the server's requests for a client feature (sampling, elicitation,
roots) reach only an agent that declared it, and an agent declaring more than the handshake did
is told in the log that the server does not know of it (`per_run` gives each run its own).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from tracecard.server.stdio.messages import Sink

log = logging.getLogger(__name__)

# the client capability a server->client request needs (MCP 2025-11-25, "Client features")
REQUEST_CAPABILITY = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}


def capable(sink: Sink, capabilities: Mapping[str, Any]) -> Sink:
    """`sink`, declining server requests for a capability its agent did not declare (the
    process then tries the next client, or refuses the request itself)."""

    async def deliver(message: dict[str, Any]) -> bool:
        needed = REQUEST_CAPABILITY.get(str(message.get("method"))) if "id" in message else None
        if needed is not None and needed not in capabilities:
            return False
        return await sink(message)

    return deliver


def declared_capabilities(initialize: Mapping[str, Any]) -> dict[str, Any]:
    """The capabilities an agent's `initialize` declares ({} when it declares none)."""
    params = initialize.get("params")
    capabilities = params.get("capabilities") if isinstance(params, dict) else None
    return capabilities if isinstance(capabilities, dict) else {}


def note_shared(
    upstream: str, slot_run: object, handshake: Mapping[str, Any], agent: Mapping[str, Any]
) -> None:
    """Log once per capability set when an agent of a shared process (`slot_run` None)
    declares what its handshake did not."""
    missing = sorted(set(agent) - set(handshake))
    if slot_run is not None or not missing:
        return
    key = (upstream, tuple(missing))
    if key in _noted:
        return
    _noted.add(key)
    log.warning(
        "upstream %s is shared: its server was started with the first agent's capabilities "
        "(%s); a later agent also declares %s, which that server does not know of "
        "(per_run = true gives each run its own process and handshake)",
        upstream,
        ", ".join(sorted(handshake)) or "none",
        ", ".join(missing),
    )


_noted: set[tuple[str, tuple[str, ...]]] = set()
