"""`[limits.model.NAME]` and `[limits.upstream.NAME]` as DBOS queues: one queue per limited key,
its `global_concurrency` and rate limit kept in the database, so they hold across every worker.

A cell goes on one queue: the tightest limit among the keys it uses (every model upstream, and
the upstreams its task names). A cell under two limits is held by the tighter one only.
"""

from __future__ import annotations

from typing import Any

from tracecard.server.jobs.engine import QUEUE
from tracecard.server.settings import LimitSettings, Settings

__all__ = ["cell_queue", "limit_queues"]


def _queue(kind: str, name: str) -> str:
    return f"{QUEUE}:{kind}:{name}"


def _options(limit: LimitSettings | None, worker_concurrency: int) -> dict[str, Any]:
    options: dict[str, Any] = {"worker_concurrency": worker_concurrency}
    if limit is not None and limit.concurrency is not None:
        options["global_concurrency"] = limit.concurrency
        # DBOS refuses a per-worker limit above the global one
        options["worker_concurrency"] = min(worker_concurrency, limit.concurrency)
    if limit is not None and limit.per_minute is not None:
        options["limiter"] = {"limit": limit.per_minute, "period": 60.0}
    return options


def limit_queues(settings: Settings, worker_concurrency: int) -> dict[str, dict[str, Any]]:
    """Queue name -> `register_queue` options: the plain queue, and one per declared limit."""
    queues = {QUEUE: _options(None, worker_concurrency)}
    for kind, limits in settings.limits.items():
        for name, limit in limits.items():
            queues[_queue(kind, name)] = _options(limit, worker_concurrency)
    return queues


def cell_queue(settings: Settings, task_upstreams: list[str], tag: str | None = None) -> str:
    """The queue of a cell whose task uses `task_upstreams` (every model upstream counts)."""
    from tracecard.server.settings import MODEL_KINDS

    candidates: list[tuple[float, str]] = []
    for name, limit in settings.limits.get("model", {}).items():
        upstream = settings.upstreams.get(name)
        if upstream is not None and upstream.kind in MODEL_KINDS:
            candidates.append((limit.concurrency or float("inf"), _queue("model", name)))
    for name, limit in settings.limits.get("upstream", {}).items():
        if name in task_upstreams:
            candidates.append((limit.concurrency or float("inf"), _queue("upstream", name)))
    queue = min(candidates)[1] if candidates else QUEUE
    return f"{queue}@{tag}" if tag else queue
