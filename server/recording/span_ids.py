"""Span ids that start with the time: the stored spans' primary key grows at its end.

The spans table is keyed by span id. With OpenTelemetry's random span ids, each insert lands on
a page of the key's B-tree of its own, and the commit writes every page it touched: in process,
on SQLite with 100,000 spans stored, 29-33 us of the store thread's CPU a span, against
17-19 us with ids that grow with time (the commit alone 15-17 us against 5.5-7), and the gap
widens as the table grows (#24 item 2, docs/PERFORMANCE.md).

A span id here is 64 bits: the milliseconds of the clock modulo 2**27 (a period of 37.3 hours)
then 37 random bits. Trace ids stay wholly random (`is_trace_id_random`).

What it costs in collisions (two spans with one id: the second is skipped by the idempotent
insert). Random ids collide with a stored span with probability N / 2**64 a span, N the spans
stored: at 1,700 spans/s and N = 10**8, one collision in 3.4 years. Here, ids made in the same
millisecond of a period share their first 27 bits, so a new span can meet the spans made in its
millisecond: with R spans/s and a period of P seconds, one collision in 2**65 / (R**2 * P)
seconds, 3.0 years at R = 1,700 (a 2-core machine's proxy at full load) and 870 years at 100
spans/s. Spans made in the same millisecond of earlier periods add N / 2**64, the random ids'
own figure.

What it costs in guessing: an id's time part is known to whoever knows when the call was made,
so an agent that wanted to store a span of its own under a recorded span's id first (the
idempotent insert keeps the first) has 37 bits to guess instead of 64, within the ~200 ms
before the recorder's batch is stored: ~6,000 spans of OTLP ingest in that window give it one
chance in 2**37 / 6,000 (about 1 in 23 million) per call. The random bits come from the same
generator as before (`random.getrandbits`, reseeded after a fork).
"""

from __future__ import annotations

import random
import time

from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

__all__ = ["PERIOD_BITS", "RANDOM_BITS", "TimeOrderedIds"]

RANDOM_BITS = 37
PERIOD_BITS = 64 - RANDOM_BITS  # milliseconds, modulo 2**27: 37.3 hours
_PERIOD_MASK = (1 << PERIOD_BITS) - 1


class TimeOrderedIds(RandomIdGenerator):
    """Span ids whose first 27 bits are the clock's milliseconds (modulo 37.3 hours), the rest
    random; trace ids random (see the module docstring)."""

    def generate_span_id(self) -> int:
        prefix = (time.time_ns() // 1_000_000 & _PERIOD_MASK) << RANDOM_BITS
        span_id = prefix | random.getrandbits(RANDOM_BITS)
        while span_id == 0:  # the invalid span id: midnight of a period and 37 zero bits
            span_id = random.getrandbits(RANDOM_BITS)
        return span_id
