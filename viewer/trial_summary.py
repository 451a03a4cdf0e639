"""What the trials comparison says about each call's result and each trial's end: a one-line
result preview that reads an MCP result's content (not its JSON envelope), and the trial's
verdict (passed / failed at a component / not evaluated / errored) beside its final answer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from tracecard.scorers.verdict import run_verdict
from tracecard.traces.models import RunRow, ScoreRow
from tracecard.viewer.payloads import parse_json_text

PREVIEW_CHARS: Final = 140  # a result's preview in a cell of the comparison
ANSWER_CHARS: Final = 400  # a trial's final answer in the answers row
_ELLIPSIS: Final = "…"


def shorten(text: str, limit: int) -> str:
    """`text` on one line, cut at `limit` characters with an ellipsis when longer."""
    flat = " ".join(text[: limit * 4].split())
    if len(flat) <= limit and len(text) <= limit * 4:
        return flat
    return flat[: limit - 1].rstrip() + _ELLIPSIS


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(value)


def _content_text(part: Any) -> str:
    """One MCP content block as text: text as is, other kinds named by what they carry."""
    if not isinstance(part, dict):
        return _compact(part)
    kind = part.get("type")
    if isinstance(part.get("text"), str):
        return str(part["text"])
    if kind in ("image", "audio"):
        return f"[{kind} {part.get('mimeType') or ''}]".replace(" ]", "]")
    if kind == "resource_link" or kind == "resource":
        inner = part.get("resource")
        resource: dict[str, Any] = inner if isinstance(inner, dict) else part
        if isinstance(resource.get("text"), str):
            return str(resource["text"])
        return f"[resource {resource.get('uri') or ''}]".replace(" ]", "]")
    return _compact(part)


def result_text(result: Any) -> str:
    """A tool result as a person reads it: an MCP result's content blocks joined (its
    `structuredContent` when it has no content), a plain value as compact JSON."""
    value = parse_json_text(result)
    if isinstance(value, dict) and ("content" in value or "structuredContent" in value):
        content = value.get("content")
        if isinstance(content, list) and content:
            return " ".join(_content_text(part) for part in content)
        if "structuredContent" in value:
            return _compact(value["structuredContent"])
    return _compact(value)


def result_preview(result: Any) -> str:
    """`result_text` on one line, at most `PREVIEW_CHARS` characters, "…" where cut."""
    return "" if result is None else shorten(result_text(result), PREVIEW_CHARS)


@dataclass(frozen=True)
class TrialVerdict:
    """How a trial ended, in one word and one line."""

    word: str  # passed | failed | not evaluated | errored | pending | running
    component: str | None = None  # the first failing component
    reason: str = ""

    @property
    def css(self) -> str:
        """The class the page colours it by."""
        return self.word.replace(" ", "-")


def trial_verdict(run: RunRow, scores: Sequence[ScoreRow]) -> TrialVerdict:
    """The trial's verdict in the runs list's words (`tracecard.scorers.verdict.run_verdict`):
    `errored` (with the run's error) when the run itself broke; else `failed` at the first
    component (in component order) that failed, and why; `passed`; `not evaluated` (never a
    pass); `pending` or `running` while it is live."""
    verdict = run_verdict(run.status, scores)
    if verdict.word == "errored":
        return TrialVerdict("errored", reason=shorten(run.error or run.status, 160))
    return TrialVerdict(verdict.label, verdict.component, verdict.reason or "")
