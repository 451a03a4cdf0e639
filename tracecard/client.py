"""A small synchronous client of tracecard's JSON API, for harness scripts (docs/client.md).

    with TracecardClient("http://127.0.0.1:7800") as tc:
        suite = tc.add_suite("examples/helpdesk/suite.toml")
        experiment = tc.create_experiment(suite["name"], {"name": "my-agent"}, trials=3)
        for run in experiment.runs:
            answer = my_agent(run.instruction, run.urls["helpdesk"])
            tc.finish_run(run.id, final_answer=answer)
        card = tc.scorecard(experiment.id)

It depends only on httpx; nothing of the server is imported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

__all__ = ["ExperimentHandle", "RunHandle", "TracecardClient", "TracecardError"]

FinalStatus = Literal["finished", "errored", "timed_out", "aborted"]
ScorecardFormat = Literal["json", "csv", "md", "xml"]


class TracecardError(Exception):
    """The server refused a request; `status_code` and `detail` say why."""

    def __init__(self, status_code: int, detail: str, extra: Any = None) -> None:
        super().__init__(f"tracecard answered {status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail
        self.extra = extra


@dataclass(frozen=True)
class RunHandle:
    """One run of an experiment: what an agent needs to do it."""

    id: str
    task_id: str
    trial: int
    instruction: str
    urls: dict[str, str]  # upstream name -> the proxy URL with this run in its path
    models: dict[str, str] = field(default_factory=dict)  # model upstreams: name -> API kind


@dataclass(frozen=True)
class ExperimentHandle:
    """An experiment as created: its id, suite, config and every run."""

    id: str
    suite: str
    suite_version: str
    config: dict[str, Any]
    trials: int
    runs: list[RunHandle] = field(default_factory=list)


def _is_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except (OSError, ValueError):  # too long for a path, or a NUL byte: it is a document
        return False


class TracecardClient:
    """Talks to one tracecard server. Use it as a context manager, or call `close()`."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 120.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        headers = {"Tracecard-Token": token} if token else {}
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout,
            transport=transport,
            trust_env=False,
        )

    def __enter__(self) -> TracecardClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise TracecardError(0, f"cannot reach {self.base_url}: {exc}") from exc
        if response.status_code >= 400:
            try:
                problem = response.json()
            except ValueError:
                problem = {"detail": response.text}
            raise TracecardError(
                response.status_code, str(problem.get("detail", "")), problem.get("extra")
            )
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        body: dict[str, Any] = self._request(method, path, **kwargs).json()
        return body

    def health(self) -> dict[str, Any]:
        """`GET /healthz`: the server's status and configured upstreams."""
        return self._json("GET", "/healthz")

    def add_suite(self, suite: str | Path) -> dict[str, Any]:
        """Store a suite from a file path (TOML or JSON) or from its text; returns
        `{name, version, tasks}`. Storing the same content again is harmless."""
        if isinstance(suite, str) and "\n" not in suite and _is_file(suite):
            suite = Path(suite)
        text = suite.read_text(encoding="utf-8") if isinstance(suite, Path) else suite
        media = "application/json" if text.lstrip().startswith("{") else "application/toml"
        return self._json("POST", "/api/suites", content=text, headers={"content-type": media})

    def create_experiment(
        self, suite: str, config: dict[str, Any], trials: int = 1
    ) -> ExperimentHandle:
        """One config on one suite (by name or version) with `trials` runs per task."""
        if "name" not in config:
            raise ValueError("config needs a name, e.g. {'name': 'gpt-x-careful'}")
        body = self._json(
            "POST", "/api/experiments", json={"suite": suite, "config": config, "trials": trials}
        )
        runs = [
            RunHandle(
                id=r["id"],
                task_id=r["task_id"],
                trial=r["trial"],
                instruction=r.get("instruction", ""),
                urls=dict(r["urls"]),
                models=dict(r.get("models") or {}),
            )
            for r in body["runs"]
        ]
        return ExperimentHandle(
            id=body["id"],
            suite=body["suite"],
            suite_version=body["suite_version"],
            config=body["config"],
            trials=body["trials"],
            runs=runs,
        )

    def get_experiment(self, experiment_id: str) -> dict[str, Any]:
        """An experiment with every run's current state."""
        return self._json("GET", f"/api/experiments/{experiment_id}")

    def get_run(self, run_id: str) -> dict[str, Any]:
        """A run: status, final answer, scores, URLs."""
        return self._json("GET", f"/api/runs/{run_id}")

    def next_turn(self, run_id: str) -> dict[str, Any]:
        """The run's next user message: `{done: false, index, count, user, instruction}`, or
        `{done: true}` after the last turn. Asking closes the open turn: its probes run first."""
        return self._json("POST", f"/api/runs/{run_id}/turns/next")

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
        body: dict[str, Any] = {"status": status}
        if final_answer is not None:
            body["final_answer"] = final_answer
        if error is not None:
            body["error"] = error
        return self._json("POST", f"/api/runs/{run_id}/finish", json=body)

    def scorecard(self, experiment_id: str, fmt: ScorecardFormat = "json") -> Any:
        """The experiment's scorecard: a dict for `json`, text for `csv`, `md` and `xml`."""
        response = self._request("GET", f"/api/experiments/{experiment_id}/scorecard.{fmt}")
        return response.json() if fmt == "json" else response.text

    def compare(self, a: str, b: str, component: str = "outcome") -> dict[str, Any]:
        """Paired comparison of experiment B against A: per-task classes and the verdict."""
        return self._json("GET", "/api/compare", params={"a": a, "b": b, "component": component})

    def viewer_url(self, experiment_id: str | None = None) -> str:
        """Where a person looks at an experiment (or at the list of experiments)."""
        if experiment_id is None:
            return f"{self.base_url}/experiments"
        return f"{self.base_url}/experiments/{experiment_id}"
