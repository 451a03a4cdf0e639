"""Multi round-trip requests (MCP 2026-07-28, SEP-2322) recorded and scored as one call."""

from tracecard.server.mrtr.calls import LogicalCalls
from tracecard.server.mrtr.feature import install_mrtr, mrtr_lifespan

__all__ = ["LogicalCalls", "install_mrtr", "mrtr_lifespan"]
