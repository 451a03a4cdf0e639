"""Tool-definition drift: did every run of a comparison see the same tools?

Each run's `tools/list` answers are in its trace (the proxy records them). A tool's definition is
its name plus a hash of its input/output schema and annotations; when two runs (trials of one
experiment, or the two experiments of a comparison) saw different definitions of one tool, the
numbers compare different environments, and the report names the tool and the runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from tracecard.traces import semconv as sc

from ._json import parse_json_text
from .calls import reported_only
from .types import Span

__all__ = ["DriftedTool", "ToolDrift", "definition_hash", "tool_definitions", "tool_drift"]

# (upstream, tool) -> definition hash
Definitions = dict[tuple[str, str], str]
ABSENT = "absent"  # the version of a tool a run's server did not list


def definition_hash(tool: Mapping[str, Any]) -> str:
    """16 hex digits of SHA-256 over the tool's schemas and annotations (sorted-key JSON)."""
    parts = {k: tool.get(k) for k in ("inputSchema", "outputSchema", "annotations")}
    digest = hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS, default=str))
    return digest.hexdigest()[:16]


def tool_definitions(spans: Iterable[Span]) -> Definitions:
    """Each tool's definition as the run's `tools/list` answers gave it (the last one wins)."""
    found: Definitions = {}
    for span in spans:
        attrs = span.get("attributes") or {}
        if attrs.get(sc.MCP_METHOD_NAME) != "tools/list" or reported_only(attrs):
            continue
        listed = parse_json_text(attrs.get(sc.RPC_RESULT)).value
        tools = listed.get("tools") if isinstance(listed, dict) else None
        for tool in tools if isinstance(tools, list) else []:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                upstream = str(attrs.get(sc.UPSTREAM) or "")
                found[(upstream, tool["name"])] = definition_hash(tool)
    return found


@dataclass(frozen=True)
class DriftedTool:
    """One tool seen with more than one definition: which runs saw which."""

    upstream: str
    tool: str
    versions: dict[str, list[str]]  # definition hash -> run ids (sorted)


@dataclass(frozen=True)
class ToolDrift:
    """The tools whose definitions differ between runs (empty: no drift seen)."""

    tools: list[DriftedTool] = field(default_factory=list)
    runs_without_listing: list[str] = field(default_factory=list)

    @property
    def drifted(self) -> bool:
        return bool(self.tools)

    def describe(self) -> str:
        """One line per drifted tool, for people."""
        return "; ".join(
            f"{t.upstream}/{t.tool}: "
            + ", ".join(
                f"{h} in {len(r)} run(s) ({', '.join(r[:3])})" for h, r in t.versions.items()
            )
            for t in self.tools
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "drifted": self.drifted,
            "tools": [
                {"upstream": t.upstream, "tool": t.tool, "versions": t.versions} for t in self.tools
            ],
            "runs_without_listing": self.runs_without_listing,
        }


def tool_drift(per_run: Mapping[str, Sequence[Span]]) -> ToolDrift:
    """Compare the tool definitions every run saw (runs that never listed tools are named)."""
    seen: dict[tuple[str, str], dict[str, list[str]]] = {}
    silent = []
    listed: dict[str, Definitions] = {}
    for run_id, spans in per_run.items():
        definitions = tool_definitions(spans)
        if not definitions:
            silent.append(run_id)
            continue
        listed[run_id] = definitions
        for key, digest in definitions.items():
            seen.setdefault(key, {}).setdefault(digest, []).append(run_id)
    upstreams_of = {run_id: {u for u, _ in d} for run_id, d in listed.items()}
    for key, versions in seen.items():  # a tool one run's server listed and another's did not
        for run_id, definitions in listed.items():
            if key[0] in upstreams_of[run_id] and key not in definitions:
                versions.setdefault(ABSENT, []).append(run_id)
    tools = [
        DriftedTool(upstream, tool, {h: sorted(r) for h, r in sorted(versions.items())})
        for (upstream, tool), versions in sorted(seen.items())
        if len(versions) > 1
    ]
    return ToolDrift(tools, sorted(silent))
