"""Every tool a suite names, checked against what its servers list (`tools/list`).

A typo in a suite (`raed_file`) must be an error before any agent starts, not an agent failure:
an expectation no call can meet, a probe that cannot run, a safety rule that never fires. Pure:
the caller lists each upstream's tools (or says it could not) and gets the findings back.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

from .spec import ToolProbe
from .suite import Suite, Task

__all__ = ["ToolFinding", "ToolReference", "check_tools", "tool_references"]

_GLOB = frozenset("*?[")


@dataclass(frozen=True)
class ToolReference:
    """One place a suite names a tool: the task, the field path, and where the tool may live."""

    task_id: str
    field: str  # e.g. "invocation.calls[0].tool"
    tool: str
    upstreams: tuple[str, ...]  # the upstreams that may offer it (empty: every configured one)


@dataclass(frozen=True)
class ToolFinding:
    """An unknown tool (`error`) or an upstream that could not be asked (`warning`)."""

    level: str  # "error" | "warning"
    message: str


def _task_refs(task: Task) -> Iterator[ToolReference]:
    here = tuple(task.upstreams)
    for i, tool in enumerate(task.tools or []):
        yield ToolReference(task.id, f"tools[{i}]", tool, here)
    specs = [("", task.invocation, task.outcome)] + [
        (f"turns[{t}].", turn.invocation, turn.outcome) for t, turn in enumerate(task.turns)
    ]
    for base, invocation, outcome in specs:
        if invocation is not None:
            for i, call in enumerate(invocation.calls):
                where = (call.upstream,) if call.upstream else here
                yield ToolReference(task.id, f"{base}invocation.calls[{i}].tool", call.tool, where)
        if outcome is not None:
            for i, probe in enumerate(outcome.probes):
                if isinstance(probe, ToolProbe):
                    field = f"{base}outcome.probes[{i}].tool"
                    yield ToolReference(task.id, field, probe.tool, (probe.upstream,))
    for i, rule in enumerate(task.safety.rules):
        if rule.tool is not None and not _GLOB & set(rule.tool):
            yield ToolReference(task.id, f"safety.rules[{i}].tool", rule.tool, here)


def tool_references(suite: Suite) -> list[ToolReference]:
    """Every exact tool name the suite uses (globs and regexes in safety rules are skipped)."""
    return [ref for task in suite.tasks for ref in _task_refs(task)]


def check_tools(
    suite: Suite,
    listings: Mapping[str, Sequence[str] | None],
    source: str = "",
    unreachable: Mapping[str, str] | None = None,
    verifier_only: Mapping[str, Collection[str]] | None = None,
) -> list[ToolFinding]:
    """Findings for `suite` given each upstream's tool names (None: not an MCP tool server,
    e.g. a plain HTTP upstream, so nothing to check). `unreachable` maps upstreams that could
    not be asked to why: a warning each, and their tools are not checked. `verifier_only` maps
    upstreams to their verifier-only tools (listed, but hidden from agents): only probes may
    name them."""
    unreachable = unreachable or {}
    where = f"{source}: " if source else ""
    findings = _verifier_only_findings(suite, listings, verifier_only or {}, where)
    findings += [
        ToolFinding(
            "warning",
            f"{where}upstream {name!r} could not be asked for its tools ({why}); "
            "its tool names are not checked",
        )
        for name, why in sorted(unreachable.items())
    ]
    for ref in tool_references(suite):
        names = ref.upstreams or tuple(listings)
        known = [listings[n] for n in names if n in listings and listings[n] is not None]
        if not known or any(n in unreachable for n in names):
            continue
        offered = sorted({tool for tools in known for tool in tools or ()})
        if ref.tool in offered:
            continue
        guess = difflib.get_close_matches(ref.tool, offered, n=1, cutoff=0.6)
        hint = f" (did you mean {guess[0]!r}?)" if guess else ""
        servers = ", ".join(repr(n) for n in names if n in listings)
        findings.append(
            ToolFinding(
                "error",
                f"{where}task {ref.task_id!r}: {ref.field}: unknown tool {ref.tool!r} on "
                f"{servers}{hint}; the server lists: {', '.join(offered) or 'no tools'}",
            )
        )
    return findings


def _verifier_only_findings(
    suite: Suite,
    listings: Mapping[str, Sequence[str] | None],
    verifier_only: Mapping[str, Collection[str]],
    where: str,
) -> list[ToolFinding]:
    """A verifier-only tool the upstream does not list (a typo would hide nothing), and one an
    agent is expected to call or is allowed (it never sees it)."""
    findings = [
        ToolFinding(
            "warning",
            f"{where}upstream {name!r}: verifier_tools names {tool!r}, which its tools/list "
            "does not have",
        )
        for name, tools in sorted(verifier_only.items())
        if listings.get(name) is not None
        for tool in sorted(tools)
        if tool not in (listings[name] or ())
    ]
    for ref in tool_references(suite):
        if ".probes[" in ref.field or ref.field.startswith("outcome.probes"):
            continue
        names = ref.upstreams or tuple(verifier_only)
        hiding = [n for n in names if ref.tool in verifier_only.get(n, ())]
        if hiding:
            findings.append(
                ToolFinding(
                    "error",
                    f"{where}task {ref.task_id!r}: {ref.field}: {ref.tool!r} is a verifier-only "
                    f"tool of {', '.join(map(repr, hiding))} (verifier_tools): agents never see "
                    "it, only probes may use it",
                )
            )
    return findings
