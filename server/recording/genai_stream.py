"""Streamed model answers (SSE) read event by event into a `ModelOutput`.

The proxy sends each chunk on first, then feeds the copy's events here. Tool-call deltas are
put back together into whole calls; a stream that stops before its end event leaves
`complete = False` (and any call still open marked incomplete).
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from tracecard.server.recording.genai_output import (
    API_CHAT,
    API_MESSAGES,
    API_RESPONSES,
    ModelOutput,
    read_anthropic_block,
    read_chat_message,
    read_error,
    read_response_item,
    read_responses_body,
    read_usage,
)


class StreamReader:
    """Feed it each event's type and data; `output` holds what the stream said so far."""

    __slots__ = ("api", "output", "ended")

    def __init__(self, api: str) -> None:
        self.api = api
        self.output = ModelOutput(complete=False)
        self.ended = False  # the API's end event came ([DONE], message_stop, response.completed)

    def event(self, event_type: str, data: str) -> None:
        if self.api == API_CHAT:
            self._chat(data)
            return
        try:
            body = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if not isinstance(body, dict):
            return
        if self.api == API_MESSAGES:
            # llama-server's `event: error` carries the bare error (its `type` is the error's)
            kind = event_type if event_type == "error" else body.get("type") or event_type
            self._messages(str(kind), body)
        elif self.api == API_RESPONSES:
            self._responses(str(body.get("type") or event_type), body)

    def finish(self) -> ModelOutput:
        """The output when the stream is over; calls left open are incomplete."""
        output = self.output
        output.complete = self.ended
        if not self.ended:
            for choice in output.choices.values():
                if choice.finish_reason is None and choice.tool_calls:
                    choice.tool_calls[max(choice.tool_calls)].complete = False
                for call in choice.tool_calls.values():
                    call.complete = call.complete and _whole_json(call.arguments)
        return output

    def _first_output(self) -> None:
        if self.output.first_output_ns is None:
            self.output.first_output_ns = time.time_ns()

    def _chat(self, data: str) -> None:
        if data.strip() == "[DONE]":
            self.ended = True
            return
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if not isinstance(chunk, dict):
            return
        output = self.output
        if "error" in chunk:
            read_error(output, chunk)
            return
        output.response_id = output.response_id or chunk.get("id")
        output.model = output.model or chunk.get("model")
        if chunk.get("usage"):
            read_usage(output, chunk["usage"])
        for position, raw in enumerate(chunk.get("choices") or []):
            if not isinstance(raw, dict):
                continue
            index = raw.get("index")
            choice = output.choice(index if isinstance(index, int) else position)
            delta = raw.get("delta")
            if isinstance(delta, dict) and (
                delta.get("content") or delta.get("tool_calls") or delta.get("refusal")
            ):
                self._first_output()
            if isinstance(delta, dict):
                read_chat_message(choice, delta)
            if isinstance(raw.get("finish_reason"), str):
                choice.finish_reason = raw["finish_reason"]

    def _messages(self, kind: str, body: dict[str, Any]) -> None:
        output = self.output
        choice = output.choice(0)
        index = body.get("index")
        if kind == "message_start":
            message = body.get("message") or {}
            output.response_id = message.get("id")
            output.model = message.get("model")
            read_usage(output, message.get("usage"))
        elif kind == "content_block_start" and isinstance(index, int):
            block = body.get("content_block") or {}
            read_anthropic_block(choice, block, index)
            if index in choice.tool_calls:
                choice.tool_calls[index].complete = False  # until its content_block_stop
            if block.get("type") in ("tool_use", "server_tool_use") or block.get("text"):
                self._first_output()
        elif kind == "content_block_delta" and isinstance(index, int):
            delta = body.get("delta") or {}
            delta_kind = delta.get("type")
            if delta_kind == "text_delta" and isinstance(delta.get("text"), str):
                self._first_output()
                choice.text.append(delta["text"])
            elif delta_kind == "thinking_delta" and isinstance(delta.get("thinking"), str):
                self._first_output()
                choice.reasoning.append(delta["thinking"])
            elif delta_kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
                self._first_output()
                choice.call(index).arguments += delta["partial_json"]
        elif kind == "content_block_stop" and index in choice.tool_calls:
            choice.tool_calls[index].complete = True
        elif kind == "message_delta":
            stop = (body.get("delta") or {}).get("stop_reason")
            if isinstance(stop, str):
                choice.finish_reason = stop
            usage = body.get("usage") or {}
            # message_delta's usage is cumulative; its input_tokens, when sent, are the total
            if isinstance(usage.get("output_tokens"), int):
                output.output_tokens = usage["output_tokens"]
            if isinstance(usage.get("input_tokens"), int):
                read_usage(output, usage)
        elif kind == "message_stop":
            self.ended = True
        elif kind == "error":  # Anthropic's {"type": "error", "error": {...}}, or bare
            read_error(output, body if "error" in body else {"error": body})

    def _responses(self, kind: str, body: dict[str, Any]) -> None:
        output = self.output
        choice = output.choice(0)
        index = body.get("output_index")
        if kind in ("response.created", "response.in_progress"):
            response = body.get("response") or {}
            output.response_id = response.get("id")
            output.model = response.get("model")
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            first = output.first_output_ns
            read_responses_body(output, body.get("response") or {})
            output.first_output_ns = first
            self.ended = True
        elif kind == "response.output_item.added" and isinstance(index, int):
            item = body.get("item") or {}
            if item.get("type") == "function_call":
                self._first_output()
                read_response_item(choice, item, index)
                choice.tool_calls[index].complete = False
        elif kind == "response.output_item.done" and isinstance(index, int):
            item = body.get("item") or {}
            if item.get("type") == "function_call":
                read_response_item(choice, item, index)
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            self._first_output()
            if isinstance(delta := body.get("delta"), str):
                (choice.text if kind.endswith("text.delta") else choice.refusal).append(delta)
        elif kind == "response.function_call_arguments.delta" and isinstance(index, int):
            if isinstance(delta := body.get("delta"), str):
                choice.call(index).arguments += delta
        elif kind == "error":
            output.error_message = body.get("message") or orjson.dumps(body).decode()
            output.error_type = body.get("code")


def _whole_json(text: str) -> bool:
    if not text.strip():
        return True
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True
