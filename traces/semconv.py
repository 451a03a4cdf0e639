"""Span names and attribute keys used by every part of tracecard.

The MCP and GenAI semantic conventions are still "development" status in OpenTelemetry, so the
names we rely on are pinned here, in one place, against one version of the conventions.
"""

from __future__ import annotations

from typing import Final

# Pinned: OpenTelemetry semantic conventions for MCP / GenAI, status "development".
SEMCONV_VERSION: Final = "1.38.0"
SCHEMA_URL: Final = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

# --- MCP / RPC ---------------------------------------------------------------------------------
MCP_METHOD_NAME: Final = "mcp.method.name"
MCP_SESSION_ID: Final = "mcp.session.id"
MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
JSONRPC_REQUEST_ID: Final = "jsonrpc.request.id"
RPC_RESPONSE_STATUS_CODE: Final = "rpc.response.status_code"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
NETWORK_TRANSPORT: Final = "network.transport"  # "tcp" (HTTP upstreams) | "pipe" (stdio)
ERROR_TYPE: Final = "error.type"

# --- GenAI tool execution ----------------------------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"  # JSON text
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"  # JSON text
# on a tool span: the id of the model-requested call it executed (docs/llm.md#links)
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_CALL_ID_SOURCE: Final = "tracecard.tool.call.id_source"  # "forwarded" | "matched"
# on a span link: what the link means; `requested_by` = the model span that asked for the call
LINK_TYPE: Final = "tracecard.link.type"
LINK_REQUESTED_BY: Final = "requested_by"
OP_EXECUTE_TOOL: Final = "execute_tool"
OP_INVOKE_AGENT: Final = "invoke_agent"

# --- GenAI model calls (the /llm/ proxy: one `chat {model}` span per request) -------------------
OP_CHAT: Final = "chat"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"  # "openai" | "anthropic"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"  # list of strings
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
# Content attributes (opt-in in the conventions, on in tracecard): JSON text in the conventions'
# message shape, [{"role", "parts": [{"type": "text" | "tool_call" | "tool_call_response"...}]}]
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GEN_AI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"

# --- HTTP (plain HTTP tools and HTTP probes) ---------------------------------------------------
HTTP_REQUEST_METHOD: Final = "http.request.method"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"
URL_PATH: Final = "url.path"
URL_QUERY: Final = "url.query"
URL_FULL: Final = "url.full"

# --- tracecard's own ---------------------------------------------------------------------------
RUN_ID: Final = "tracecard.run.id"
UPSTREAM: Final = "tracecard.upstream"
# bool, on the initialize span of a spawned stdio server: it lasts from spawn to the answer
UPSTREAM_STARTUP: Final = "tracecard.upstream.startup"
ROLE: Final = "tracecard.role"  # ROLE_AGENT | ROLE_VERIFIER
ROLE_AGENT: Final = "agent"
ROLE_VERIFIER: Final = "verifier"
# A `Tracecard-Role` header the client sent (ignored for scoring: only the server's own probe
# traffic, which presents the database's verifier key, is `verifier`); its value, cut short.
ROLE_HEADER: Final = "tracecard.role.header"
# On an ingested span that looks like tracecard's own recording (an MCP message, a tool call, a
# tracecard role) but that tracecard did not observe: stored and shown, never scored.
# The trace id the agent's own spans (or its `traceparent`) named, on a span tracecard moved into
# its run's trace: one run, one trace, even when the agent's instrumentation started its own.
AGENT_TRACE_ID: Final = "tracecard.agent.trace_id"
EVIDENCE: Final = "tracecard.evidence"
EVIDENCE_AGENT_REPORTED: Final = "agent_reported"
TRUNCATED: Final = "tracecard.truncated"  # bool: some payload attribute was cut
REQUEST_BODY: Final = "tracecard.request.body"  # raw request text when not JSON-RPC
RESPONSE_BODY: Final = "tracecard.response.body"  # raw response text (plain HTTP tools)
PARSE_ERROR: Final = "tracecard.parse_error"  # why the agent's message could not be parsed
JSONRPC_ERROR_MESSAGE: Final = "tracecard.jsonrpc.error.message"
RPC_PARAMS: Final = "tracecard.rpc.params"  # JSON text: request params of non tools/call methods
RPC_RESULT: Final = "tracecard.rpc.result"  # JSON text: result of other methods
TOOL_IS_ERROR: Final = "tracecard.tool.is_error"  # bool, tools/call result had isError
TOOL_ANNOTATIONS: Final = "tracecard.tool.annotations"  # JSON text, from tools/list, on tools/call
BLOCKED_RULE: Final = "tracecard.blocked.rule"  # safety rule id that blocked the call (enforce)
# JSON text on a tools/call span of a task's run: each argument-pattern safety rule that applies
# to the tool, checked on the arguments as sent, before redaction: {rule id: {rule, broken}}
SAFETY_CHECKED: Final = "tracecard.safety.checked"
# on an agent's tools/list span: the upstream's verifier-only tools tracecard took out of the answer
TOOLS_HIDDEN: Final = "tracecard.tools.hidden"
PROBE: Final = "tracecard.probe"  # "version": a client's `server/discover` that an older
PROBE_VERSION: Final = "version"  # server refused and the client recovered from; not an error
PROBE_ID: Final = "tracecard.probe.id"  # verifier spans: which probe of the task
PROBE_KIND: Final = "tracecard.probe.kind"  # "tool" | "http" | "file"
PROBE_VALUE: Final = "tracecard.probe.value"  # JSON text: what the probe observed
PROBE_ERROR: Final = "tracecard.probe.error"  # why a probe could not run
TURN_INDEX: Final = "tracecard.turn.index"  # int, 0-based: turn spans and their verifier spans
TURN_USER: Final = "tracecard.turn.user"  # on a turn span: the user message handed out
# a verifier span named so tells an upstream that a turn began (server/evaluation/turn_notice.py)
TURN_NOTICE_SPAN: Final = "turn notice"
SANDBOX_PATH: Final = "tracecard.sandbox"  # on the root span: the run's sandbox directory
FINAL_ANSWER: Final = "tracecard.final_answer"  # on the root span, set at finish
RUN_STATUS: Final = "tracecard.run.status"
# model spans (docs/llm.md)
LLM_API: Final = "tracecard.llm.api"  # "chat.completions" | "responses" | "messages"
LLM_STREAM: Final = "tracecard.llm.stream"  # bool: the answer came as SSE
LLM_TTFT_MS: Final = "tracecard.llm.time_to_first_token_ms"  # first output chunk, streams only
LLM_TOOL_CALLS: Final = "tracecard.llm.tool_calls"  # JSON text: [{id, name, arguments, complete}]
LLM_STREAM_COMPLETE: Final = "tracecard.llm.stream.complete"  # bool: the stream's end event came
LLM_ERROR_MESSAGE: Final = "tracecard.llm.error.message"  # the upstream's error text, if any
# bool: the agent hung up before the answer ended (beside error.type, which names the upstream's
# failure when there was one)
LLM_CLIENT_DISCONNECTED: Final = "tracecard.llm.client_disconnected"

# replay and faults (docs/replay.md): how a call's answer was made
REPLAY: Final = "tracecard.replay"  # REPLAY_RECORDED | REPLAY_LIVE | REPLAY_MISS
REPLAY_RECORDED: Final = "recorded"  # answered from the source run's recording
REPLAY_LIVE: Final = "live"  # not recorded, forwarded live (on_miss = "live")
REPLAY_MISS: Final = "miss"  # not recorded, answered with an error (on_miss = "error")
REPLAY_SOURCE_SPAN: Final = "tracecard.replay.source_span_id"  # the recorded span replayed
REPLAY_CLOSEST: Final = "tracecard.replay.closest"  # on a miss: the nearest recorded request
# model spans: what replay needs to give the answer again (docs/replay.md#model-answers)
LLM_RESPONSE_EVENTS: Final = "tracecard.llm.response.events"  # JSON text: the SSE events as sent
# how the answer was stored: LLM_STORED_WHOLE (byte for byte), _REDACTED, _CUT, _BROKEN
LLM_RESPONSE_STORED: Final = "tracecard.llm.response.stored"
LLM_STORED_WHOLE: Final = "whole"  # the bytes as the agent got them (after content decoding)
LLM_STORED_REDACTED: Final = "redacted"  # secret values fingerprinted (re-encoded JSON)
LLM_STORED_CUT: Final = "cut"  # over recording.payload_cap_bytes: not replayed
LLM_STORED_BROKEN: Final = "broken"  # the answer broke off (upstream or agent): not replayed
FAULT_KIND: Final = "tracecard.fault.kind"  # an injected fault's kind (latency_ms, timeout...)
FAULT_RULE: Final = "tracecard.fault.rule"  # the fault plan's rule id that injected it

# multi round-trip requests (MCP 2026-07-28, SEP-2322; server/mrtr, docs/proxy.md): one logical
# call is a parent span (the call, its final result) with each round on the wire as a child
MRTR_ROUNDS: Final = "tracecard.mrtr.rounds"  # int, on the logical call's span
MRTR_ROUND: Final = "tracecard.mrtr.round"  # int (1-based), on each round's span
MRTR_INPUT_REQUESTS: Final = "tracecard.mrtr.input_requests"  # JSON text: what the server asked
MRTR_INPUT_RESPONSES: Final = "tracecard.mrtr.input_responses"  # JSON text: the client's answers
MRTR_REQUEST_STATE: Final = "tracecard.mrtr.request_state"  # the opaque state, as sent (redacted)
# JSON text on the logical call: every round's answers in order, [{round, responses}] (evidence)
MRTR_ANSWERS: Final = "tracecard.mrtr.answers"

# --- error.type values -------------------------------------------------------------------------
ERR_TOOL: Final = "tool_error"
ERR_TIMEOUT: Final = "timeout"
ERR_UNAVAILABLE: Final = "upstream_unavailable"
ERR_PROTOCOL: Final = "upstream_protocol_error"
ERR_BLOCKED: Final = "blocked"
ERR_VERIFIER_ONLY: Final = "verifier_only_tool"  # an agent called a verifier-only tool
ERR_TOO_LARGE: Final = "response_too_large"  # an answer (or SSE event) past a size limit
ERR_CLIENT_DISCONNECTED: Final = "client_disconnected"  # the agent hung up, the upstream was fine
ERR_REPLAY_MISS: Final = "replay_miss"  # replay had no recorded answer (on_miss = "error")
ERR_MRTR_UNMATCHED: Final = "mrtr_unmatched"  # a retry (inputResponses) of no open round
ERR_MRTR_INCOMPLETE: Final = "mrtr_incomplete"  # the server asked; the client never retried

# --- evaluation events (scores written onto the run's root span) -------------------------------
EVAL_EVENT_NAME: Final = "gen_ai.evaluation.result"
EVAL_NAME: Final = "gen_ai.evaluation.name"
EVAL_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
EVAL_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
EVAL_EXPLANATION: Final = "gen_ai.evaluation.explanation"

# Span kinds as stored (OTLP numbering).
KIND_INTERNAL: Final = 1
KIND_SERVER: Final = 2
KIND_CLIENT: Final = 3

# Status codes as stored (OTLP numbering).
STATUS_UNSET: Final = 0
STATUS_OK: Final = 1
STATUS_ERROR: Final = 2
