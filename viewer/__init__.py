"""The web viewer: server-rendered pages with htmx partials.

Pages: experiments and their scorecards, runs with filters, a run's trace, trials of a task side
by side, and one experiment against another. Every response carries a strict CSP; tool payloads
are escaped and collapsed. The viewer never imports `server`: handlers read `state.runtime`.
"""

from __future__ import annotations

from litestar import Router
from litestar.exceptions import HTTPException

from tracecard.viewer.align import Alignment, align_calls
from tracecard.viewer.assets import CSP, SECURITY_HEADERS, htmx_path, htmx_script, stylesheet
from tracecard.viewer.pages.compare import ComparePages
from tracecard.viewer.pages.experiments import ExperimentPages
from tracecard.viewer.pages.runs import RunPages
from tracecard.viewer.pages.trace import TracePages
from tracecard.viewer.rendering import viewer_error
from tracecard.viewer.trace_view import TraceView, build_trace

__all__ = [
    "CSP",
    "SECURITY_HEADERS",
    "Alignment",
    "TraceView",
    "align_calls",
    "build_trace",
    "viewer_router",
    "htmx_path",
    "viewer_router",
]


def viewer_router() -> Router:
    """Every viewer page and asset under one router, whose errors render as pages."""
    return Router(
        path="/",
        route_handlers=[
            ExperimentPages,
            RunPages,
            TracePages,
            ComparePages,
            htmx_script,
            stylesheet,
        ],
        exception_handlers={HTTPException: viewer_error, Exception: viewer_error},
        include_in_schema=False,
    )

