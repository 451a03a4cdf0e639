"""The helpdesk MCP server: tickets, users and files in `state.json` of a state directory.

Read-only and destructive tools carry `ToolAnnotations`, which tracecard's safety gate reads.
Started by server.py (the command tracecard runs); a state directory without `state.json` is
initialised from `fixture/`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

FIXTURE = Path(__file__).resolve().parent / "fixture" / "state.json"
PAGE_SIZE = 5
PRIORITIES = ("low", "normal", "high", "urgent")
STATUSES = ("open", "pending", "closed")

READ_ONLY = ToolAnnotations(readOnlyHint=True)
WRITES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True)

server = MCPServer(
    "helpdesk",
    instructions="A helpdesk: tickets (T-####), users (u-###) and files. "
    "list_tickets is paginated: follow next_cursor until it is null.",
    log_level="ERROR",
)
STATE_DIR = Path(os.environ.get("HELPDESK_STATE_DIR", "."))
_WRITING = threading.RLock()  # one read-modify-write of state.json at a time


class HelpdeskError(ToolError):
    """A request the helpdesk refuses; the message is returned as a tool error."""


def _state_path() -> Path:
    return STATE_DIR / "state.json"


def load_state() -> dict[str, Any]:
    """The current state (initialised from the fixture on first use)."""
    path = _state_path()
    if not path.exists():
        with _WRITING:
            if not path.exists():  # a reader never sees a half-copied fixture
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".state-", suffix=".json")
                os.close(fd)
                shutil.copyfile(FIXTURE, tmp)
                os.replace(tmp, path)
    state: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return state


@contextlib.contextmanager
def _editing() -> Iterator[dict[str, Any]]:
    """Load, change and save the state as one step (saved only when the change succeeds).

    The MCP SDK runs tools in worker threads, and an agent's parallel calls of one turn run at
    once: without the lock, two `update_ticket`s each read the old state and the last save
    loses the other's change (the demo's `escalate-globex` failed its outcome that way).
    """
    with _WRITING:
        state = load_state()
        yield state
        save_state(state)


def save_state(state: dict[str, Any]) -> None:
    """Write the state atomically (a reader never sees half a file)."""
    path = _state_path()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".state-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=2, sort_keys=True)
    os.replace(tmp, path)


def _ticket(state: dict[str, Any], ticket_id: str) -> dict[str, Any]:
    ticket = state["tickets"].get(ticket_id.strip().upper())
    if ticket is None:
        raise HelpdeskError(f"no ticket {ticket_id!r}")
    return dict(ticket)


def _summary(ticket: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "title", "status", "priority", "requester", "assignee", "tags")
    return {k: ticket[k] for k in keys}


def _page(items: list[dict[str, Any]], cursor: str | None) -> tuple[list[dict[str, Any]], Any]:
    start = int(cursor) if cursor else 0
    end = start + PAGE_SIZE
    return items[start:end], (str(end) if end < len(items) else None)


# --- read-only tools ---------------------------------------------------------------------------


@server.tool(annotations=READ_ONLY)
def list_tickets(
    status: str | None = None,
    priority: str | None = None,
    requester: str | None = None,
    cursor: str | None = None,
) -> dict[str, Any]:
    """List tickets, oldest first, 5 per page; filter by status, priority or requester (user id).
    Pass `next_cursor` back as `cursor` for the next page."""
    tickets = [
        _summary(t)
        for t in load_state()["tickets"].values()
        if (status is None or t["status"] == status)
        and (priority is None or t["priority"] == priority)
        and (requester is None or t["requester"] == requester)
    ]
    page, next_cursor = _page(tickets, cursor)
    return {"tickets": page, "total": len(tickets), "next_cursor": next_cursor}


@server.tool(annotations=READ_ONLY)
def get_ticket(ticket_id: str) -> dict[str, Any]:
    """One ticket with its comments."""
    return _ticket(load_state(), ticket_id)


@server.tool(annotations=READ_ONLY)
def search_tickets(query: str) -> dict[str, Any]:
    """Tickets whose title contains the query (case-insensitive)."""
    needle = query.strip().lower()
    found = [_summary(t) for t in load_state()["tickets"].values() if needle in t["title"].lower()]
    return {"tickets": found, "count": len(found)}


@server.tool(annotations=READ_ONLY)
def find_users(query: str | None = None, team: str | None = None) -> dict[str, Any]:
    """Users whose name or email contains the query, optionally on one team."""
    needle = (query or "").strip().lower()
    users = [
        u
        for u in load_state()["users"].values()
        if (not needle or needle in u["name"].lower() or needle in u["email"].lower())
        and (team is None or u["team"] == team)
    ]
    return {"users": users, "count": len(users)}


@server.tool(annotations=READ_ONLY)
def list_files(ticket_id: str | None = None) -> dict[str, Any]:
    """Files in the helpdesk (knowledge base and attachments), optionally of one ticket."""
    files = [
        {"name": f["name"], "ticket": f["ticket"], "size": len(f["content"])}
        for f in load_state()["files"].values()
        if ticket_id is None or f["ticket"] == ticket_id
    ]
    return {"files": files}


@server.tool(annotations=READ_ONLY)
def read_file(name: str) -> str:
    """The text of a file."""
    file = load_state()["files"].get(name)
    if file is None:
        raise HelpdeskError(f"no file {name!r}")
    return str(file["content"])


# --- tools that change the state ---------------------------------------------------------------


@server.tool(annotations=WRITES)
def create_ticket(title: str, requester: str, priority: str = "normal") -> dict[str, Any]:
    """Open a new ticket for a requester (user id)."""
    with _editing() as state:
        if requester not in state["users"]:
            raise HelpdeskError(f"no user {requester!r}: look the requester up with find_users")
        if priority not in PRIORITIES:
            raise HelpdeskError(f"priority must be one of {', '.join(PRIORITIES)}")
        ticket_id = f"T-{state['next_ticket']}"
        state["next_ticket"] += 1
        ticket = {
            "id": ticket_id,
            "title": title.strip(),
            "status": "open",
            "priority": priority,
            "requester": requester,
            "assignee": None,
            "tags": [],
            "comments": [],
        }
        state["tickets"][ticket_id] = ticket
        return ticket


@server.tool(annotations=WRITES)
def update_ticket(
    ticket_id: str,
    status: str | None = None,
    priority: str | None = None,
    assignee: str | None = None,
    add_tags: list[str] | None = None,
) -> dict[str, Any]:
    """Change a ticket's status, priority or assignee (user id), or add tags."""
    with _editing() as state:
        ticket = _ticket(state, ticket_id)
        if status is not None:
            if status not in STATUSES:
                raise HelpdeskError(f"status must be one of {', '.join(STATUSES)}")
            ticket["status"] = status
        if priority is not None:
            if priority not in PRIORITIES:
                raise HelpdeskError(f"priority must be one of {', '.join(PRIORITIES)}")
            ticket["priority"] = priority
        if assignee is not None:
            if assignee not in state["users"]:
                raise HelpdeskError(f"no user {assignee!r}: assign by user id (find_users)")
            ticket["assignee"] = assignee
        for tag in add_tags or []:
            if tag not in ticket["tags"]:
                ticket["tags"].append(tag)
        state["tickets"][ticket["id"]] = ticket
        return ticket


@server.tool(annotations=WRITES)
def add_comment(ticket_id: str, text: str, author: str = "agent") -> dict[str, Any]:
    """Add a comment to a ticket."""
    with _editing() as state:
        ticket = _ticket(state, ticket_id)
        ticket["comments"].append({"author": author, "text": text})
        state["tickets"][ticket["id"]] = ticket
        return ticket


@server.tool(annotations=DESTRUCTIVE)
def delete_ticket(ticket_id: str) -> str:
    """Delete a ticket for good (its history is lost)."""
    with _editing() as state:
        ticket = _ticket(state, ticket_id)
        del state["tickets"][ticket["id"]]
        return f"deleted {ticket['id']}"


@server.tool(annotations=DESTRUCTIVE)
def delete_file(name: str) -> str:
    """Delete a file or attachment for good."""
    with _editing() as state:
        if state["files"].pop(name, None) is None:
            raise HelpdeskError(f"no file {name!r}")
        return f"deleted {name}"


@server.tool(annotations=DESTRUCTIVE)
def deactivate_user(user_id: str) -> str:
    """Deactivate a user account (they can no longer sign in)."""
    with _editing() as state:
        if user_id not in state["users"]:
            raise HelpdeskError(f"no user {user_id!r}")
        state["users"][user_id]["active"] = False
        return f"deactivated {user_id}"


def serve(state_dir: str | Path, http_port: int | None = None) -> None:
    """Serve the helpdesk for one state directory: stdio, or streamable HTTP on `http_port`."""
    global STATE_DIR
    STATE_DIR = Path(state_dir)
    load_state()  # initialise from the fixture before the first request
    if http_port is not None:
        server.run("streamable-http", host="127.0.0.1", port=http_port)
    else:
        server.run()
