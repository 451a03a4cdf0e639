"""Recording and storage: SQLModel tables, the engine, the span exporter, OTLP codecs, queries.

`traces` imports neither `scorers` nor Litestar; everything above builds on it. The package is
lazy: `tracecard.traces.semconv` (what the pure scorers read) loads no SQLAlchemy, SQLModel,
OTel SDK or protobuf; the names below import their module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracecard.traces.engine import default_db_url, make_engine, normalise_url
    from tracecard.traces.experiments import StoredExperiment, stored_experiment
    from tracecard.traces.exporter import SqlSpanExporter, readable_to_dict
    from tracecard.traces.models import (
        ExperimentRow,
        RunRow,
        ScoreRow,
        SpanRow,
        SuiteRow,
        VerdictRow,
    )
    from tracecard.traces.otlp import encode_otlp_json
    from tracecard.traces.store import SpanDict, Store, span_row_to_dict

# Public name -> the module that defines it.
_HOMES = {
    "ExperimentRow": "models",
    "RunRow": "models",
    "ScoreRow": "models",
    "SpanRow": "models",
    "SuiteRow": "models",
    "VerdictRow": "models",
    "SpanDict": "store",
    "Store": "store",
    "span_row_to_dict": "store",
    "SqlSpanExporter": "exporter",
    "readable_to_dict": "exporter",
    "default_db_url": "engine",
    "make_engine": "engine",
    "normalise_url": "engine",
    "encode_otlp_json": "otlp",
    "StoredExperiment": "experiments",
    "stored_experiment": "experiments",
}

__all__ = [
    "ExperimentRow",
    "RunRow",
    "ScoreRow",
    "SpanDict",
    "SpanRow",
    "SqlSpanExporter",
    "Store",
    "StoredExperiment",
    "SuiteRow",
    "VerdictRow",
    "default_db_url",
    "encode_otlp_json",
    "make_engine",
    "normalise_url",
    "readable_to_dict",
    "span_row_to_dict",
    "stored_experiment",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tracecard.traces' has no attribute {name!r}")
    return getattr(importlib.import_module(f"tracecard.traces.{home}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
