"""A stateless client's capabilities, declared to the stdio process that serves it.

A 2026-07-28 client sends no `initialize`: it declares its capabilities in the `_meta` of every
request (`io.modelcontextprotocol/clientCapabilities`). A stdio server speaks the session
protocol and learns a client's capabilities once, in tracecard's handshake with it, and some
servers offer tools by them (server-everything lists `get-roots-list` only to a client with
`roots`). So before a stateless request is forwarded, the process serving it should have
declared that client's capabilities:

- no process yet: the one that starts declares them;
- a process that has forwarded nothing since its handshake (started by `server/discover`, which
  carries no capabilities, or handed over already started) and declared others: it is replaced
  by one that declares them; it has served no request, so nothing is lost;
- a process that has served requests and declared others (a shared process, its first client's
  capabilities): kept, and the difference is logged once (`handshake.note_shared`), as for
  session clients; `per_run = true` gives each run its own process.

tracecard's own traffic (probes, turn notices) never decides a handshake. The capabilities make
the server offer what the client can use; its questions during a call reach the client as
`input_required` rounds (server/mrtr/bridge.py). A warm process (server/stdio/warm.py) is handed
over at `server/discover`, which declares no capabilities: a client that declares some later has
it replaced once (docs/stdio.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracecard.server.recording.recorder import Exchange
from tracecard.server.stdio import handshake
from tracecard.server.stdio.messages import MODERN_META_PREFIX
from tracecard.server.stdio.pool import StdioUpstreams
from tracecard.traces import semconv

__all__ = ["CAPABILITIES_META", "declare", "declared"]

CAPABILITIES_META = MODERN_META_PREFIX + "clientCapabilities"


def declared(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """The capabilities a stateless request declares in its `_meta` (None: it declares none)."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    capabilities = meta.get(CAPABILITIES_META) if isinstance(meta, dict) else None
    return capabilities if isinstance(capabilities, dict) else None


async def declare(pool: StdioUpstreams, upstream: str, exchange: Exchange, message: Any) -> None:
    """Make the process that will serve `message` one whose handshake declared the client's
    capabilities, where that is possible without losing anything (see the module's doc)."""
    if exchange.role == semconv.ROLE_VERIFIER or not isinstance(message, dict):
        return
    capabilities = declared(message)
    if capabilities is None:
        return
    slot = pool.slot(upstream, exchange.run)
    process = slot.process
    if process is None or not process.alive:
        slot.client_capabilities = capabilities
        return
    if process.client_capabilities == capabilities:
        return
    if process.forwarded:
        handshake.note_shared(upstream, slot.run, process.client_capabilities, capabilities)
        return
    async with slot.lock:  # process_for starts the replacement under the same lock
        if slot.process is not process or process.forwarded:
            return
        slot.client_capabilities = capabilities
        slot.process = None
    await process.stop(grace=0.5)
