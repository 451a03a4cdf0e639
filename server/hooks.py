"""The server's extension points: typed hooks a run goes through, filled in by the app factory.

A feature never looks another up by name: `create_app` builds each feature and appends its
functions here, and the code that runs a hook reads a typed field. To follow a run's finish, read
`tracecard.server.runs.service.finish_run` and the hooks it calls, in this order:
`on_finish` (probes, scorers), `after_finish` (stop per-run processes), `root_events`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import Event

    from tracecard.server.evaluation.hooks import BlockDecision
    from tracecard.server.jobs.backoff import ModelBackoff
    from tracecard.server.mrtr.calls import LogicalCalls
    from tracecard.server.replay.environment import TrialEnvironment
    from tracecard.server.runs.registry import RunInfo
    from tracecard.server.runs.service import RunCreate
    from tracecard.server.runtime import Runtime
    from tracecard.traces.models import RunRow

# `POST /api/runs` with a suite/task/experiment: checks it and builds the run row.
ResolveRunCreate = Callable[["Runtime", "RunCreate"], Awaitable["RunRow"]]
# When a run finishes: may return extra fields for the run's view (scores, flags).
FinishHook = Callable[["Runtime", "RunRow"], Awaitable[dict[str, Any] | None]]
# After the finish hooks: stop per-run upstream processes (sandboxes are kept).
AfterFinishHook = Callable[["Runtime", "RunRow"], Awaitable[None]]
# Events for the run's root span (`gen_ai.evaluation.result`), from the finish hooks' extras.
RootEvents = Callable[["RunRow", dict[str, Any]], "list[Event]"]
# `GET /api/runs/{id}`: the run's stored scores.
RunScores = Callable[["Runtime", "RunRow"], Awaitable[dict[str, Any]]]
# A per-run upstream's `{task.NAME}`: the params of the run's task (empty: none).
TaskParams = Callable[["Runtime", str], Awaitable[dict[str, str]]]
# A per-run sandbox: the run's task's `fixture` (copied over the upstream's), or None.
TaskFixture = Callable[["Runtime", str], Awaitable[str | None]]
# Enforce mode, on the proxy's hot path (memory only): a decision to block a call, or None.
Enforcer = Callable[
    ["RunInfo", str, str, "dict[str, Any] | None", "dict[str, Any] | None"],
    "BlockDecision | None",
]

# On each agent tools/call of a task's run whose stored arguments are redacted (memory only):
# the task's argument-pattern rules checked on the arguments as sent, as JSON text (or None).
ArgumentChecks = Callable[["RunInfo", str, "dict[str, Any] | None"], "str | None"]


@dataclass
class Hooks:
    """Every extension point, typed; empty lists and `None` mean "no such feature"."""

    resolve_run_create: ResolveRunCreate | None = None
    on_finish: list[FinishHook] = field(default_factory=list)
    after_finish: list[AfterFinishHook] = field(default_factory=list)
    root_events: RootEvents | None = None
    run_scores: RunScores | None = None
    enforce: Enforcer | None = None
    argument_checks: ArgumentChecks | None = None
    task_params: TaskParams | None = None
    task_fixture: TaskFixture | None = None
    # A 429 from a `[limits.model]` upstream backs its key off for every worker (server/jobs).
    model_backoff: ModelBackoff | None = None
    # Replay (server/replay) on the proxy's and the stdio bridge's hot path, memory only.
    environment: TrialEnvironment | None = None
    # Multi round-trip requests (server/mrtr): the recorder's rounds -> one logical call.
    mrtr: LogicalCalls | None = None
