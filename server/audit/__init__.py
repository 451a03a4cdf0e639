"""Auditing a benchmark rather than an agent: built-in baseline agents (`builtin:null`,
`builtin:oracle`, `builtin:random-tool`) and `tracecard audit`, which runs them and flags the
tasks that cannot measure anything (docs/audit.md)."""

from tracecard.server.audit.builtin import (
    BuiltinAgentError,
    builtin_argv,
    builtin_command,
    is_builtin,
)

__all__ = ["BuiltinAgentError", "builtin_argv", "builtin_command", "is_builtin"]
