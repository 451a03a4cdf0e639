"""Agents under test and the environment contract they are started with (docs/agents.md).

Two kinds: `CommandAgent` runs a shell-style command per run (what `tracecard run --agent` uses);
`PythonAgent` awaits an async function in this process (what `tracecard demo` uses, to avoid
paying a Python start-up per run). Both receive the same environment variables.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import traceback
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tracecard.client import RunHandle
from tracecard.server.orchestration.process import ProcessResult, run_process

__all__ = [
    "AgentOutcome",
    "AgentRunner",
    "CommandAgent",
    "PythonAgent",
    "agent_environment",
    "model_variables",
    "upstream_variable",
]

ENV_PREFIX = "TRACECARD_"


@dataclass(frozen=True)
class AgentOutcome:
    """How one agent run ended, before the server scores it."""

    status: str  # finished | errored | timed_out
    final_answer: str | None
    error: str | None
    exit_code: int | None
    duration_s: float
    stdout_tail: str = ""
    stderr_tail: str = ""


class AgentRunner(Protocol):
    """Runs one trial given its environment; must honour `timeout_s`."""

    async def __call__(
        self, env: dict[str, str], answer_file: Path, timeout_s: float
    ) -> AgentOutcome:
        """Run the agent once and report how it ended."""
        ...


def upstream_variable(name: str) -> str:
    """`TRACECARD_UPSTREAM_<NAME>`: the upstream name upper-cased, other characters as `_`."""
    return f"{ENV_PREFIX}UPSTREAM_{_variable_suffix(name)}"


# The base-URL variables the official SDKs (and the frameworks on them) read by themselves.
_SDK_BASE_URL = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}


def model_variables(run: RunHandle) -> dict[str, str]:
    """`TRACECARD_LLM_URL_<NAME>` per model upstream; `OPENAI_BASE_URL`/`ANTHROPIC_BASE_URL`
    when exactly one upstream is of that kind (so an unchanged agent's model calls join the run)."""
    found: dict[str, str] = {}
    by_kind: dict[str, list[str]] = {}
    for name, kind in sorted(run.models.items()):
        url = run.urls.get(name)
        if url is None:
            continue
        found[f"{ENV_PREFIX}LLM_URL_{_variable_suffix(name)}"] = url
        by_kind.setdefault(kind, []).append(url)
    for kind, urls in by_kind.items():
        if len(urls) == 1 and kind in _SDK_BASE_URL:
            found[_SDK_BASE_URL[kind]] = urls[0]
    return found


def _variable_suffix(name: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


def agent_environment(
    run: RunHandle,
    *,
    server_url: str,
    experiment_id: str,
    config_name: str,
    answer_file: Path,
    token: str | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment an agent is started with: `base` (default: ours) plus the contract."""
    env = dict(os.environ if base is None else base)
    env.update(
        {
            f"{ENV_PREFIX}URL": server_url,
            f"{ENV_PREFIX}RUN_ID": run.id,
            f"{ENV_PREFIX}EXPERIMENT_ID": experiment_id,
            f"{ENV_PREFIX}CONFIG": config_name,
            f"{ENV_PREFIX}TASK_ID": run.task_id,
            f"{ENV_PREFIX}TRIAL": str(run.trial),
            f"{ENV_PREFIX}INSTRUCTION": run.instruction,
            f"{ENV_PREFIX}ANSWER_FILE": str(answer_file),
            f"{ENV_PREFIX}UPSTREAMS": json.dumps(run.urls, sort_keys=True),
            # the exact traces endpoint: what `OTLPSpanExporter(endpoint=...)` takes as is
            f"{ENV_PREFIX}OTLP_ENDPOINT": f"{server_url}/v1/traces",
            # what `tracecard wrap` reads: a stdio server wrapped by the agent joins the run
            f"{ENV_PREFIX}RUN": run.id,
            f"{ENV_PREFIX}SERVER": server_url,
        }
    )
    for name, url in run.urls.items():
        env[upstream_variable(name)] = url
    env.update(model_variables(run))
    tool_urls = [url for name, url in run.urls.items() if name not in run.models]
    if len(tool_urls) == 1:
        env[f"{ENV_PREFIX}MCP_URL"] = tool_urls[0]
    if token:
        env[f"{ENV_PREFIX}API_TOKEN"] = token
    # an OpenTelemetry-instrumented agent's own spans join the run (POST /v1/traces)
    resource = env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    env["OTEL_RESOURCE_ATTRIBUTES"] = ",".join(
        p for p in (resource, f"tracecard.run.id={run.id}") if p
    )
    env.setdefault("OTEL_EXPORTER_OTLP_ENDPOINT", server_url)
    if run.traceparent:  # the environment carrier of W3C trace context (OpenTelemetry's spec)
        env["TRACEPARENT"] = run.traceparent
        env.pop("TRACESTATE", None)  # a tracestate of another trace must not ride along
    return env


def read_answer(answer_file: Path, stdout_tail: str) -> str | None:
    """The final answer: the answer file when the agent wrote one, else stdout's last line."""
    try:
        written = answer_file.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        written = ""
    if written:
        return written
    lines = [line.strip() for line in stdout_tail.splitlines() if line.strip()]
    return lines[-1] if lines else None


def _tail(text: str, limit: int = 2000) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


class CommandAgent:
    """An agent started as a command (split like a shell would, run without a shell)."""

    def __init__(
        self,
        command: str | list[str],
        *,
        cwd: str | Path | None = None,
        grace_s: float = 5.0,
        stdout_limit: int = 64 * 1024,
        stderr_limit: int = 16 * 1024,
        die_with_parent: bool = False,
    ) -> None:
        self.die_with_parent = die_with_parent
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise ValueError("the agent command is empty")
        self.cwd = cwd
        self.grace_s = grace_s
        self.stdout_limit = stdout_limit
        self.stderr_limit = stderr_limit

    async def __call__(
        self, env: dict[str, str], answer_file: Path, timeout_s: float
    ) -> AgentOutcome:
        """Run the command once; its exit code, output tails and answer file say how it went."""
        result = await run_process(
            self.argv,
            env=env,
            cwd=self.cwd,
            timeout_s=timeout_s,
            grace_s=self.grace_s,
            stdout_limit=self.stdout_limit,
            stderr_limit=self.stderr_limit,
            die_with_parent=self.die_with_parent,
        )
        status, error = self._classify(result, timeout_s)
        return AgentOutcome(
            status=status,
            final_answer=read_answer(answer_file, result.stdout_tail),
            error=error,
            exit_code=result.exit_code,
            duration_s=result.duration_s,
            stdout_tail=result.stdout_tail,
            stderr_tail=result.stderr_tail,
        )

    def _classify(self, result: ProcessResult, timeout_s: float) -> tuple[str, str | None]:
        """The run's status and, unless it finished, why: in words a person can act on."""
        if result.start_error is not None:
            return "errored", result.start_error
        stderr = _tail(result.stderr_tail)
        if result.timed_out:
            error = (
                f"timed out after {timeout_s:g}s: stopped its process group "
                f"(SIGTERM, SIGKILL after {self.grace_s:g}s)"
            )
            return "timed_out", error + (f"; stderr tail:\n{stderr}" if stderr else "")
        code = result.exit_code
        if code != 0:
            how = (
                f"exited with code {code}"
                if code and code > 0
                else f"was killed by signal {-(code or 0)}"
            )
            return "errored", f"agent {how}" + (
                f"; stderr tail:\n{stderr}" if stderr else "; no stderr"
            )
        return "finished", None


PythonAgentFunction = Callable[[Mapping[str, str]], Awaitable[str | None]]


class PythonAgent:
    """An agent that is an async function of the environment, awaited in this process.

    It must be cooperative (awaiting, not blocking) so that the timeout can cancel it."""

    def __init__(self, function: PythonAgentFunction) -> None:
        self.function = function

    async def __call__(
        self, env: dict[str, str], answer_file: Path, timeout_s: float
    ) -> AgentOutcome:
        """Await the function once, cancelling it at the timeout."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(timeout_s):
                answer = await self.function(env)
        except TimeoutError:
            return AgentOutcome(
                status="timed_out",
                final_answer=read_answer(answer_file, ""),
                error=f"timed out after {timeout_s:g}s: cancelled",
                exit_code=None,
                duration_s=loop.time() - started,
            )
        except Exception as exc:  # noqa: BLE001 - the agent's failure is the run's outcome
            trace = "".join(traceback.format_exception(exc))
            return AgentOutcome(
                status="errored",
                final_answer=None,
                error=f"agent raised {type(exc).__name__}: {exc}; traceback tail:\n{_tail(trace)}",
                exit_code=None,
                duration_s=loop.time() - started,
                stderr_tail=_tail(trace),
            )
        if answer is None:
            answer = read_answer(answer_file, "")
        return AgentOutcome(
            status="finished",
            final_answer=answer,
            error=None,
            exit_code=0,
            duration_s=loop.time() - started,
        )
