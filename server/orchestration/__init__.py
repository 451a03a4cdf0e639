"""Running agents against tracecard: the environment contract, agent processes, the embedded
server and the printed summaries. The orchestrator itself is
`tracecard.server.orchestration.orchestrator`.

The names below load on first use: `tracecard compare` prints a summary table without loading
the agent runner, its HTTP client and the embedded server."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracecard.server.orchestration.agents import (
        AgentOutcome,
        AgentRunner,
        CommandAgent,
        PythonAgent,
        agent_environment,
        upstream_variable,
    )
    from tracecard.server.orchestration.embedded import embedded_server, free_port
    from tracecard.server.orchestration.process import (
        ProcessResult,
        TailBuffer,
        group_members,
        run_process,
    )

__all__ = [
    "AgentOutcome",
    "AgentRunner",
    "CommandAgent",
    "ProcessResult",
    "PythonAgent",
    "TailBuffer",
    "agent_environment",
    "embedded_server",
    "free_port",
    "group_members",
    "run_process",
    "upstream_variable",
]
_MODULE = {
    "agents": (
        "AgentOutcome",
        "AgentRunner",
        "CommandAgent",
        "PythonAgent",
        "agent_environment",
        "upstream_variable",
    ),
    "embedded": ("embedded_server", "free_port"),
    "process": ("ProcessResult", "TailBuffer", "group_members", "run_process"),
}
_HOME = {name: module for module, names in _MODULE.items() for name in names}


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(name)
    module = importlib.import_module(f"{__name__}.{_HOME[name]}")
    return getattr(module, name)
