"""A run's replay index: the source run's recorded exchanges per upstream, in recorded order.

Built from stored spans when the experiment is created (off the hot path); serving from it is a
dictionary lookup and a pop. Equal keys are answered in the order they were recorded.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tracecard.server.replay.keys import RequestKey, distance, first_difference
from tracecard.server.replay.plan import UpstreamReplay

# Requests that change nothing upstream: once their recordings are used up, the last one is
# given again (an agent that reconnects or lists its tools once more has not diverged).
REUSABLE = frozenset(
    {
        "initialize",
        "server/discover",
        "ping",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
    }
)


@dataclass(slots=True)
class Recorded:
    """One recorded exchange: its key, the answer to give, and the span it came from."""

    key: RequestKey
    span_id: str
    message: dict[str, Any] | None = None  # MCP: {"result": ...} or {"error": {...}}
    status: int = 200  # plain HTTP
    headers: list[tuple[str, str]] = field(default_factory=list)  # plain HTTP
    body: bytes = b""  # plain HTTP
    usable: bool = True  # False: the stored answer cannot be given again (`unusable` says why)
    taken: bool = False
    events: list[bytes] | None = None  # a streamed model answer: its SSE events, in order
    unusable: str = "its recorded answer was cut at the payload cap"


@dataclass(slots=True)
class Miss:
    """A request with no recorded answer, and the recorded one closest to it (if any)."""

    request: RequestKey
    closest: Recorded | None
    reason: str

    def describe(self) -> str:
        text = f"no recorded answer for {self.request.describe()} ({self.reason})"
        if self.closest is not None:
            text += f"; closest recorded: {self.closest.key.describe()}"
            text += f" (span {self.closest.span_id})"
            where = self.differs_at()
            if where is not None:
                text += f"; first difference at {where}"
        return text

    def differs_at(self) -> str | None:
        """Where the request parts from its closest recording (a JSON path), if it has one."""
        if self.closest is None or self.closest.key.loose() != self.request.loose():
            return None
        return first_difference(self.closest.key.arguments, self.request.arguments)


class UpstreamIndex:
    """The recorded exchanges of one upstream in one source run, with its matching policy."""

    def __init__(self, policy: UpstreamReplay, recorded: list[Recorded]) -> None:
        self.policy = policy
        self.recorded = recorded
        self._exact: dict[RequestKey, deque[Recorded]] = {}
        self._loose: dict[tuple[str, str, str], deque[Recorded]] = {}
        self._sequence: dict[str, deque[Recorded]] = {}  # role -> recorded in order
        self._last: dict[RequestKey, Recorded] = {}
        for entry in recorded:
            self._last[entry.key] = entry
            self._exact.setdefault(entry.key, deque()).append(entry)
            self._loose.setdefault(entry.key.loose(), deque()).append(entry)
            self._sequence.setdefault(entry.key.role, deque()).append(entry)

    def take(self, key: RequestKey) -> Recorded | Miss:
        """The recorded answer for `key` (consumed), or a miss naming the closest neighbour."""
        if not key.arguments or self.policy.match == "ignore-args":
            found = self._pop(self._loose.get(key.loose()))
        elif self.policy.match == "sequence":
            found = self._next_in_sequence(key)
        else:
            found = self._pop(self._exact.get(key))
        if found is None and key.method in REUSABLE:
            found = self._last.get(key)  # a handshake or a listing: the same answer again
        if found is None:
            return self._miss(key, "not recorded, or every recording of it was already used")
        if not found.usable:
            return Miss(key, found, found.unusable)
        return found

    def _pop(self, queue: deque[Recorded] | None) -> Recorded | None:
        while queue:
            entry = queue.popleft()
            if not entry.taken:
                entry.taken = True
                return entry
        return None

    def _next_in_sequence(self, key: RequestKey) -> Recorded | None:
        queue = self._sequence.get(key.role)
        while queue and queue[0].taken:
            queue.popleft()
        if not queue:
            return None
        head = queue[0]
        if head.key.method.startswith("notifications/") and not key.method.startswith(
            "notifications/"
        ):
            queue.popleft()  # a recorded notification the agent did not send again: skip it
            return self._next_in_sequence(key)
        if head.key != key:
            return None
        head.taken = True
        queue.popleft()
        return head

    def _miss(self, key: RequestKey, reason: str) -> Miss:
        candidates = [e for e in self.recorded if e.key.role == key.role]
        same = [e for e in candidates if e.key.loose() == key.loose()]
        method = [e for e in candidates if e.key.method == key.method]
        pool = same or method or candidates
        if not pool:
            return Miss(key, None, reason)
        fresh = [e for e in pool if not e.taken] or pool
        closest = min(fresh, key=lambda e: distance(e.key.arguments, key.arguments))
        return Miss(key, closest, reason)


@dataclass
class RunReplay:
    """Everything one run replays: its source run and one index per replayed upstream."""

    run_id: str
    source_run_id: str
    upstreams: dict[str, UpstreamIndex]
    first_miss: Miss | None = None
    first_miss_span: str | None = None
    served: int = 0
    missed: int = 0
    live: int = 0
    # replayed MCP sessions: their recorded handshake, and the live session opened behind one
    handshakes: dict[str, dict[str, Any]] = field(default_factory=dict)
    live_sessions: dict[str, str] = field(default_factory=dict)

    def note_miss(self, miss: Miss, span_id: str | None) -> None:
        self.missed += 1
        if self.first_miss is None:
            self.first_miss, self.first_miss_span = miss, span_id

    def summary(self) -> dict[str, Any]:
        """What the run's finish reports (`replay` in `POST /api/runs/{id}/finish`)."""
        diverged = None
        if self.first_miss is not None:
            closest = self.first_miss.closest
            diverged = {
                "request": self.first_miss.request.describe(),
                "span_id": self.first_miss_span,
                "reason": self.first_miss.reason,
                "closest": None if closest is None else closest.key.describe(),
                "closest_span_id": None if closest is None else closest.span_id,
                "differs_at": self.first_miss.differs_at(),
            }
        return {
            "source_run": self.source_run_id,
            "recorded": self.served,
            "missed": self.missed,
            "live": self.live,
            "diverged": diverged,
        }
