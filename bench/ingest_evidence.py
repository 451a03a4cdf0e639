"""What deciding evidence costs OTLP ingest per span, in process: taking the wrap MACs off and
marking agent-reported spans (`tracecard.server.recording.ingested`), for 20,000 span dicts of
each kind: chat spans (claim nothing), unsigned tool-call spans (marked agent_reported) and
spans `tracecard wrap` signed (MAC checked). Best of 5 rounds; no server, no database.

Run: .venv/bin/python bench/ingest_evidence.py [--spans 20000]
"""

from __future__ import annotations

import argparse
import copy
import secrets
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from otlp_ingest import make_batch  # noqa: E402

from tracecard.server.recording.ingested import distrust, take_macs  # noqa: E402
from tracecard.server.recording.wrap_credential import WRAP_MAC, credential, sign  # noqa: E402
from tracecard.traces.otlp_ingest import decode_protobuf  # noqa: E402

RUN = "0123456789abcdef"


def _tool_calls(spans: list[dict[str, Any]], key: bytes, signed: bool) -> list[dict[str, Any]]:
    out = copy.deepcopy(spans)
    run_credential = credential(key, RUN)
    for span in out:
        claims = {"mcp.method.name": "tools/call", "tracecard.role": "agent"}
        span["attributes"].update(claims)
        if signed:
            span["attributes"][WRAP_MAC] = sign(run_credential, span, RUN)
    return out


def _best(spans: list[dict[str, Any]], key: bytes, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        batch = copy.deepcopy(spans)
        start = time.perf_counter()
        distrust(batch, take_macs(batch), key)
        best = min(best, time.perf_counter() - start)
    return best / len(spans) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, default=20_000)
    args = parser.parse_args()
    key = secrets.token_bytes(32)
    chat = decode_protobuf(make_batch(RUN, secrets.token_hex(16), args.spans)).spans
    for span in chat:
        span["run_id"] = RUN
    for label, spans in (
        ("chat spans (no claim)", chat),
        ("unsigned tool-call spans (marked agent_reported)", _tool_calls(chat, key, False)),
        ("signed tool-call spans (MAC checked)", _tool_calls(chat, key, True)),
    ):
        print(f"{label}: {_best(spans, key):.2f} us/span")


if __name__ == "__main__":
    main()
