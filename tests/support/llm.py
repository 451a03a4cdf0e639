"""Helpers for model-proxy tests: the model spans of a run, and SDK clients pointed at its URLs."""

from __future__ import annotations

from typing import Any

import anthropic
import openai

from tests.support.proxy import run_spans


def model_spans(base: str, run_id: str) -> list[dict[str, Any]]:
    spans = run_spans(base, run_id)
    return [s for s in spans if s["attributes"].get("gen_ai.provider.name")]


def only_span(base: str, run_id: str) -> dict[str, Any]:
    spans = model_spans(base, run_id)
    assert len(spans) == 1, [s["name"] for s in spans]
    return spans[0]


def openai_client(run: dict[str, Any]) -> openai.OpenAI:
    return openai.OpenAI(base_url=run["urls"]["openai"], api_key="sk-agent-key", max_retries=0)


def claude_client(run: dict[str, Any]) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=run["urls"]["claude"], api_key="sk-ant-key", max_retries=0)
