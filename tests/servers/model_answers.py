"""The scripted model's answers, built from the official SDKs' types (`openai.types`,
`anthropic.types`) so that the real clients accept them. See tests/servers/model_upstream.py."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from anthropic import types as at
from openai.types import chat as oc
from openai.types import completion_usage as ou
from openai.types import responses as orr
from openai.types.chat import chat_completion as occ
from openai.types.chat import chat_completion_chunk as ock
from pydantic import BaseModel

CREATED = 1_767_225_600
# The Chat Completions definition of the tool the scripts call (for clients that offer tools).
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {"type": "object", "properties": {"a": {}, "b": {}}},
        },
    }
]
TOOL_CALLS = [("call_add", "add", {"a": 2, "b": 40}), ("call_echo", "echo", {"text": "hi"})]


def dump(model: BaseModel) -> bytes:
    return model.model_dump_json(exclude_unset=True).encode()


def _id(body: bytes, prefix: str) -> str:
    return prefix + hashlib.sha1(body).hexdigest()[:16]


def _agent_turn(body: dict[str, Any]) -> str:
    """`script-agent`: the last tool result fed back, or '' when the model must call a tool."""
    for message in reversed(body.get("messages") or body.get("input") or []):
        if not isinstance(message, dict):
            continue
        if message.get("role") == "tool":
            return str(message.get("content"))
        if message.get("type") == "function_call_output":
            return str(message.get("output"))
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    return orjson.dumps(block.get("content")).decode()
        if message.get("role") in ("user", "assistant"):
            return ""
    return ""


def _plan(body: dict[str, Any]) -> tuple[str, list[tuple[str, str, dict[str, Any]]], str | None]:
    """(text, tool calls, refusal) for the script named by the model."""
    model = body.get("model")
    if model == "script-tools":
        return "", TOOL_CALLS, None
    if model == "script-refusal":
        return "", [], "I can't help with that."
    if model == "script-agent":
        result = _agent_turn(body)
        if not result:
            return "", [TOOL_CALLS[0]], None
        return f"The answer is 42 (the tool said {result[:40]}).", [], None
    if model == "script-cut":
        return "", TOOL_CALLS, None
    return "Hello from the script.", [], None


def _sse(data: bytes, event: str | None = None) -> bytes:
    return (f"event: {event}\n".encode() if event else b"") + b"data: " + data + b"\n\n"


def _usage(body: bytes) -> tuple[int, int]:
    return 10 + len(body) // 100, 7


# --- OpenAI Chat Completions --------------------------------------------------------------------


def chat_body(raw: bytes, body: dict[str, Any]) -> bytes:
    text, calls, refusal = _plan(body)
    tool_calls = [
        oc.ChatCompletionMessageFunctionToolCall(
            id=cid, type="function", function={"name": name, "arguments": orjson.dumps(args)}
        )
        for cid, name, args in calls
    ]
    message = oc.ChatCompletionMessage(
        role="assistant", content=text or None, refusal=refusal, tool_calls=tool_calls or None
    )
    prompt, completion = _usage(raw)
    return dump(
        oc.ChatCompletion(
            id=_id(raw, "chatcmpl-"),
            object="chat.completion",
            created=CREATED,
            model=str(body.get("model")),
            choices=[
                occ.Choice(
                    index=0,
                    message=message,
                    finish_reason="tool_calls" if calls else "stop",
                    logprobs=None,
                )
            ],
            usage=ou.CompletionUsage(
                prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
            ),
        )
    )


def chat_events(raw: bytes, body: dict[str, Any]) -> tuple[list[bytes], bool]:
    text, calls, refusal = _plan(body)
    cut = body.get("model") == "script-cut"
    base = {"id": _id(raw, "chatcmpl-"), "object": "chat.completion.chunk", "created": CREATED}
    base["model"] = str(body.get("model"))

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        choice = ock.Choice(index=0, delta=ock.ChoiceDelta(**delta), finish_reason=finish)
        return _sse(dump(oc.ChatCompletionChunk(**base, choices=[choice], **extra)))

    events = [chunk({"role": "assistant", "content": ""})]
    for piece in (text[:6], text[6:]) if text else ():
        events.append(chunk({"content": piece}))
    if refusal:
        events.append(chunk({"refusal": refusal}))
    for index, (cid, name, args) in enumerate(calls):
        arguments = orjson.dumps(args).decode()
        head = {"index": index, "id": cid, "type": "function", "function": {"name": name}}
        events.append(chunk({"tool_calls": [{**head, "function": {**head["function"]}}]}))
        for piece in (arguments[:5], arguments[5:]):
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
            if cut and index == 1:
                return events, True
    events.append(chunk({}, "tool_calls" if calls else "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        prompt, completion = _usage(raw)
        usage = ou.CompletionUsage(
            prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
        )
        events.append(_sse(dump(oc.ChatCompletionChunk(**base, choices=[], usage=usage))))
    events.append(_sse(b"[DONE]"))
    return events, False


# --- OpenAI Responses ---------------------------------------------------------------------------


def response(raw: bytes, body: dict[str, Any], done: bool = True) -> orr.Response:
    text, calls, refusal = _plan(body)
    output: list[Any] = []
    if text or refusal:
        content: list[Any] = (
            [orr.ResponseOutputText(type="output_text", text=text, annotations=[])]
            if text
            else [orr.ResponseOutputRefusal(type="refusal", refusal=refusal or "")]
        )
        output.append(
            orr.ResponseOutputMessage(
                id=_id(raw, "msg_"),
                type="message",
                role="assistant",
                status="completed",
                content=content,
            )
        )
    for cid, name, args in calls:
        output.append(
            orr.ResponseFunctionToolCall(
                id=f"fc_{cid}",
                type="function_call",
                call_id=cid,
                name=name,
                arguments=orjson.dumps(args).decode(),
                status="completed",
            )
        )
    prompt, completion = _usage(raw)
    return orr.Response(
        id=_id(raw, "resp_"),
        object="response",
        created_at=CREATED,
        model=str(body.get("model")),
        output=output if done else [],
        parallel_tool_calls=True,
        tool_choice="auto",
        tools=[],
        status="completed" if done else "in_progress",
        usage=orr.ResponseUsage(
            input_tokens=prompt,
            output_tokens=completion,
            total_tokens=prompt + completion,
            input_tokens_details={"cached_tokens": 0, "cache_write_tokens": 0},
            output_tokens_details={"reasoning_tokens": 0},
        )
        if done
        else None,
    )


def responses_events(raw: bytes, body: dict[str, Any]) -> list[bytes]:
    final = response(raw, body)
    events: list[BaseModel] = [
        orr.ResponseCreatedEvent(
            type="response.created", response=response(raw, body, False), sequence_number=0
        )
    ]
    for index, item in enumerate(final.output):
        seq = len(events)
        events.append(
            orr.ResponseOutputItemAddedEvent(
                type="response.output_item.added",
                item=item,
                output_index=index,
                sequence_number=seq,
            )
        )
        if isinstance(item, orr.ResponseOutputMessage) and item.content[0].type == "output_text":
            events.append(
                orr.ResponseTextDeltaEvent(
                    type="response.output_text.delta",
                    item_id=item.id,
                    output_index=index,
                    content_index=0,
                    delta=item.content[0].text,
                    logprobs=[],
                    sequence_number=len(events),
                )
            )
        elif isinstance(item, orr.ResponseFunctionToolCall):
            events.append(
                orr.ResponseFunctionCallArgumentsDeltaEvent(
                    type="response.function_call_arguments.delta",
                    item_id=item.id or "",
                    output_index=index,
                    delta=item.arguments,
                    sequence_number=len(events),
                )
            )
        events.append(
            orr.ResponseOutputItemDoneEvent(
                type="response.output_item.done",
                item=item,
                output_index=index,
                sequence_number=len(events),
            )
        )
    events.append(
        orr.ResponseCompletedEvent(
            type="response.completed", response=final, sequence_number=len(events)
        )
    )
    return [_sse(dump(e), getattr(e, "type", None)) for e in events]


# --- Anthropic Messages -------------------------------------------------------------------------


def anthropic_message(raw: bytes, body: dict[str, Any]) -> at.Message:
    text, calls, refusal = _plan(body)
    content: list[Any] = []
    if text or refusal:
        content.append(at.TextBlock(type="text", text=text or refusal or ""))
    for cid, name, args in calls:
        content.append(at.ToolUseBlock(type="tool_use", id=f"toolu_{cid}", name=name, input=args))
    prompt, completion = _usage(raw)
    stop = "tool_use" if calls else ("refusal" if refusal else "end_turn")
    return at.Message(
        id=_id(raw, "msg_"),
        type="message",
        role="assistant",
        model=str(body.get("model")),
        content=content,
        stop_reason=stop,
        stop_sequence=None,
        usage=at.Usage(input_tokens=prompt, output_tokens=completion),
    )


def anthropic_events(raw: bytes, body: dict[str, Any]) -> tuple[list[bytes], bool]:
    final = anthropic_message(raw, body)
    cut = body.get("model") == "script-cut"
    start = final.model_copy(update={"content": [], "stop_reason": None})
    start.usage = at.Usage(input_tokens=final.usage.input_tokens, output_tokens=1)
    events: list[BaseModel] = [at.RawMessageStartEvent(type="message_start", message=start)]
    for index, block in enumerate(final.content):
        if isinstance(block, at.TextBlock):
            empty: Any = at.TextBlock(type="text", text="")
            deltas: list[Any] = [at.TextDelta(type="text_delta", text=block.text)]
        else:
            assert isinstance(block, at.ToolUseBlock)
            empty = at.ToolUseBlock(type="tool_use", id=block.id, name=block.name, input={})
            arguments = orjson.dumps(block.input).decode()
            deltas = [
                at.InputJSONDelta(type="input_json_delta", partial_json=arguments[:4]),
                at.InputJSONDelta(type="input_json_delta", partial_json=arguments[4:]),
            ]
        events.append(
            at.RawContentBlockStartEvent(
                type="content_block_start", index=index, content_block=empty
            )
        )
        for number, delta in enumerate(deltas):
            events.append(
                at.RawContentBlockDeltaEvent(type="content_block_delta", index=index, delta=delta)
            )
            if cut and index == 1 and number == 0:
                return [_sse(dump(e), getattr(e, "type", None)) for e in events], True
        events.append(at.RawContentBlockStopEvent(type="content_block_stop", index=index))
    events.append(
        at.RawMessageDeltaEvent(
            type="message_delta",
            delta={"stop_reason": final.stop_reason, "stop_sequence": None},
            usage=at.MessageDeltaUsage(output_tokens=final.usage.output_tokens),
        )
    )
    events.append(at.RawMessageStopEvent(type="message_stop"))
    return [_sse(dump(e), getattr(e, "type", None)) for e in events], False
