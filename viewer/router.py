"""The viewer's one router: every page and asset, whose errors render as pages."""

from __future__ import annotations

from litestar import Router
from litestar.exceptions import HTTPException

from tracecard.viewer.assets import stylesheet, vendor_file
from tracecard.viewer.pages.compare import ComparePages
from tracecard.viewer.pages.experiments import ExperimentPages
from tracecard.viewer.pages.runs import RunPages
from tracecard.viewer.pages.suite_health import SuiteHealthPages
from tracecard.viewer.pages.trace import TracePages
from tracecard.viewer.rendering import viewer_error

__all__ = ["viewer_router"]


def viewer_router() -> Router:
    """Every viewer page and asset under one router, whose errors render as pages."""
    return Router(
        path="/",
        route_handlers=[
            ExperimentPages,
            RunPages,
            TracePages,
            ComparePages,
            SuiteHealthPages,
            vendor_file,
            stylesheet,
        ],
        exception_handlers={HTTPException: viewer_error, Exception: viewer_error},
        include_in_schema=False,
    )
