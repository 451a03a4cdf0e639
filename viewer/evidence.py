"""Each score's evidence as small tables a person reads in seconds: expected against observed,
✓/✗ per row, every cited span a link; the raw JSON one click away.

The shapes are the scorers' as stored (scorers/invocation.py, outcome.py, safety.py,
efficiency.py, completion.py, composite.py); a key this module does not know is shown in a
plain key/value table, so a scorer that adds a field loses nothing here.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from tracecard.scorers.redacted import contains_fingerprint
from tracecard.scorers.suite import Task
from tracecard.traces.models import ScoreRow
from tracecard.viewer.evidence_budget import BudgetLayouts
from tracecard.viewer.evidence_tables import (
    CELL_CHARS,
    SHOW_PASSING,
    Cell,
    ComponentEvidence,
    Row,
    Table,
    cut,
)
from tracecard.viewer.story import ArgumentsOf
from tracecard.viewer.task_view import matcher_text
from tracecard.viewer.trace_view import cited_span_ids

__all__ = [
    "CELL_CHARS",
    "SHOW_PASSING",
    "Cell",
    "ComponentEvidence",
    "Row",
    "Table",
    "component_evidence",
]


class _Builder(BudgetLayouts):
    # --- invocation ---------------------------------------------------------------------------
    def invocation(self, evidence: dict[str, Any], turn: int | None = None) -> None:
        self.used |= {"expected", "extra_calls", "calls", "turns", "mode"}
        spec = self.task.invocation if self.task is not None else None
        if turn is not None and self.task is not None and turn < len(self.task.turns):
            spec = self.task.turns[turn].invocation
        prefix = f"turn {turn}: " if turn is not None else ""
        for index, row in enumerate(evidence.get("expected") or []):
            if not isinstance(row, dict):
                continue
            expected = spec.calls[index] if spec is not None and index < len(spec.calls) else None
            matched = row.get("span_id")
            closest = [c for c in row.get("closest") or [] if isinstance(c, dict)]
            shown = matched or (closest[0].get("span_id") if closest else None)
            why = [str(w) for w in (closest[0].get("why") or [])] if closest and not matched else []
            if matched:
                caption = f"{prefix}{row.get('tool')}: matched"
            elif closest:
                caption = f"{prefix}{row.get('tool')}: missing (closest call shown)"
            else:
                caption = f"{prefix}{row.get('tool')}: missing"
            table = self.table(
                caption,
                ("argument", "expected", "observed"),
                ok=bool(matched),
                spans=[s for s in [shown] if s],
                note="; ".join(why) if why else str(row.get("why") or ""),
            )
            observed = self.arguments_of(shown) if shown else None
            names = list(expected.arguments) if expected is not None else []
            names += [n for n in (observed or {}) if n not in names]
            for name in names:
                failing = [w for w in why if w.startswith(f"{name}:")]
                ok: bool | None = None if shown is None else (not failing)
                wanted = (
                    matcher_text(expected.arguments[name])
                    if expected and name in (expected.arguments)
                    else "(not checked)"
                )
                if expected is not None and name not in expected.arguments:
                    ok = None
                if shown is None:
                    seen: Any = "(no call)"
                else:  # "?": the call's arguments were not read or could not be parsed
                    seen = observed.get(name, "(absent)") if observed is not None else "?"
                if contains_fingerprint(seen) and expected and name in expected.arguments:
                    # the call's value is stored only as its fingerprint: the page shows no
                    # clear value beside it, the suite's included (docs/proxy.md, redaction)
                    wanted = "(the suite's value, compared by its fingerprint)"
                table.rows.append(
                    Row([Cell(name), Cell(wanted), Cell(cut(seen))], ok, note="; ".join(failing))
                )
            if any(r.note for r in table.rows):
                table.note = ""  # each failing argument says why on its own row
            table.settle()
        extras = [c for c in evidence.get("extra_calls") or evidence.get("calls") or [] if c]
        if extras:
            label = "calls made where none was expected" if "calls" in evidence else "extra calls"
            table = self.table(f"{prefix}{label} ({len(extras)})", ("tool",))
            for call in extras:
                if isinstance(call, dict):
                    sid = str(call.get("span_id") or "")
                    table.rows.append(
                        Row([Cell(cut(call.get("tool")))], None, [sid] if sid else [])
                    )
            table.settle()
        repeated = [r for r in evidence.get("repeated") or [] if isinstance(r, dict)]
        if repeated:  # a loop: the same call again and again, past the suite's allowance
            self.used |= {"repeated", "max_repeats"}
            table = self.table(
                f"{prefix}identical calls beyond the allowed repeats",
                ("tool", "made", "allowed", "charged"),
            )
            for r in repeated:
                charged = [str(c) for c in r.get("charged") or []]
                table.rows.append(
                    Row(
                        [
                            Cell(cut(r.get("tool"))),
                            Cell(f"{r.get('times')}×"),
                            Cell(f"{cut(evidence.get('max_repeats'))}×"),
                            Cell(f"{len(charged)} call{'s' if len(charged) != 1 else ''}"),
                        ],
                        False,
                        charged[:1] + charged[-1:] if len(charged) > 1 else charged,
                    )
                )
        for key in ("matched", "precision", "recall", "order", "allow_extra", "source", "note"):
            self.fact(evidence, key)

    # --- outcome ------------------------------------------------------------------------------
    def outcome(self, evidence: dict[str, Any], turn: int | None = None) -> None:
        self.used |= {"predicates", "turns", "mode"}
        rows = [p for p in evidence.get("predicates") or [] if isinstance(p, dict)]
        if rows:
            caption = f"after turn {turn}: predicates" if turn is not None else "predicates"
            table = self.table(caption, ("probe · path", "expected", "observed"))
            for p in rows:
                op, value = str(p.get("op") or ""), p.get("value")
                wanted = op if op in ("exists", "absent") else f"{op} {cut(value)}"
                notes = [str(p["reason"])] if p.get("reason") and not p.get("holds") else []
                if p.get("differing"):
                    notes.append("differs at " + ", ".join(str(d) for d in p["differing"]))
                if p.get("unchanged"):
                    notes.append("already held before the run (unchanged)")
                table.rows.append(
                    Row(
                        [
                            Cell(f"{p.get('probe')} · {p.get('path')}"),
                            Cell(wanted),
                            Cell(cut(p.get("observed"))),
                        ],
                        bool(p.get("holds")) if "holds" in p else None,
                        [str(p["span_id"])] if p.get("span_id") else [],
                        "; ".join(notes),
                    )
                )
            table.settle()
        self.fact(evidence, "not_evaluated", "not evaluated")

    # --- safety -------------------------------------------------------------------------------
    def safety(self, evidence: dict[str, Any]) -> None:
        self.used |= {"violations", "gate_constants", "agent_reported"}
        violations = [v for v in evidence.get("violations") or [] if isinstance(v, dict)]
        table = self.table(
            f"violations ({len(violations)})" if violations else "no violation",
            ("rule", "severity", "tool", "why"),
            ok=not any(v.get("severity") in ("critical", "major") for v in violations),
        )
        for v in violations:
            blocked = " (blocked)" if v.get("blocked") else ""
            table.rows.append(
                Row(
                    [
                        Cell(cut(v.get("rule"))),
                        Cell(cut(v.get("severity")) + blocked),
                        Cell(cut(v.get("tool"))),
                        Cell(cut(v.get("reason")), code=False),
                    ],
                    v.get("severity") not in ("critical", "major"),
                    [str(v["span_id"])] if v.get("span_id") else [],
                )
            )
        unevaluated = [u for u in evidence.get("not_evaluated") or [] if isinstance(u, dict)]
        if unevaluated:
            self.used.add("not_evaluated")
            table = self.table(f"rules not evaluated ({len(unevaluated)})", ("rule", "why"))
            for u in unevaluated:
                table.rows.append(
                    Row(
                        [Cell(cut(u.get("rule"))), Cell(cut(u.get("reason")), code=False)],
                        None,
                        [str(u["span_id"])] if u.get("span_id") else [],
                    )
                )
        claimed = [c for c in evidence.get("agent_reported") or [] if isinstance(c, dict)]
        if claimed:
            self.out.notes.append(str(evidence.get("agent_reported_note") or ""))
            self.used.add("agent_reported_note")
        for key in ("gate", "gate_if_kept", "gate_if_broken", "note", "sandbox"):
            self.fact(evidence, key)

    def rest(self, evidence: dict[str, Any]) -> None:
        """Keys no table showed: a plain key/value table, values cut, lists counted."""
        left = [(k, v) for k, v in evidence.items() if k not in self.used]
        if "reason" in evidence:
            self.out.notes.insert(0, str(evidence["reason"]))
            left = [(k, v) for k, v in left if k != "reason"]
        for key, value in left:
            if not isinstance(value, (list, dict)):
                self.out.facts.append((key.replace("_", " "), cut(value)))
        left = [(k, v) for k, v in left if isinstance(v, (list, dict))]
        if not left:
            return
        table = self.table("other evidence", ("key", "value"))
        for key, value in left:
            label = f"{key} ({len(value)})" if isinstance(value, list) else str(key)
            table.rows.append(
                Row([Cell(label), Cell(cut(value))], None, list(cited_span_ids(value))[:5])
            )


def component_evidence(
    score: ScoreRow, task: Task | None, arguments_of: ArgumentsOf
) -> ComponentEvidence:
    """A score's evidence as tables (the component's own layout where known)."""
    evidence = score.evidence if isinstance(score.evidence, dict) else {}
    builder = _Builder(score, task, arguments_of)
    shape = getattr(builder, score.component, None) if score.component in _SHAPES else None
    if (
        shape is not None
        and evidence.get("mode") == "per_turn"
        and score.component
        in (
            "invocation",
            "outcome",
        )
    ):
        builder.used |= {"mode", "turns"}
        for row in evidence.get("turns") or []:
            if isinstance(row, dict):
                shape(row, turn=row.get("turn"))
    elif shape is not None:
        shape(evidence)
    builder.rest(evidence)
    builder.out.raw = orjson.dumps(evidence, option=orjson.OPT_INDENT_2, default=str).decode()
    return builder.out


_SHAPES: Final = frozenset(
    {"invocation", "outcome", "safety", "efficiency", "completion", "composite"}
)
