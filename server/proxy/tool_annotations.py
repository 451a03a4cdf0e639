"""Tool annotations as an upstream's `tools/list` gave them, for tools/call spans and enforce mode.

The HTTP proxy and the stdio bridge both keep them per upstream (tool name -> annotations, `{}`
for a tool that declares none); a tool never listed has none (None)."""

from __future__ import annotations

from typing import Any

Annotations = dict[str, dict[str, dict[str, Any]]]  # upstream -> tool -> annotations


def remember(known: Annotations, upstream: str, result: Any) -> None:
    """Keep the annotations of each tool a `tools/list` result names."""
    if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
        return
    tools = known.setdefault(upstream, {})
    for tool in result["tools"]:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            annotations = tool.get("annotations")
            tools[tool["name"]] = annotations if isinstance(annotations, dict) else {}


def of_call(known: Annotations, upstream: str, message: dict[str, Any]) -> dict[str, Any] | None:
    """The annotations of the tool a `tools/call` request names (None: not listed, not a call)."""
    if message.get("method") != "tools/call":
        return None
    params = message.get("params")
    tool = params.get("name") if isinstance(params, dict) else None
    return known.get(upstream, {}).get(str(tool))
