"""A loop in the transcript reads as a loop: identical calls made one right after the other (the
same tool, arguments and result) are one entry marked ×N with links to the repeats, instead of N
copies of one result (the demo's timed-out run showed 13 screens of one find_users answer)."""

from __future__ import annotations

from pathlib import Path

from tests.viewer.data import tool_span
from tests.viewer.one_run import one_run, text_of, transcript_of


async def test_identical_calls_in_a_row_are_one_entry_marked_with_their_count(
    tmp_path: Path,
) -> None:
    made = one_run(tmp_path, "inactive-support", "hasty")
    run, at = made.run, made.at
    users = {"users": [{"id": "u-101", "email": "maria.lopez@acme.example"}]}
    plan = [
        *[("find_users", {"team": "support"}, users)] * 5,  # a loop
        ("find_users", {"team": "sales"}, users),  # other arguments
        ("find_users", {"team": "support"}, users),  # the first call again, not in a row
        *[("get_ticket", {"id": "T-1"}, {"status": "open"}), ("get_ticket", {"id": "T-1"},
                                                              {"status": "closed"})],
    ]  # fmt: skip
    calls = [
        tool_span(run, (tool, arguments, result, None, 10), at + n * 10**8, run.root_span_id)
        for n, (tool, arguments, result) in enumerate(plan)
    ]
    page = await made.page(*calls)
    told = text_of(transcript_of(page))
    assert "9 tool calls" in told  # every call is still counted
    assert told.count("called find_users") == 3 and told.count("called get_ticket") == 2
    assert told.count("×5 in a row") == 1 and "×2" not in told
    assert told.count("maria.lopez@acme.example") == 3  # the loop's result once, not five times
    transcript = transcript_of(page)
    loop = transcript[: transcript.index("×5 in a row") + 200]
    assert f'href="#span-{calls[1]["span_id"]}"' in loop  # the first repeat ...
    assert f'href="#span-{calls[4]["span_id"]}"' in loop  # ... and the last, linked
    # a different result is not a repeat, even with the same arguments
    assert '"status": "open"' in told and '"status": "closed"' in told
