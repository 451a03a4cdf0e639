"""A payload longer than the stored cap (#24 item 4): only its first `payload_cap_bytes` are
stored, so only they are searched for secret keys (a 20 MB stdio answer took 7 s in the
regex alone). A secret in the stored part is fingerprinted as before, one past it is cut with
it; a key across the cut is found; a small payload is checked exactly as before."""

from __future__ import annotations

from tracecard.server.recording.redaction import Redactor
from tracecard.server.settings import RecordingSettings

KEY = b"k" * 32
CAP = 1000


def _redactor() -> Redactor:
    return Redactor(RecordingSettings(payload_cap_bytes=CAP), KEY)


def test_a_secret_in_the_stored_part_of_a_long_payload_is_fingerprinted() -> None:
    redactor = _redactor()
    node = {"Access_Token": "s3cr3t-value", "text": "x" * 50_000}
    text, truncated = redactor.text(node)
    assert truncated and "s3cr3t-value" not in text
    assert redactor.mask("s3cr3t-value") in text
    assert text.endswith(f"original size {_size(redactor, node)} bytes]")


def _size(redactor: Redactor, node: object) -> int:
    import orjson

    return len(orjson.dumps(redactor.value(node)))


def test_a_secret_past_the_cap_is_cut_with_it() -> None:
    node = {"text": "x" * 5_000, "password": "hunter2-hunter2"}
    text, truncated = _redactor().text(node)
    assert truncated and "hunter2" not in text and "password" not in text
    assert text.split("…")[0] == '{"text":"' + "x" * (CAP - len('{"text":"'))


def test_a_secret_key_across_the_cut_is_found() -> None:
    prefix = '{"t":"' + "x" * (CAP - len('{"t":"') - len('","to')) + '",'
    node = {"t": prefix[6:-2], "token": "abc-secret-abc", "more": "y" * 5_000}
    redactor = _redactor()
    text, truncated = redactor.text(node)
    assert truncated and '"to' in text and "abc-secret-abc" not in text
    assert redactor.secret_keys.in_bytes(b'{"tO' + b"KEN") and redactor.secret_keys.in_bytes(
        b"x" * 10 + b"Bearer"
    )


def test_a_short_payload_is_checked_whole() -> None:
    redactor = _redactor()
    text, truncated = redactor.text({"a": [{"b": {"ApiKey": "k-123456"}}]})
    assert not truncated and "k-123456" not in text and redactor.mask("k-123456") in text
    assert redactor.text({"city": "Paris"}) == ('{"city":"Paris"}', False)
