"""The audit's report: one JSON document (`tracecard audit --json`), a rich table and Markdown,
all built from the same dictionary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.table import Table

from tracecard.scorers.audit import DEFECT_KINDS, DEFECT_LABELS, TaskAudit, checks_not_run

__all__ = ["AUDIT_SCHEMA_VERSION", "LABELS", "audit_document", "audit_markdown", "audit_table"]

AUDIT_SCHEMA_VERSION = 2  # 2: the unseen_gold kind
LABELS = DEFECT_LABELS


def audit_document(
    *,
    suite: str,
    version: str,
    base_url: str,
    trials: int,
    experiments: dict[str, str],
    audits: Sequence[TaskAudit],
) -> dict[str, Any]:
    """The audit as JSON: per task its findings (kind, reason, the runs that show it, with their
    trace URLs) and each baseline's passes per component; the counts per kind."""
    tasks = []
    for audit in audits:
        findings = [
            {
                "kind": f.kind,
                "label": LABELS[f.kind],
                "reason": f.reason,
                "runs": [{"id": r, "url": f"{base_url}/runs/{r}"} for r in f.runs],
            }
            for f in audit.findings
        ]
        tasks.append({"task_id": audit.task_id, "findings": findings, "baselines": audit.baselines})
    counts = {kind: sum(1 for a in audits if kind in a.kinds) for kind in DEFECT_KINDS}
    return {
        "schema_version": AUDIT_SCHEMA_VERSION,
        "suite": {"name": suite, "version": version},
        "trials": trials,
        "experiments": {
            agent: {"id": eid, "url": f"{base_url}/experiments/{eid}"}
            for agent, eid in experiments.items()
        },
        "checks": checks_not_run(list(experiments), trials),
        "tasks": tasks,
        "counts": counts,
        "flagged_tasks": sum(1 for a in audits if a.findings),
        "total_tasks": len(audits),
    }


def audit_table(document: dict[str, Any]) -> Table:
    """One row per finding (task, defect, reason, the first run's trace)."""
    table = Table(
        title=f"audit of suite {document['suite']['name']}: "
        f"{document['flagged_tasks']} of {document['total_tasks']} tasks flagged",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    table.add_column("task", overflow="fold", max_width=28)
    table.add_column("defect", no_wrap=True)
    table.add_column("why, and a run that shows it", overflow="fold", ratio=1)
    for task in document["tasks"]:
        for finding in task["findings"]:
            first = finding["runs"][0]["url"] if finding["runs"] else ""
            table.add_row(task["task_id"], finding["label"], f"{finding['reason']}\n[dim]{first}")
    return table


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def audit_markdown(document: dict[str, Any]) -> str:
    """The audit as Markdown: the counts, the checks that did not run, a table of findings."""
    suite = document["suite"]
    lines = [
        f"## Audit of suite `{suite['name']}` ({suite['version'][:12]})",
        "",
        f"{document['flagged_tasks']} of {document['total_tasks']} tasks flagged; "
        f"{document['trials']} trial(s) per baseline: "
        + ", ".join(f"[{a}]({e['url']})" for a, e in document["experiments"].items())
        + ".",
        "",
        "| defect | tasks |",
        "|---|---|",
        *(f"| {LABELS[k]} | {n} |" for k, n in document["counts"].items()),
        "",
    ]
    skipped = {k: why for k, why in document["checks"].items() if why}
    for kind, why in skipped.items():
        lines.append(f"- not checked: {LABELS[kind]} ({why})")
    if skipped:
        lines.append("")
    flagged = [t for t in document["tasks"] if t["findings"]]
    if flagged:
        lines += ["| task | defect | why | evidence |", "|---|---|---|---|"]
        for task in flagged:
            for finding in task["findings"]:
                links = ", ".join(f"[{r['id'][:8]}]({r['url']})" for r in finding["runs"][:3])
                lines.append(
                    f"| `{task['task_id']}` | {finding['label']} | {_md(finding['reason'])} "
                    f"| {links} |"
                )
    else:
        lines.append("No task flagged.")
    return "\n".join(lines) + "\n"
