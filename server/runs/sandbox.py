"""Per-run sandboxes: a fresh copy of a task's fixture directory for each run of an upstream.

A sandbox lives at `<sandbox_root>/<run_id>-<upstream>` and is kept after the run so that outcome
checks and people can read the end state. Only the newest `sandbox_retention` are kept; the
creation time of each is a marker file under `<sandbox_root>/.created/` (never inside the
sandbox, whose listing the agent sees).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Collection
from pathlib import Path

from tracecard.scorers import Suite
from tracecard.scorers.spec import FileProbe
from tracecard.scorers.tool_check import ToolFinding
from tracecard.server.settings import ConfigError, Settings

log = logging.getLogger(__name__)

PLACEHOLDER = "{sandbox}"
TASK_PARAM = re.compile(r"\{task\.([A-Za-z_][A-Za-z0-9_]*)\}")  # a task's `params` entry
_MARKERS = ".created"


def sandbox_root(settings: Settings) -> Path:
    return settings.resolve_path(settings.sandbox_root).resolve()


def create_sandbox(
    settings: Settings,
    run_id: str,
    upstream: str,
    fixture: str | None,
    keep: Collection[str] = (),
    task_fixture: str | None = None,
) -> Path:
    """Copy `fixture` (or nothing) into a fresh sandbox for the run, then the task's own fixture
    over it (its files win); prune old sandboxes."""
    root = sandbox_root(settings)
    path = root / f"{run_id}-{upstream}"
    markers = root / _MARKERS
    markers.mkdir(parents=True, exist_ok=True)
    if path.exists():  # a second start in the same run keeps the run's state
        return path
    if fixture is not None:
        source = settings.resolve_path(fixture)
        if not source.is_dir():
            raise ConfigError(  # the stdio pool names the upstream
                f"fixture {str(source)!r} is not a directory (an upstream's `fixture` is "
                "resolved from the folder of tracecard.toml)"
            )
        shutil.copytree(source, path, symlinks=True)
    else:
        path.mkdir(parents=True)
    if task_fixture is not None:
        source = settings.resolve_path(task_fixture)
        if not source.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            raise ConfigError(
                f"the task's fixture {str(source)!r} is not a directory (a task's `fixture` is "
                "resolved from the folder of tracecard.toml)"
            )
        shutil.copytree(source, path, symlinks=True, dirs_exist_ok=True)
    (markers / path.name).touch()
    prune(settings, keep={path.name, *keep})
    return path


def prune(settings: Settings, keep: Collection[str] = ()) -> list[Path]:
    """Remove the oldest sandboxes beyond `settings.sandbox_retention`; return what was removed."""
    root = sandbox_root(settings)
    markers = root / _MARKERS
    if not markers.is_dir():
        return []
    entries = []
    for marker in markers.iterdir():
        try:
            entries.append((marker.stat().st_mtime_ns, marker.name))
        except FileNotFoundError:
            continue
    entries.sort(reverse=True)
    removed: list[Path] = []
    for _created, name in entries[max(settings.sandbox_retention, 0) :]:
        if name in keep:
            continue
        path = root / name
        shutil.rmtree(path, ignore_errors=True)
        with_marker = markers / name
        if with_marker.exists():
            os.unlink(with_marker)
        removed.append(path)
    if removed:
        log.info("removed %d old sandboxes under %s", len(removed), root)
    return removed


def substitute(value: str, sandbox: Path | None, params: dict[str, str] | None = None) -> str:
    """`value` with `{sandbox}` replaced by the sandbox path and each `{task.NAME}` by the
    run's task parameter NAME (the task's `params`)."""
    if TASK_PARAM.search(value):

        def param(match: re.Match[str]) -> str:
            name = match.group(1)
            if params is None or name not in params:
                known = ", ".join(sorted(params or {})) or "none"
                raise ConfigError(
                    f"{value!r} uses {{task.{name}}} but the run's task has no param {name!r}"
                    f' (its params: {known}); set `params = {{ {name} = "..." }}` on the task'
                )
            return params[name]

        value = TASK_PARAM.sub(param, value)
    if PLACEHOLDER not in value:
        return value
    if sandbox is None:
        raise ConfigError(f"{value!r} uses {PLACEHOLDER} but the upstream has no sandbox")
    return value.replace(PLACEHOLDER, str(sandbox))


def uses_task_params(command: list[str], env: dict[str, str], cwd: str | None) -> bool:
    """Whether `{task.NAME}` appears in the command, the environment or the working directory."""
    return any(TASK_PARAM.search(v) for v in [*command, *env.values(), cwd or ""])


def needs_sandbox(command: list[str], env: dict[str, str], cwd: str | None) -> bool:
    """Whether `{sandbox}` appears in the command, the environment or the working directory."""
    values = [*command, *env.values(), cwd or ""]
    return any(PLACEHOLDER in v for v in values)


def gives_runs_a_sandbox(settings: Settings, name: str) -> bool:
    """Whether each run of upstream `name` gets a sandbox: a `per_run` stdio server with a
    `fixture` or `{sandbox}` in its command, env or cwd (what `StdioPool` creates)."""
    upstream = settings.upstreams.get(name)
    if upstream is None or upstream.command is None or not upstream.per_run:
        return False
    return upstream.fixture is not None or needs_sandbox(
        upstream.command, upstream.env, upstream.cwd
    )


def file_probe_findings(settings: Settings, suite: Suite, source: str = "") -> list[ToolFinding]:
    """A file probe reads the run's sandbox: a task that has one but none of whose upstreams
    gives runs a sandbox would be "not evaluated" on every run, so the check says so first."""
    where = f"{source}: " if source else ""
    findings: list[ToolFinding] = []
    for index, task in enumerate(suite.tasks):
        outcomes = [task.outcome, *(turn.outcome for turn in task.turns)]
        probes = [p for o in outcomes if o is not None for p in o.probes]
        files = [p for p in probes if isinstance(p, FileProbe)]
        upstreams = task.upstreams or sorted(settings.upstreams)
        if any(u not in settings.upstreams for u in upstreams):
            continue  # an upstream this server does not configure is its own error
        if not files or any(gives_runs_a_sandbox(settings, u) for u in upstreams):
            continue
        findings.append(
            ToolFinding(
                "error",
                f"{where}tasks[{index}] ({task.id!r}): file probe {files[0].id!r} reads the run's "
                f"sandbox, but none of its upstreams ({', '.join(upstreams) or 'none'}) gives a "
                "run one: make one a per_run stdio upstream with a `fixture` (or `{sandbox}` in "
                "its command), or probe the state another way (a tool or http probe)",
            )
        )
    return findings
