"""The web viewer: server-rendered pages with htmx partials.

Pages: experiments and their scorecards, runs with filters, a run's trace, trials of a task side
by side, and one experiment against another. Every response carries a strict CSP; tool payloads
are escaped and collapsed. The viewer never imports `server`: handlers read `state.runtime`.
"""

from __future__ import annotations

from tracecard.viewer.align import Alignment, align_calls
from tracecard.viewer.assets import CSP, SECURITY_HEADERS, htmx_path
from tracecard.viewer.router import viewer_router
from tracecard.viewer.schema_page import SchemaPage, schema_router
from tracecard.viewer.trace_view import TraceView, build_trace

__all__ = [
    "CSP",
    "SECURITY_HEADERS",
    "Alignment",
    "SchemaPage",
    "TraceView",
    "align_calls",
    "build_trace",
    "htmx_path",
    "schema_router",
    "viewer_router",
]
