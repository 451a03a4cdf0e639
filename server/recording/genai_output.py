"""What a model answered, read from a response body of the three model APIs tracecard proxies.

OpenAI Chat Completions (`chat.completions`), OpenAI Responses (`responses`) and Anthropic
Messages (`messages`) answer in different shapes; each is read into one `ModelOutput`, which
renders as the GenAI conventions' output messages. Streams build the same object event by event
(`genai_stream`). Nothing here raises on odd input: a field of the wrong type is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

API_CHAT = "chat.completions"
API_RESPONSES = "responses"
API_MESSAGES = "messages"


def api_of(kind: str, path: str) -> str | None:
    """Which model API a proxied path is, or None for another endpoint (models, embeddings)."""
    path = path.rstrip("/")
    if kind == "openai":
        if path.endswith("chat/completions"):
            return API_CHAT
        if path.endswith("responses"):
            return API_RESPONSES
    elif kind == "anthropic" and path.endswith("messages"):
        return API_MESSAGES
    return None


def arguments_value(raw: str) -> tuple[Any, bool]:
    """Tool-call arguments as an object when they are JSON (else the text); whether they were."""
    if not raw.strip():
        return {}, True
    try:
        return orjson.loads(raw), True
    except orjson.JSONDecodeError:
        return raw, False


@dataclass
class ToolCall:
    """A call the model asked for; `arguments` is the JSON text as the model wrote it."""

    id: str | None = None
    name: str = ""
    arguments: str = ""
    complete: bool = True  # False: the stream stopped before the call was whole

    def view(self) -> dict[str, Any]:
        value, parsed = arguments_value(self.arguments)
        view: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": value}
        if not (parsed and self.complete):
            view["complete"] = False
        return view


@dataclass
class Choice:
    """One output message: text, refusal, reasoning and tool calls in the order they came."""

    text: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: dict[int, ToolCall] = field(default_factory=dict)  # by stream index
    finish_reason: str | None = None

    def call(self, index: int) -> ToolCall:
        found = self.tool_calls.get(index)
        if found is None:
            found = self.tool_calls[index] = ToolCall()
        return found

    def message(self) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        if self.reasoning:
            parts.append({"type": "reasoning", "content": "".join(self.reasoning)})
        if self.text:
            parts.append({"type": "text", "content": "".join(self.text)})
        if self.refusal:
            parts.append({"type": "refusal", "content": "".join(self.refusal)})
        for _index, call in sorted(self.tool_calls.items()):
            parts.append({"type": "tool_call", **call.view()})
        message: dict[str, Any] = {"role": "assistant", "parts": parts}
        if self.finish_reason is not None:
            message["finish_reason"] = self.finish_reason
        return message


@dataclass
class ModelOutput:
    """Everything a `chat` span records about the answer."""

    response_id: str | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    choices: dict[int, Choice] = field(default_factory=dict)
    error_message: str | None = None  # the upstream's own error text (429, 500, error event)
    error_type: str | None = None
    complete: bool = True  # a stream that ended without its end event is not
    first_output_ns: int | None = None  # streams: when the first output chunk arrived

    def choice(self, index: int = 0) -> Choice:
        found = self.choices.get(index)
        if found is None:
            found = self.choices[index] = Choice()
        return found

    @property
    def finish_reasons(self) -> list[str]:
        return [c.finish_reason for _i, c in sorted(self.choices.items()) if c.finish_reason]

    def messages(self) -> list[dict[str, Any]]:
        return [choice.message() for _i, choice in sorted(self.choices.items())]

    def tool_calls(self) -> list[dict[str, Any]]:
        return [
            call.view()
            for _i, choice in sorted(self.choices.items())
            for _j, call in sorted(choice.tool_calls.items())
        ]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def read_error(output: ModelOutput, body: dict[str, Any]) -> None:
    """`{"error": {"message", "type"}}`: both providers' error bodies (and stream error events)."""
    error = body.get("error")
    if isinstance(error, dict):
        output.error_message = _str(error.get("message")) or orjson.dumps(error).decode()
        code = error.get("code")
        if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 600:
            # an HTTP status inside the error (llama-server's mid-stream 500): the same
            # error.type as when that status is the response's (docs/llm.md#errors)
            output.error_type = str(code)
        else:
            output.error_type = _str(error.get("type")) or _str(code)
    elif isinstance(error, str):
        output.error_message = error


def read_usage(output: ModelOutput, usage: Any) -> None:
    """Token counts: OpenAI chat (`prompt_tokens`), Responses and Anthropic (`input_tokens`)."""
    usage = _dict(usage)
    found_in = _int(usage.get("input_tokens"))
    if found_in is None:
        found_in = _int(usage.get("prompt_tokens"))
    if found_in is not None:
        # Anthropic counts cached input apart; the conventions' input_tokens include it
        cached = (_int(usage.get("cache_read_input_tokens")) or 0) + (
            _int(usage.get("cache_creation_input_tokens")) or 0
        )
        output.input_tokens = found_in + cached
    found_out = _int(usage.get("output_tokens"))
    if found_out is None:
        found_out = _int(usage.get("completion_tokens"))
    if found_out is not None:
        output.output_tokens = found_out


def read_chat_message(choice: Choice, message: dict[str, Any]) -> None:
    """A Chat Completions `message` (or a stream `delta`, whose parts add up)."""
    if isinstance(content := message.get("content"), str) and content:
        choice.text.append(content)
    if isinstance(refusal := message.get("refusal"), str) and refusal:
        choice.refusal.append(refusal)
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:  # vLLM, DeepSeek-style servers
        choice.reasoning.append(reasoning)
    for position, raw in enumerate(_list(message.get("tool_calls"))):
        raw = _dict(raw)
        index = _int(raw.get("index"))
        call = choice.call(position if index is None else index)
        if isinstance(call_id := raw.get("id"), str) and call_id:
            call.id = call_id
        function = _dict(raw.get("function"))
        if isinstance(name := function.get("name"), str):
            call.name += name
        if isinstance(arguments := function.get("arguments"), str):
            call.arguments += arguments


def read_chat_body(output: ModelOutput, body: dict[str, Any]) -> None:
    output.response_id = _str(body.get("id"))
    output.model = _str(body.get("model"))
    read_usage(output, body.get("usage"))
    for position, raw in enumerate(_list(body.get("choices"))):
        raw = _dict(raw)
        index = _int(raw.get("index"))
        choice = output.choice(position if index is None else index)
        read_chat_message(choice, _dict(raw.get("message")))
        choice.finish_reason = _str(raw.get("finish_reason"))


def read_response_item(choice: Choice, item: dict[str, Any], index: int) -> None:
    """One item of a Responses `output`: a message, a function call or reasoning."""
    kind = item.get("type")
    if kind == "message":
        for part in _list(item.get("content")):
            part = _dict(part)
            if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                choice.text.append(part["text"])
            elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                choice.refusal.append(part["refusal"])
    elif kind == "function_call":
        call = choice.tool_calls[index] = ToolCall(
            id=_str(item.get("call_id")),
            name=_str(item.get("name")) or "",
            arguments=_str(item.get("arguments")) or "",
        )
        call.complete = item.get("status") in (None, "completed")
    elif kind == "reasoning":
        for part in _list(item.get("summary")) + _list(item.get("content")):
            if isinstance(text := _dict(part).get("text"), str):
                choice.reasoning.append(text)


def read_responses_body(output: ModelOutput, body: dict[str, Any]) -> None:
    output.response_id = _str(body.get("id"))
    output.model = _str(body.get("model"))
    read_usage(output, body.get("usage"))
    if body.get("error"):
        read_error(output, body)
    choice = output.choices[0] = Choice()  # the whole response replaces what the stream built
    for index, item in enumerate(_list(body.get("output"))):
        read_response_item(choice, _dict(item), index)
    status = _str(body.get("status"))
    reason = _str(_dict(body.get("incomplete_details")).get("reason"))
    choice.finish_reason = reason or status


def read_anthropic_block(choice: Choice, block: dict[str, Any], index: int) -> None:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        choice.text.append(block["text"])
    elif kind == "thinking" and isinstance(block.get("thinking"), str):
        choice.reasoning.append(block["thinking"])
    elif kind in ("tool_use", "server_tool_use"):
        given = block.get("input")
        arguments = orjson.dumps(given).decode() if isinstance(given, dict) and given else ""
        choice.tool_calls[index] = ToolCall(
            id=_str(block.get("id")), name=_str(block.get("name")) or "", arguments=arguments
        )


def read_messages_body(output: ModelOutput, body: dict[str, Any]) -> None:
    output.response_id = _str(body.get("id"))
    output.model = _str(body.get("model"))
    read_usage(output, body.get("usage"))
    choice = output.choice(0)
    for index, block in enumerate(_list(body.get("content"))):
        read_anthropic_block(choice, _dict(block), index)
    choice.finish_reason = _str(body.get("stop_reason"))


_BODY_READERS = {
    API_CHAT: read_chat_body,
    API_RESPONSES: read_responses_body,
    API_MESSAGES: read_messages_body,
}


def read_body(api: str, body: Any) -> ModelOutput:
    """The output of a whole (non-streamed) JSON response, or of an error body."""
    output = ModelOutput()
    if not isinstance(body, dict):
        return output
    if "error" in body and api != API_RESPONSES:
        read_error(output, body)
        return output
    _BODY_READERS[api](output, body)
    return output
