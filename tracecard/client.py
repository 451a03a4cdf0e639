"""Clients of tracecard's JSON API for harness scripts (docs/client.md): `TracecardClient`
(synchronous) and `AsyncTracecardClient`, which share every request and every answer's parsing.

    with TracecardClient("http://127.0.0.1:7800") as tc:
        suite = tc.add_suite_file("examples/helpdesk/suite.toml")
        experiment = tc.create_experiment(suite["name"], {"name": "my-agent"}, trials=3)
        for run in experiment.runs:
            answer = my_agent(run.instruction, run.urls["helpdesk"])
            tc.finish_run(run.id, final_answer=answer)
        card = tc.scorecard(experiment.id)

It depends only on httpx; nothing of the server is imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tracecard._requests import (
    LIMITS,
    PAGE_SIZE,
    ExperimentHandle,
    FinalStatus,
    RunHandle,
    ScorecardFormat,
    SuiteFormat,
    T,
    TracecardConnectionError,
    TracecardError,
    _Base,
    _Call,
    _checked,
    _json_call,
    _Requests,
    _suite_file_call,
    _suite_text_call,
    send_again,
)

__all__ = [
    "AsyncTracecardClient",
    "ExperimentHandle",
    "RunHandle",
    "TracecardClient",
    "TracecardConnectionError",
    "TracecardError",
]


class TracecardClient(_Base):
    """Talks to one tracecard server. Use it as a context manager, or call `close()`."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 120.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, token)
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=self._headers,
            timeout=timeout,
            transport=transport,
            trust_env=False,
            limits=LIMITS,
        )

    def __enter__(self) -> TracecardClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def _do(self, call: _Call[T]) -> T:
        tries = 0
        while True:
            tries += 1
            try:
                response = self._http.request(call.method, call.path, **call.options)
                break
            except httpx.TransportError as exc:
                if not send_again(call.method, exc, tries):
                    raise self._unreachable(exc) from exc
        return call.parse(_checked(response, call.source))

    def health(self) -> dict[str, Any]:
        """`GET /healthz`: the server's status and configured upstreams."""
        return self._do(_Requests.health())

    def add_suite_file(self, path: str | Path) -> dict[str, Any]:
        """Store the suite in a file (TOML, or JSON by the `.json` extension); returns
        `{name, version, tasks}`. Storing the same content again is harmless."""
        return self._do(_suite_file_call(path))

    def add_suite_text(self, text: str, fmt: SuiteFormat | None = None) -> dict[str, Any]:
        """Store a suite given as TOML or JSON text (`fmt` guessed from the text if None)."""
        return self._do(_suite_text_call(text, fmt))

    def add_suite(self, suite: str | Path) -> dict[str, Any]:
        """A `Path` or a one-line string ending in .toml/.json is a file (it must exist);
        anything else is suite text. Prefer `add_suite_file` / `add_suite_text`."""
        return self._do(_Requests.add_suite(suite))

    def create_experiment(
        self,
        suite: str,
        config: dict[str, Any],
        trials: int = 1,
        replay: dict[str, Any] | None = None,
        faults: dict[str, Any] | None = None,
    ) -> ExperimentHandle:
        """One config on one suite (by name or version) with `trials` runs per task.

        `replay`, e.g. `{"source": EXPERIMENT_ID, "on_miss": "live"}`: the upstreams' answers
        come from that experiment's recorded runs; `faults`, e.g. `{"seed": 7, "rules": [{"kind":
        "tool_error", "tool": "search", "nth": 1}]}`: seeded faults on the agent's calls
        (docs/replay.md)."""
        return self._do(_Requests.create_experiment(suite, config, trials, replay, faults))

    def list_experiments(self, suite: str | None = None) -> list[dict[str, Any]]:
        """Every stored experiment (of one suite, by name or version), newest first; the
        server's pages (`GET /api/experiments?offset=&limit=`) are followed to the end."""
        found: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            page = self._do(_Requests.experiments_page(offset, PAGE_SIZE, suite))
            found.extend(page["experiments"])
            offset = page.get("next_offset")
        return found

    def get_experiment(self, experiment_id: str) -> dict[str, Any]:
        """An experiment with every run's current state."""
        return self._do(_Requests.get(f"/api/experiments/{experiment_id}"))

    def robustness(self, experiment_id: str) -> dict[str, Any]:
        """Per fault kind and task: faulted calls and runs, and how many recovered."""
        return self._do(_Requests.get(f"/api/robustness?experiment={experiment_id}"))

    def get_run(self, run_id: str) -> dict[str, Any]:
        """A run: status, final answer, scores, URLs."""
        return self._do(_Requests.get(f"/api/runs/{run_id}"))

    def next_turn(self, run_id: str) -> dict[str, Any]:
        """The run's next user message: `{done: false, index, count, user, instruction}`, or
        `{done: true}` after the last turn. Asking closes the open turn: its probes run first."""
        return self._do(_json_call("POST", f"/api/runs/{run_id}/turns/next"))

    def finish_run(
        self,
        run_id: str,
        *,
        final_answer: str | None = None,
        status: FinalStatus = "finished",
        error: str | None = None,
    ) -> dict[str, Any]:
        """End a run: the server runs its probes and scorers and returns it with `scores` and
        `flags`. `error` says why it errored or timed out; it is stored on the run."""
        return self._do(_Requests.finish_run(run_id, final_answer, status, error))

    def scorecard(self, experiment_id: str, fmt: ScorecardFormat = "json") -> Any:
        """The experiment's scorecard: a dict for `json`, text for `csv`, `md` and `xml`."""
        return self._do(_Requests.scorecard(experiment_id, fmt))

    def compare(self, a: str, b: str, component: str = "outcome") -> dict[str, Any]:
        """Paired comparison of experiment B against A: per-task classes and the verdict."""
        return self._do(_Requests.compare(a, b, component))


class AsyncTracecardClient(_Base):
    """The same API for asyncio harnesses: every method of `TracecardClient`, awaited."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 120.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, token)
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=self._headers,
            timeout=timeout,
            transport=transport,
            trust_env=False,
            limits=LIMITS,
        )

    async def __aenter__(self) -> AsyncTracecardClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._http.aclose()

    async def _do(self, call: _Call[T]) -> T:
        tries = 0
        while True:
            tries += 1
            try:
                response = await self._http.request(call.method, call.path, **call.options)
                break
            except httpx.TransportError as exc:
                if not send_again(call.method, exc, tries):
                    raise self._unreachable(exc) from exc
        return call.parse(_checked(response, call.source))

    async def health(self) -> dict[str, Any]:
        """`GET /healthz`."""
        return await self._do(_Requests.health())

    async def add_suite_file(self, path: str | Path) -> dict[str, Any]:
        """See `TracecardClient.add_suite_file`."""
        return await self._do(_suite_file_call(path))

    async def add_suite_text(self, text: str, fmt: SuiteFormat | None = None) -> dict[str, Any]:
        """See `TracecardClient.add_suite_text`."""
        return await self._do(_suite_text_call(text, fmt))

    async def add_suite(self, suite: str | Path) -> dict[str, Any]:
        """See `TracecardClient.add_suite`."""
        return await self._do(_Requests.add_suite(suite))

    async def create_experiment(
        self,
        suite: str,
        config: dict[str, Any],
        trials: int = 1,
        replay: dict[str, Any] | None = None,
        faults: dict[str, Any] | None = None,
    ) -> ExperimentHandle:
        """See `TracecardClient.create_experiment`."""
        return await self._do(_Requests.create_experiment(suite, config, trials, replay, faults))

    async def list_experiments(self, suite: str | None = None) -> list[dict[str, Any]]:
        """See `TracecardClient.list_experiments`."""
        found: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            page = await self._do(_Requests.experiments_page(offset, PAGE_SIZE, suite))
            found.extend(page["experiments"])
            offset = page.get("next_offset")
        return found

    async def get_experiment(self, experiment_id: str) -> dict[str, Any]:
        """See `TracecardClient.get_experiment`."""
        return await self._do(_Requests.get(f"/api/experiments/{experiment_id}"))

    async def robustness(self, experiment_id: str) -> dict[str, Any]:
        """See `TracecardClient.robustness`."""
        return await self._do(_Requests.get(f"/api/robustness?experiment={experiment_id}"))

    async def get_run(self, run_id: str) -> dict[str, Any]:
        """See `TracecardClient.get_run`."""
        return await self._do(_Requests.get(f"/api/runs/{run_id}"))

    async def next_turn(self, run_id: str) -> dict[str, Any]:
        """See `TracecardClient.next_turn`."""
        return await self._do(_json_call("POST", f"/api/runs/{run_id}/turns/next"))

    async def finish_run(
        self,
        run_id: str,
        *,
        final_answer: str | None = None,
        status: FinalStatus = "finished",
        error: str | None = None,
    ) -> dict[str, Any]:
        """See `TracecardClient.finish_run`."""
        return await self._do(_Requests.finish_run(run_id, final_answer, status, error))

    async def scorecard(self, experiment_id: str, fmt: ScorecardFormat = "json") -> Any:
        """See `TracecardClient.scorecard`."""
        return await self._do(_Requests.scorecard(experiment_id, fmt))

    async def compare(self, a: str, b: str, component: str = "outcome") -> dict[str, Any]:
        """See `TracecardClient.compare`."""
        return await self._do(_Requests.compare(a, b, component))
