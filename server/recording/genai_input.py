"""What an agent asked a model, read from a request body into the GenAI conventions' shapes.

Input messages become `[{"role", "parts": [...]}]` with parts `text`, `tool_call` (the
assistant's earlier calls), `tool_call_response` (tool results fed back) and `reasoning`; tool
definitions become `[{"type": "function", "name", "description", "parameters"}]`. One shape
for all three APIs, so the scorers and the transcript read one thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracecard.server.recording.genai_output import (
    API_CHAT,
    API_MESSAGES,
    API_RESPONSES,
    arguments_value,
)


@dataclass
class ModelRequest:
    """The request's model, parameters and content, normalised."""

    model: str | None = None
    stream: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    system: list[dict[str, Any]] = field(default_factory=list)  # system instructions' parts
    tools: list[dict[str, Any]] = field(default_factory=list)


def _text_parts(content: Any) -> list[dict[str, Any]]:
    """Content given as a string or as a list of typed blocks (text kept, others by type)."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}] if content else []
    parts: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = str(block.get("type") or "")
        text = block.get("text")
        if isinstance(text, str) and kind in ("text", "input_text", "output_text"):
            parts.append({"type": "text", "content": text})
        elif kind == "refusal" and isinstance(block.get("refusal"), str):
            parts.append({"type": "refusal", "content": block["refusal"]})
        elif kind:
            parts.append({"type": kind})  # images, files, audio: named, not stored
    return parts


def _call_part(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    value = arguments_value(arguments)[0] if isinstance(arguments, str) else arguments
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": value}


def _result_part(call_id: Any, content: Any) -> dict[str, Any]:
    if isinstance(content, list):  # blocks: keep their text
        texts = [b.get("text") for b in content if isinstance(b, dict)]
        if all(isinstance(t, str) for t in texts):
            content = "".join(t for t in texts if isinstance(t, str))
    return {"type": "tool_call_response", "id": call_id, "response": content}


def _chat_messages(request: ModelRequest, body: dict[str, Any]) -> None:
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role") or "user")
        if role == "tool":
            part = _result_part(message.get("tool_call_id"), message.get("content"))
            request.messages.append({"role": "tool", "parts": [part]})
            continue
        parts = _text_parts(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                parts.append(
                    _call_part(call.get("id"), function.get("name"), function.get("arguments"))
                )
        request.messages.append({"role": role, "parts": parts})
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict):
            request.tools.append({"type": "function", **_definition(function, "parameters")})


def _definition(tool: dict[str, Any], schema_key: str) -> dict[str, Any]:
    found = {"name": tool.get("name"), "description": tool.get("description")}
    if tool.get(schema_key) is not None:
        found["parameters"] = tool[schema_key]
    return {k: v for k, v in found.items() if v is not None}


def _responses_messages(request: ModelRequest, body: dict[str, Any]) -> None:
    if isinstance(body.get("instructions"), str):
        request.system = _text_parts(body["instructions"])
    given = body.get("input")
    items = [{"role": "user", "content": given}] if isinstance(given, str) else given or []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "function_call":
            part = _call_part(item.get("call_id"), item.get("name"), item.get("arguments"))
            request.messages.append({"role": "assistant", "parts": [part]})
        elif kind == "function_call_output":
            part = _result_part(item.get("call_id"), item.get("output"))
            request.messages.append({"role": "tool", "parts": [part]})
        elif kind in (None, "message"):
            role = str(item.get("role") or "user")
            request.messages.append({"role": role, "parts": _text_parts(item.get("content"))})
        else:
            request.messages.append({"role": "assistant", "parts": [{"type": str(kind)}]})
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            kind = str(tool.get("type") or "function")
            request.tools.append({"type": kind, **_definition(tool, "parameters")})


def _anthropic_messages(request: ModelRequest, body: dict[str, Any]) -> None:
    request.system = _text_parts(body.get("system"))
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role") or "user")
        content = message.get("content")
        if not isinstance(content, list):
            request.messages.append({"role": role, "parts": _text_parts(content)})
            continue
        parts: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use":
                parts.append(_call_part(block.get("id"), block.get("name"), block.get("input")))
            elif kind == "tool_result":
                results.append(_result_part(block.get("tool_use_id"), block.get("content")))
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                parts.append({"type": "reasoning", "content": block["thinking"]})
            else:
                parts.extend(_text_parts([block]))
        if results:  # tool results travel in a user message; the conventions give them role tool
            request.messages.append({"role": "tool", "parts": results})
        if parts or not results:
            request.messages.append({"role": role, "parts": parts})
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            kind = "function" if "input_schema" in tool else str(tool.get("type") or "function")
            request.tools.append({"type": kind, **_definition(tool, "input_schema")})


_READERS = {
    API_CHAT: _chat_messages,
    API_RESPONSES: _responses_messages,
    API_MESSAGES: _anthropic_messages,
}


def read_request(api: str | None, body: Any) -> ModelRequest:
    """The normalised request; an unknown API or a non-object body gives the model alone."""
    request = ModelRequest()
    if not isinstance(body, dict):
        return request
    if isinstance(body.get("model"), str):
        request.model = body["model"]
    request.stream = body.get("stream") is True
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        if isinstance(body.get(key), int):
            request.max_tokens = body[key]
            break
    for key in ("temperature", "top_p"):
        value = body.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            setattr(request, key, float(value))
    if api is not None:
        _READERS[api](request, body)
    return request
