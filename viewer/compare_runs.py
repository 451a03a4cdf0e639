"""N trials of one task side by side: tool calls and model turns aligned, first divergence,
argument diffs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tracecard.scorers.calls import ToolCall
from tracecard.scorers.calls import agent_calls as observed_calls
from tracecard.scorers.registry import component_key
from tracecard.scorers.turns import turn_at, turn_spans
from tracecard.traces import semconv as sc
from tracecard.traces.models import RunRow, ScoreRow, VerdictRow
from tracecard.viewer.align import ALIGN_CAP, CallKey, align_calls, canonical_arguments
from tracecard.viewer.payloads import parse_json_text
from tracecard.viewer.trace_view import span_error
from tracecard.viewer.trial_summary import (
    ANSWER_CHARS,
    TrialVerdict,
    result_preview,
    shorten,
    trial_verdict,
)


@dataclass(frozen=True)
class Argument:
    """One argument of a call, and whether it differs from the row's most common call."""

    name: str
    text: str
    differs: bool


@dataclass
class Call:
    """One agent tool call of one trial."""

    span_id: str
    tool: str
    arguments: Any
    key: CallKey
    error: str | None
    result_preview: str
    duration_ns: int | None
    shown: list[Argument] = field(default_factory=list)
    tool_differs: bool = False
    turn: int | None = None  # multi-turn runs: the turn the call was made in


@dataclass
class AlignedRow:
    """One aligned step: each trial's call or None (the trial made no such call).

    A step of repeats stands for several aligned rows: `repeats[t]` is how many times trial t
    made its call in it (0 for a gap), and `last[t]` its last call when that one's result reads
    otherwise than the first's (a poll that finally saw the change)."""

    cells: list[Call | None]
    diverges: bool
    repeats: list[int] = field(default_factory=list)
    last: list[Call | None] = field(default_factory=list)
    first_row: int = 0  # the step's first aligned row: calls before it, per trial, are counted


@dataclass
class TrialColumn:
    """A trial: its run, scores in component order, its calls, how it ended and what people
    said about it."""

    run: RunRow
    scores: list[ScoreRow]
    calls: list[Call]
    verdict: TrialVerdict = field(default_factory=lambda: TrialVerdict("not evaluated"))
    people: list[VerdictRow] = field(default_factory=list)

    @property
    def answer(self) -> str | None:
        """The trial's final answer on a few lines (None: it never answered)."""
        answer = self.run.final_answer
        return None if answer is None else shorten(answer, ANSWER_CHARS)


@dataclass
class RunsComparison:
    """What the compare-runs page draws."""

    columns: list[TrialColumn]
    rows: list[AlignedRow]
    first_divergence: int | None
    components: list[str]
    agrees_to_cap: bool = False  # longer trials whose shown (capped) calls all agree
    aligned_calls: int | None = None  # set when trials were longer: only this many are shown
    calls_beyond: list[int] = field(default_factory=list)  # per trial: calls not shown
    calls_made: list[int] = field(default_factory=list)  # per trial: its agent calls in all
    first_hidden: list[str | None] = field(default_factory=list)  # per trial: first call not shown

    @property
    def beyond_cap(self) -> list[tuple[TrialColumn, int, int, str | None]]:
        """Trials longer than the cap: (column, calls not shown, calls made, first not shown)."""
        return [
            (column, beyond, made, hidden)
            for column, beyond, made, hidden in zip(
                self.columns, self.calls_beyond, self.calls_made, self.first_hidden, strict=True
            )
            if beyond
        ]


MODEL_STEP = "model"  # a model turn's row label: turns align with turns, calls with calls


def _is_model_turn(span: dict[str, Any]) -> bool:
    """A model turn: a `chat` span but a verifier's (`scorers.model.model_turns`)."""
    attributes = span.get("attributes") or {}
    return (
        attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_CHAT
        and attributes.get(sc.ROLE) != sc.ROLE_VERIFIER
        and attributes.get(sc.GEN_AI_TOOL_NAME) is None
    )


def _observed_call(span: dict[str, Any]) -> ToolCall | None:
    """The span as a tool call tracecard observed, exactly as the scorers read calls
    (`scorers.calls.agent_calls`: role `agent`, MCP `tools/call` or a plain HTTP tool; never an
    agent's own `execute_tool` span, stored as `agent_reported`, nor a verifier's probe)."""
    found = observed_calls([span])
    return found[0] if found else None


def _is_agent_call(span: dict[str, Any]) -> bool:
    """A step of the comparison: a tool call tracecard observed, or a model turn."""
    return _is_model_turn(span) or _observed_call(span) is not None


def _model_step(attributes: dict[str, Any]) -> tuple[Any, str]:
    """A model turn as a step: what it asked for (its key), or that it answered."""
    requested = parse_json_text(attributes.get(sc.LLM_TOOL_CALLS))
    if isinstance(requested, list) and requested:
        calls = [
            {"tool": c.get("name"), "arguments": c.get("arguments")}
            for c in requested
            if isinstance(c, dict)
        ]
        return {"requested": calls}, canonical_arguments(calls)
    output = parse_json_text(attributes.get(sc.GEN_AI_OUTPUT_MESSAGES))
    texts = [
        part.get("content")
        for message in (output if isinstance(output, list) else [])
        if isinstance(message, dict)
        for part in message.get("parts") or []
        if isinstance(part, dict) and part.get("type") in ("text", "refusal")
    ]
    answer = "".join(t for t in texts if isinstance(t, str))
    return {"answer": answer[:500]}, "answer"  # answers align whatever their wording


def agent_calls(spans: Sequence[dict[str, Any]], limit: int | None = None) -> list[Call]:
    """The agent's tool calls tracecard observed and its model turns, in start-time order
    (the first `limit` of them when given)."""
    calls: list[Call] = []
    turns = sorted(turn_spans(spans).values(), key=lambda t: t.start_ns)
    for span in spans:
        observed = None if _is_model_turn(span) else _observed_call(span)
        if observed is None and not _is_model_turn(span):
            continue
        if limit is not None and len(calls) >= limit:
            break
        attributes = span["attributes"]
        if observed is None:  # a model turn
            tool: Any = MODEL_STEP
            arguments, identity = _model_step(attributes)
        else:
            tool = observed.tool
            arguments = parse_json_text(observed.raw_arguments)
            identity = canonical_arguments(arguments)
        result = attributes.get(sc.GEN_AI_TOOL_CALL_RESULT, attributes.get(sc.RESPONSE_BODY))
        end = span.get("end_time_unix_nano")
        start = int(span.get("start_time_unix_nano") or 0)
        # the latest turn handed out before the call (as the invocation scorer counts it)
        turn = turn_at(start, turns) if turns else None
        calls.append(
            Call(
                span_id=span["span_id"],
                tool=str(tool),
                arguments=arguments,
                # a call aligns with calls of its own turn only: one made a turn late diverges
                key=(str(tool) if turn is None else f"{tool}@{turn}", identity),
                turn=turn,
                error=span_error(span),
                result_preview=result_preview(result),
                duration_ns=None if end is None else max(0, int(end) - start),
            )
        )
    return calls


def _argument_texts(call: Call) -> dict[Any, str] | None:
    """Each argument's canonical JSON by name (None when the arguments are not an object)."""
    if not isinstance(call.arguments, dict):
        return None
    return {name: canonical_arguments(value) for name, value in call.arguments.items()}


def _mark_differences(call: Call, consensus: Call, theirs: dict[Any, str] | None) -> None:
    """Mark what `call` does otherwise than `consensus` (`theirs`: its argument texts)."""
    call.tool_differs = call.tool != consensus.tool
    mine = _argument_texts(call)
    if mine is not None and theirs is not None:
        call.shown = [
            Argument(name=str(name), text=text, differs=theirs.get(name) != text)
            for name, text in mine.items()
        ] + [
            Argument(name=str(name), text="(absent)", differs=True)
            for name in theirs
            if name not in mine
        ]
    else:
        texts = canonical_arguments(call.arguments)
        call.shown = [Argument("arguments", texts, call.key != consensus.key)]


def compare_runs(
    runs: Sequence[RunRow],
    spans_by_run: dict[str, list[dict[str, Any]]],
    scores_by_run: dict[str, list[ScoreRow]],
    totals: dict[str, int] | None = None,
    next_calls: dict[str, str] | None = None,
    verdicts_by_run: dict[str, list[VerdictRow]] | None = None,
) -> RunsComparison:
    """Align the runs' tool calls and mark where, and in which arguments, trials differ.

    `totals` (calls per run in all) and `next_calls` (the span id of each longer run's first
    call past the cap) are given when `spans_by_run` holds only each run's first `ALIGN_CAP`
    calls (`tracecard.traces.trial_calls`); without them both are found here."""
    made = [
        totals[run.id]
        if totals is not None and run.id in totals
        else sum(map(_is_agent_call, spans_by_run.get(run.id, [])))
        for run in runs
    ]
    columns = [
        TrialColumn(
            run=run,
            scores=sorted(scores_by_run.get(run.id, []), key=lambda s: component_key(s.component)),
            calls=agent_calls(spans_by_run.get(run.id, []), ALIGN_CAP + 1),
            verdict=trial_verdict(run, scores_by_run.get(run.id, [])),
            people=(verdicts_by_run or {}).get(run.id, []),
        )
        for run in runs
    ]
    hidden: list[str | None] = []
    for column in columns:  # a call past the cap is only where the trial's trace continues
        beyond = column.calls[ALIGN_CAP:]
        del column.calls[ALIGN_CAP:]
        known = (next_calls or {}).get(column.run.id)
        hidden.append(known if known is not None else beyond[0].span_id if beyond else None)
    alignment = align_calls([[c.key for c in col.calls] for col in columns])
    longer = any(total > ALIGN_CAP for total in made)
    rows = []
    for step in alignment.steps:
        first, final = alignment.rows[step.start], alignment.rows[step[-1]]
        cells = [
            None if index is None else columns[t].calls[index] for t, index in enumerate(first)
        ]
        lasts = [
            None if index is None else columns[t].calls[index] for t, index in enumerate(final)
        ]
        present = [c for c in cells if c is not None]
        counts = Counter(c.key for c in present)
        top = max(counts.values())
        consensus = next(c for c in present if counts[c.key] == top)
        theirs = _argument_texts(consensus)
        for cell in present:
            _mark_differences(cell, consensus, theirs)
        keys = {c.key if c else None for c in cells}
        rows.append(
            AlignedRow(
                cells=cells,
                diverges=len(keys) > 1,
                repeats=[0 if c is None else len(step) for c in cells],
                last=[
                    last
                    if last is not None
                    and cell is not None
                    and last.result_preview != cell.result_preview
                    else None
                    for cell, last in zip(cells, lasts, strict=True)
                ],
                first_row=step.start,
            )
        )
    components = sorted({s.component for col in columns for s in col.scores}, key=component_key)
    divergence = alignment.first_divergence
    shown_divergence = divergence if divergence is not None and divergence < len(rows) else None
    return RunsComparison(
        columns=columns,
        rows=rows,
        first_divergence=shown_divergence,
        components=components,
        agrees_to_cap=longer and shown_divergence is None,
        aligned_calls=ALIGN_CAP if longer else None,
        calls_beyond=[max(0, total - ALIGN_CAP) for total in made],
        calls_made=made,
        first_hidden=hidden,
    )
