"""What a model span stores for replay (server/replay/model_store.py): SSE events split so
that joined they are the stream's bytes, a secret in one event re-encoded (that event only), a
stream over the cap kept as whole events and marked cut, and a whole answer kept byte for byte."""

from __future__ import annotations

import orjson

from tracecard.server.recording.redaction import Redactor
from tracecard.server.replay.keys import first_difference
from tracecard.server.replay.model_store import _events, _whole, split_events
from tracecard.server.settings import RecordingSettings

STREAM = (
    b": keep-alive\r\n\r\n"
    b'event: message_start\r\ndata: {"type":"message_start"}\r\n\r\n'
    b'data: {"type":"delta","tool":{"api_key":"sk-live-123"}}\n\n'
    b"data: [DONE]\r\r"
    b"data: half"
)


def test_events_joined_are_the_stream() -> None:
    events = split_events(STREAM)
    assert b"".join(events) == STREAM
    assert len(events) == 5 and events[-1] == b"data: half"


def test_a_secret_is_fingerprinted_in_its_event_only() -> None:
    redactor = Redactor(RecordingSettings(), b"k" * 32)
    kept, how = _events(redactor, STREAM)
    assert how == "redacted"
    assert kept[0] == ": keep-alive\r\n\r\n"  # untouched events keep their bytes (CRLF too)
    assert kept[1] == 'event: message_start\r\ndata: {"type":"message_start"}\r\n\r\n'
    assert kept[3] == "data: [DONE]\r\r" and kept[4] == "data: half"
    assert "sk-live-123" not in kept[2]
    data = orjson.loads(kept[2].removeprefix("data: "))
    assert data["tool"]["api_key"].startswith("[redacted:")
    plain = Redactor(RecordingSettings(), b"k" * 32).plain()  # redact = false on the upstream
    assert _events(plain, STREAM) == ([e.decode() for e in split_events(STREAM)], "whole")


def test_over_the_cap_a_stream_keeps_whole_events_and_is_cut() -> None:
    redactor = Redactor(RecordingSettings(payload_cap_bytes=60), b"k" * 32)
    kept, how = _events(redactor, STREAM)
    assert how == "cut" and kept == [": keep-alive\r\n\r\n"]


def test_a_whole_answer_is_kept_byte_for_byte_unless_a_secret_is_in_it() -> None:
    redactor = Redactor(RecordingSettings(), b"k" * 32)
    body = b'{\n  "usage": {"prompt_tokens": 3},\n  "text": "hi"\n}'
    assert _whole(redactor, body, len(body)) == (body.decode(), "whole")  # counts are no secret
    secret = b'{"password": "hunter2"}'
    text, how = _whole(redactor, secret, len(secret))
    assert how == "redacted" and "hunter2" not in text
    assert _whole(redactor, body, len(body) + 10)[1] == "cut"  # more came than was kept


def test_first_difference_names_the_path_ignore_takes() -> None:
    a = '{"arguments":{"messages":[{"content":"2 + 40"}],"model":"m"}}'
    b = '{"arguments":{"messages":[{"content":"3 + 40"}],"model":"m"}}'
    assert first_difference(a, b) == "$.arguments.messages[0].content"
    assert first_difference(a, a) is None
    assert first_difference(a, '{"arguments":{"model":"m"}}') == "$.arguments.messages"


def test_a_fingerprint_sent_back_stays_itself() -> None:
    """Under replay the agent gets fingerprints (a redacted tool listing, say) and sends them
    on to the model: stored again they must equal their recording, not a fingerprint of one."""
    redactor = Redactor(RecordingSettings(), b"k" * 32)
    once = redactor.value({"access_token": "abc"})
    assert redactor.value(once) == once and once["access_token"] != "abc"
