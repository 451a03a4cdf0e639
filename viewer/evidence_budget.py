"""Evidence layouts of the components measured against a budget or a list of checks:
efficiency (used against the budget, errors, redundant calls), completion (the answer's checks)
and composite (its weights). Mixed into viewer/evidence.py's builder."""

from __future__ import annotations

from typing import Any

from tracecard.viewer.evidence_tables import BuilderBase, Cell, Row, cut
from tracecard.viewer.trace_view import cited_span_ids


class BudgetLayouts(BuilderBase):
    # --- efficiency ---------------------------------------------------------------------------
    def efficiency(self, evidence: dict[str, Any]) -> None:
        spec = self.task.efficiency if self.task is not None else None
        parts: dict[str, Any] = evidence.get("parts") or {}
        if not isinstance(parts, dict):
            parts = {}
        self.used |= {"parts", "redundant", "errors"}
        tokens = None
        if evidence.get("input_tokens") is not None or evidence.get("output_tokens") is not None:
            tokens = (evidence.get("input_tokens") or 0) + (evidence.get("output_tokens") or 0)
        budget = (
            ("calls", evidence.get("calls"), evidence.get("optimal_calls"), "call_economy"),
            (
                "tool latency (ms)",
                evidence.get("latency_ms"),
                spec.max_latency_ms if spec else None,
                "latency",
            ),
            ("tokens", tokens, spec.max_tokens if spec else None, "token_budget"),
            (
                "model turns",
                evidence.get("model_turns"),
                spec.max_model_turns if spec else None,
                "model_turns",
            ),
            (
                "model time (ms)",
                evidence.get("model_latency_ms"),
                spec.max_model_latency_ms if spec else None,
                "model_latency",
            ),
        )
        self.used |= {
            "calls",
            "optimal_calls",
            "latency_ms",
            "input_tokens",
            "output_tokens",
            "model_turns",
            "model_latency_ms",
        }
        table = self.table("used against the budget", ("measure", "used", "budget", "part"))
        for label, used, limit, part in budget:
            if used is None and limit is None:
                continue
            score = parts.get(part)
            ok = None if score is None else score >= 1.0
            table.rows.append(
                Row(
                    [
                        Cell(label),
                        Cell(cut(used)),
                        Cell(cut(limit)),
                        Cell("—" if score is None else f"{score:.2f}"),
                    ],
                    ok,
                )
            )
        for part in ("non_redundant", "error_handling"):
            if part in parts:
                table.rows.append(
                    Row(
                        [
                            Cell(part.replace("_", " ")),
                            Cell(""),
                            Cell(""),
                            Cell(f"{parts[part]:.2f}"),
                        ],
                        parts[part] >= 1.0,
                    )
                )
        errors = [e for e in evidence.get("errors") or [] if isinstance(e, dict)]
        if errors:
            table = self.table(f"errors ({len(errors)})", ("error", "recovered"))
            for e in errors:
                table.rows.append(
                    Row(
                        [
                            Cell(cut(e.get("error_type"))),
                            Cell("yes" if e.get("recovered") else "no"),
                        ],
                        bool(e.get("recovered")),
                        [str(e["span_id"])] if e.get("span_id") else [],
                    )
                )
        redundant = [r for r in evidence.get("redundant") or [] if r is not None]
        if redundant:
            table = self.table(f"redundant calls ({len(redundant)})", ("call",))
            for r in redundant:
                table.rows.append(Row([Cell(cut(r))], False, list(cited_span_ids(r))))
            table.settle()

    # --- completion ---------------------------------------------------------------------------
    def completion(self, evidence: dict[str, Any]) -> None:
        self.used |= {"checks"}
        checks = [c for c in evidence.get("checks") or [] if isinstance(c, dict)]
        if checks:
            table = self.table("answer checks", ("check", "expected", "note"))
            for c in checks:
                written: dict[str, Any] = c["spec"] if isinstance(c.get("spec"), dict) else {}
                table.rows.append(
                    Row(
                        [
                            Cell(cut(c.get("check"))),
                            Cell(cut(written.get(str(c.get("check")), written))),
                            Cell(cut(c.get("note") or c.get("reason") or ""), code=False),
                        ],
                        c.get("passed") if isinstance(c.get("passed"), bool) else None,
                    )
                )
        for key in ("status", "require_finished", "answer_source"):
            self.fact(evidence, key)

    # --- composite ----------------------------------------------------------------------------
    def composite(self, evidence: dict[str, Any]) -> None:
        weights: dict[str, Any] = evidence.get("weights") or {}
        if not isinstance(weights, dict):
            weights = {}
        self.used |= {"weights", "constants"}
        if weights:
            table = self.table("weights", ("component", "weight"))
            for name, weight in weights.items():
                table.rows.append(Row([Cell(str(name)), Cell(cut(weight))]))
        for key in ("weighted", "gate", "efficiency_penalty", "excluded"):
            self.fact(evidence, key)
