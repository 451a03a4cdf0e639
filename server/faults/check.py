"""A fault plan checked against the server before any run exists: every rule must name a
configured upstream, and a tool (not a glob) that one of them lists; a rule that reaches only
model upstreams (`/llm/`, named, not by `*`) must have a kind a model call takes."""

from __future__ import annotations

import fnmatch

from tracecard.server.evaluation.tool_lists import list_upstream_tools
from tracecard.server.faults.plan import MODEL_CALL_KINDS, FaultPlan
from tracecard.server.runs.service import RunError
from tracecard.server.runtime import Runtime
from tracecard.server.settings import MODEL_KINDS


async def check_faults(runtime: Runtime, plan: FaultPlan) -> None:
    """A one-line `RunError` (422) naming the first rule that names nothing there is."""
    upstreams = runtime.settings.upstreams
    configured = sorted(n for n, u in upstreams.items() if u.kind not in MODEL_KINDS)
    models = sorted(n for n, u in upstreams.items() if u.kind in MODEL_KINDS)
    for rule in plan.rules:
        matched = [n for n in configured if fnmatch.fnmatchcase(n, rule.upstream)]
        named = [
            n for n in models if rule.upstream != "*" and fnmatch.fnmatchcase(n, rule.upstream)
        ]
        if not matched and not named:
            raise RunError(
                f"fault rule {rule.id!r}: no upstream matches {rule.upstream!r} "
                f"(configured: {', '.join(configured + models) or 'none'})",
                422,
            )
        if not matched and rule.kind not in MODEL_CALL_KINDS:
            raise RunError(
                f"fault rule {rule.id!r}: {rule.kind} does not apply to model upstream "
                f"{', '.join(named)} (a model call takes {', '.join(sorted(MODEL_CALL_KINDS))})",
                422,
            )
        if any(c in rule.tool for c in "*?["):
            continue
        mcp = [n for n in matched if upstreams[n].kind == "mcp"]
        if not mcp:
            continue
        listings = await list_upstream_tools(runtime.settings, mcp, runtime.tool_lists)
        known = sorted({t for names in listings.names().values() if names for t in names})
        if known and rule.tool not in known:
            raise RunError(
                f"fault rule {rule.id!r}: no tool {rule.tool!r} on {', '.join(mcp)} "
                f"(tools: {', '.join(known)})",
                422,
            )
