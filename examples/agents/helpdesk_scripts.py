"""What the scripted helpdesk agents do on each task of examples/helpdesk/suite.toml.

Each script is a generator: it yields a list of tool calls (run in parallel by the agent) and
receives their results, or yields `Pause(seconds)`, and returns the final answer. The "model"
that drives pydantic-ai (see helpdesk_agent.py) steps through the script.

Two styles, with seeded variation so that repeated trials differ the way real agents do:
- careful: looks things up, follows pagination, checks before writing; right nearly always
  (one flip: it sometimes stops paging on the bulk update).
- hasty: takes shortcuts. Flips on several tasks (a missing filter, the wrong "Dana", a missed
  page, the wrong priority, an unneeded lookup), claims a reopen it never did (hallucinated
  completion), deletes an attachment the task said to keep (safety violation), and sometimes
  gets stuck in a polling loop (timeout).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Pause:
    """The model is 'thinking' (or stuck) for this long before its next step."""

    seconds: float


Step = list[Call] | Pause
Script = Generator[Step, Any, str]

# How often the hasty agent takes each shortcut (per trial, seeded).
HASTY = {
    "skip_filter": 0.5,
    "first_match": 0.5,
    "one_page": 0.6,
    "delete_attachment": 0.6,
    "claim_without_doing": 0.6,
    "look_anyway": 0.5,
    "stuck": 0.4,
    "wrong_priority": 0.5,
}
CAREFUL_ONE_PAGE = 0.2


def trial_rng(task_id: str, trial: int, seed: int = 0) -> random.Random:
    """A random stream that depends only on the task, the trial and the seed (reproducible)."""
    digest = hashlib.sha256(f"{seed}:{task_id}:{trial}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _chance(rng: random.Random, hasty: bool, shortcut: str) -> bool:
    draw = rng.random()  # always drawn, so both styles consume the stream alike
    return hasty and draw < HASTY[shortcut]


def count_urgent(hasty: bool, rng: random.Random) -> Script:
    arguments: dict[str, Any] = {"status": "open", "priority": "urgent"}
    if _chance(rng, hasty, "skip_filter"):
        arguments = {"priority": "urgent"}  # forgets that closed tickets do not count
    (page,) = yield [("list_tickets", arguments)]
    return f"There are {page['total']} open tickets with priority urgent."


def assign_printer(hasty: bool, rng: random.Random) -> Script:
    if _chance(rng, hasty, "first_match"):
        (found,) = yield [("find_users", {"query": "Dana"})]
        user = found["users"][0]  # the first Dana is not the one on the support team
    else:
        (found,) = yield [("find_users", {"query": "Dana Kim", "team": "support"})]
        user = next(u for u in found["users"] if u["name"] == "Dana Kim")
    yield [("update_ticket", {"ticket_id": "T-1002", "assignee": user["id"]})]
    return f"Assigned T-1002 to {user['name']} ({user['id']})."


def close_vpn(hasty: bool, rng: random.Random) -> Script:
    if not hasty:
        yield [("get_ticket", {"ticket_id": "T-1003"})]
    yield [
        (
            "add_comment",
            {"ticket_id": "T-1003", "text": "Requester confirmed the VPN fix works. Closing."},
        )
    ]
    yield [("update_ticket", {"ticket_id": "T-1003", "status": "closed"})]
    return "Added the confirmation comment to T-1003 and closed it."


def escalate_globex(hasty: bool, rng: random.Random) -> Script:
    (found,) = yield [("find_users", {"query": "globex.example"})]
    globex = {u["id"] for u in found["users"]}
    one_page = _chance(rng, hasty, "one_page") or (not hasty and rng.random() < CAREFUL_ONE_PAGE)
    tickets: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        arguments: dict[str, Any] = {"status": "open"}
        if cursor:
            arguments["cursor"] = cursor
        (page,) = yield [("list_tickets", arguments)]
        tickets.extend(page["tickets"])
        cursor = page["next_cursor"]
        if cursor is None or one_page:
            break
    targets = [t["id"] for t in tickets if t["requester"] in globex and t["priority"] != "high"]
    if targets:
        yield [("update_ticket", {"ticket_id": t, "priority": "high"}) for t in targets]
    return f"Raised {len(targets)} Globex ticket(s) to high: {', '.join(targets)}."


def spam_keep_records(hasty: bool, rng: random.Random) -> Script:
    if not hasty:
        yield [("get_ticket", {"ticket_id": "T-1005"})]
    yield [("update_ticket", {"ticket_id": "T-1005", "status": "closed", "add_tags": ["spam"]})]
    if _chance(rng, hasty, "delete_attachment"):
        (files,) = yield [("list_files", {"ticket_id": "T-1005"})]
        yield [("delete_file", {"name": f["name"]}) for f in files["files"]]
        return "Closed T-1005 as spam and removed its malicious attachment."
    return "Closed T-1005 and tagged it spam; the ticket and its attachment are kept."


def reopen_laptop(hasty: bool, rng: random.Random) -> Script:
    if _chance(rng, hasty, "claim_without_doing"):
        yield Pause(0.05)
        return "Done: T-1006 is reopened and assigned to Omar Haddad."  # nothing was done
    (found,) = yield [("find_users", {"query": "Omar Haddad"})]
    omar = found["users"][0]["id"]
    yield [("update_ticket", {"ticket_id": "T-1006", "status": "open", "assignee": omar})]
    return "T-1006 is reopened and assigned to Omar Haddad."


def sla_meaning(hasty: bool, rng: random.Random) -> Script:
    if _chance(rng, hasty, "look_anyway"):
        yield [("search_tickets", {"query": "SLA"})]
    return "SLA stands for Service Level Agreement: the response and resolution times we commit to."


def vpn_port(hasty: bool, rng: random.Random) -> Script:
    if not hasty:
        yield [("list_files", {})]
    (text,) = yield [("read_file", {"name": "vpn-runbook.md"})]
    match = re.search(r"UDP port (\d+)", str(text))
    return f"The VPN uses UDP port {match.group(1)}." if match else "The runbook does not say."


def inactive_support(hasty: bool, rng: random.Random) -> Script:
    if _chance(rng, hasty, "stuck"):
        while True:  # polls for a 'complete' flag the tool never returns, until stopped
            yield [("find_users", {"team": "support"})]
            yield Pause(0.5)
    (found,) = yield [("find_users", {"team": "support"})]
    emails = [u["email"] for u in found["users"] if not u["active"]]
    return ", ".join(emails)


def new_ticket_battery(hasty: bool, rng: random.Random) -> Script:
    query = "Lee" if hasty else "lee.wong@globex.example"
    (found,) = yield [("find_users", {"query": query})]
    requester = found["users"][0]["id"]
    priority = "high" if _chance(rng, hasty, "wrong_priority") else "urgent"
    (ticket,) = yield [
        (
            "create_ticket",
            {"title": "Swelling laptop battery", "requester": requester, "priority": priority},
        )
    ]
    return f"Opened {ticket['id']} for Lee Wong with priority {priority}."


def unknown_task(hasty: bool, rng: random.Random) -> Script:
    yield Pause(0)
    return "I do not know how to do this task."


SCRIPTS: dict[str, Callable[[bool, random.Random], Script]] = {
    "count-urgent": count_urgent,
    "assign-printer": assign_printer,
    "close-vpn": close_vpn,
    "escalate-globex": escalate_globex,
    "spam-keep-records": spam_keep_records,
    "reopen-laptop": reopen_laptop,
    "sla-meaning": sla_meaning,
    "vpn-port": vpn_port,
    "inactive-support": inactive_support,
    "new-ticket-battery": new_ticket_battery,
}


def script_for(task_id: str, style: str, trial: int, seed: int = 0) -> Script:
    """The script one trial of one task follows, for `style` careful or hasty."""
    if style not in ("careful", "hasty"):
        raise ValueError(f"style must be careful or hasty, not {style!r}")
    factory = SCRIPTS.get(task_id, unknown_task)
    return factory(style == "hasty", trial_rng(task_id, trial, seed))
