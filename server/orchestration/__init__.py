"""Running agents against tracecard: the environment contract, agent processes, the embedded
server and the printed summaries. The orchestrator itself is
`tracecard.server.orchestration.orchestrator`."""

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
