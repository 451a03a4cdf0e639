"""Matching rules of a replay index (server/replay/index.py, keys.py): which recording answers
which request under `exact`, `sequence` and `ignore-args`, with `ignore` paths; pure code."""

from __future__ import annotations

from tracecard.server.recording.redaction import Redactor
from tracecard.server.replay.index import Miss, Recorded, UpstreamIndex
from tracecard.server.replay.keys import RequestKey, drop_paths, mcp_key
from tracecard.server.replay.plan import MatchMode, UpstreamReplay
from tracecard.server.settings import RecordingSettings


def _key(tool: str, ignore: list[str] | None = None, **arguments: object) -> RequestKey:
    return mcp_key("agent", "tools/call", tool, {"arguments": arguments}, ignore or [])


def _index(match: MatchMode, ignore: list[str] | None = None) -> UpstreamIndex:
    recorded = [
        Recorded(_key("search", ignore, q="a", at=1), "s1", {"result": 1}),
        Recorded(_key("search", ignore, q="a", at=2), "s2", {"result": 2}),
        Recorded(_key("open", ignore, id=7), "s3", {"result": 3}),
    ]
    return UpstreamIndex(UpstreamReplay(match=match, ignore=ignore or []), recorded)


def _span(found: Recorded | Miss) -> str:
    return found.span_id if isinstance(found, Recorded) else f"miss:{found.reason[:10]}"


def test_exact_answers_equal_keys_in_recorded_order_and_misses_the_rest() -> None:
    index = _index("exact", ["$.arguments.at"])
    asked = [_key("open", id=7), _key("search", ["$.arguments.at"], q="a", at=9)] * 2
    assert [_span(index.take(k)) for k in asked] == ["s3", "s1", "miss:not record", "s2"]


def test_sequence_needs_the_recorded_order() -> None:
    index = _index("sequence", ["$.arguments.at"])
    assert _span(index.take(_key("open", id=7))) == "miss:not record"
    index = _index("sequence", ["$.arguments.at"])
    order = [_key("search", ["$.arguments.at"], q="a")] * 2 + [_key("open", id=7)]
    assert [_span(index.take(k)) for k in order] == ["s1", "s2", "s3"]


def test_ignore_args_matches_on_the_tool_alone() -> None:
    index = _index("ignore-args")
    assert _span(index.take(_key("open", id=8))) == "s3"
    miss = index.take(_key("close", id=1))
    assert isinstance(miss, Miss)


def test_a_miss_names_the_closest_recording_by_arguments() -> None:
    index = _index("exact")
    miss = index.take(_key("search", q="b", at=2))
    assert isinstance(miss, Miss) and miss.closest is not None
    assert miss.closest.span_id == "s2"  # one value differs (q), not two
    assert "closest recorded: tools/call search" in miss.describe()


def test_ignore_paths_drop_values_at_any_depth_and_keep_the_rest() -> None:
    document = {"arguments": {"items": [{"id": 1, "n": 2}], "ts": 5, "keep": True}}
    dropped = drop_paths(document, ["$.arguments.ts", "$.arguments.items[0].id", "$.nope.x"])
    assert dropped == {"arguments": {"items": [{"n": 2}], "keep": True}}
    assert document["arguments"]["ts"] == 5  # the caller's value is untouched


def test_a_redacted_argument_across_databases() -> None:
    """A cassette recorded under one database's fingerprint key, replayed under another's
    (docs/replay.md, "Cassettes"): a secret the agent brings itself fingerprints differently
    and misses; a fingerprint the replay handed the agent, sent back, matches; `ignore` on the
    path matches whatever was sent."""
    recording, replaying = (Redactor(RecordingSettings(), key) for key in (b"a" * 32, b"b" * 32))

    def key(redactor: Redactor, ignore: list[str], **arguments: object) -> RequestKey:
        return _key("login", ignore, **redactor.value(arguments))

    for ignore, brought, echoed in (
        ([], "miss:not record", "s1"),
        (["$.arguments.access_token"], "s1", "s1"),
    ):
        fingerprint = recording.value({"access_token": "t0ken"})["access_token"]
        for sent, expected in (("t0ken", brought), (fingerprint, echoed)):
            recorded = Recorded(key(recording, ignore, user="u", access_token="t0ken"), "s1", {})
            index = UpstreamIndex(UpstreamReplay(ignore=ignore), [recorded])
            found = index.take(key(replaying, ignore, user="u", access_token=sent))
            assert _span(found) == expected, (ignore, sent)
