"""Recording and storage: SQLModel tables, the engine, the span exporter, OTLP codecs, queries.

`traces` imports neither `scorers` nor Litestar; everything above builds on it.
"""

from tracecard.traces.engine import default_db_url, make_engine, normalise_url
from tracecard.traces.exporter import SqlSpanExporter, readable_to_dict
from tracecard.traces.models import ExperimentRow, RunRow, ScoreRow, SpanRow, SuiteRow, VerdictRow
from tracecard.traces.otlp import encode_otlp_json
from tracecard.traces.store import SpanDict, Store, span_row_to_dict

__all__ = [
    "ExperimentRow",
    "RunRow",
    "ScoreRow",
    "SpanDict",
    "SpanRow",
    "SqlSpanExporter",
    "Store",
    "SuiteRow",
    "VerdictRow",
    "default_db_url",
    "encode_otlp_json",
    "make_engine",
    "normalise_url",
    "readable_to_dict",
    "span_row_to_dict",
]
