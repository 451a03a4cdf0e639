"""What both clients share: the errors, the handles, every request as data (`_Call`) and the
parsing of every answer. `tracecard.client` only adds the sync and async transports."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, cast

import httpx

FinalStatus = Literal["finished", "errored", "timed_out", "aborted"]
ScorecardFormat = Literal["json", "csv", "md", "xml"]
SuiteFormat = Literal["toml", "json"]
PAGE_SIZE = 100


class TracecardError(Exception):
    """The server refused a request; `status_code` and `detail` say why."""

    def __init__(self, status_code: int, detail: str, extra: Any = None) -> None:
        super().__init__(f"tracecard answered {status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail
        self.extra = extra


class TracecardConnectionError(TracecardError):
    """No answer at all: the server is not running there, or the network is in the way."""

    def __init__(self, base_url: str, reason: str) -> None:
        self.detail = f"cannot reach tracecard at {base_url}: {reason}"
        Exception.__init__(
            self, f"{self.detail} (is `tracecard serve` running there? check the URL and port)"
        )
        self.status_code = 0
        self.extra = None


@dataclass(frozen=True)
class RunHandle:
    """One run of an experiment: what an agent needs to do it."""

    id: str
    task_id: str
    trial: int
    instruction: str
    urls: dict[str, str]  # upstream name -> the proxy URL with this run in its path
    models: dict[str, str] = field(default_factory=dict)  # model upstreams: name -> API kind
    traceparent: str | None = None  # W3C trace context of the run's root span


@dataclass(frozen=True)
class ExperimentHandle:
    """An experiment as created: its id, suite, config and every run."""

    id: str
    suite: str
    suite_version: str
    config: dict[str, Any]
    trials: int
    runs: list[RunHandle] = field(default_factory=list)


T = TypeVar("T")

# A tracecard server closes a kept-alive connection after 5 s idle (uvicorn's
# timeout_keep_alive), and httpx keeps one for 5 s too: a request sent on a connection of that
# age races the server's close and meets "Connection reset by peer" (2 of 600 cells of a
# 3-worker BFCL bench at load 30 lost their run that way). The client lets connections go well
# before the server does, and sends an idempotent request once more when a kept connection
# broke under it (the error kinds of a stale connection, not a refused one).
KEEPALIVE_EXPIRY_S = 2.0
LIMITS = httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY_S)
RETRIED_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
STALE_CONNECTION = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


def send_again(method: str, exc: httpx.TransportError, tries: int) -> bool:
    """Whether a request that failed with `exc` on its `tries`-th send goes once more."""
    return tries == 1 and method in RETRIED_METHODS and isinstance(exc, STALE_CONNECTION)


def _body(response: httpx.Response) -> dict[str, Any]:
    return cast(dict[str, Any], response.json())


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One API request and how its answer becomes a value (shared by both clients)."""

    method: str
    path: str
    options: dict[str, Any]
    parse: Callable[[httpx.Response], T]
    source: str | None = None  # a suite file's path as given: errors name it, not the body


def _json_call(method: str, path: str, **options: Any) -> _Call[dict[str, Any]]:
    return _Call(method, path, options, _body)


def _experiment(body: dict[str, Any]) -> ExperimentHandle:
    runs = [
        RunHandle(
            id=r["id"],
            task_id=r["task_id"],
            trial=r["trial"],
            instruction=r.get("instruction", ""),
            urls=dict(r["urls"]),
            models=dict(r.get("models") or {}),
            traceparent=r.get("traceparent"),
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


def _suite_text_call(
    text: str, fmt: SuiteFormat | None = None, source: str | None = None
) -> _Call[dict[str, Any]]:
    fmt = fmt or ("json" if text.lstrip().startswith("{") else "toml")
    options = {"content": text, "headers": {"content-type": f"application/{fmt}"}}
    return _Call("POST", "/api/suites", options, _body, source)


def _suite_file_call(path: str | Path) -> _Call[dict[str, Any]]:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such suite file") from None
    fmt: SuiteFormat = "json" if file.suffix.lower() == ".json" else "toml"
    return _suite_text_call(text, fmt, str(path))


def _looks_like_a_path(text: str) -> bool:
    return "\n" not in text and text.strip().lower().endswith((".toml", ".json"))


class _Requests:
    """Every request of the API, built once for both clients."""

    @staticmethod
    def health() -> _Call[dict[str, Any]]:
        return _json_call("GET", "/healthz")

    @staticmethod
    def add_suite(suite: str | Path) -> _Call[dict[str, Any]]:
        if isinstance(suite, Path) or _looks_like_a_path(suite):
            return _suite_file_call(suite)  # a mistyped path is an error, never TOML text
        return _suite_text_call(suite)

    @staticmethod
    def create_experiment(
        suite: str,
        config: dict[str, Any],
        trials: int,
        replay: dict[str, Any] | None = None,
        faults: dict[str, Any] | None = None,
    ) -> _Call[ExperimentHandle]:
        if "name" not in config:
            raise ValueError("config needs a name, e.g. {'name': 'gpt-x-careful'}")
        body: dict[str, Any] = {"suite": suite, "config": config, "trials": trials}
        if replay is not None:
            body["replay"] = replay
        if faults is not None:
            body["faults"] = faults
        return _Call("POST", "/api/experiments", {"json": body}, lambda r: _experiment(_body(r)))

    @staticmethod
    def experiments_page(offset: int, limit: int, suite: str | None) -> _Call[dict[str, Any]]:
        params: dict[str, Any] = {"offset": offset, "limit": limit}
        if suite is not None:
            params["suite"] = suite
        return _json_call("GET", "/api/experiments", params=params)

    @staticmethod
    def finish_run(
        run_id: str, final_answer: str | None, status: FinalStatus, error: str | None
    ) -> _Call[dict[str, Any]]:
        body: dict[str, Any] = {"status": status}
        if final_answer is not None:
            body["final_answer"] = final_answer
        if error is not None:
            body["error"] = error
        return _json_call("POST", f"/api/runs/{run_id}/finish", json=body)

    @staticmethod
    def scorecard(experiment_id: str, fmt: ScorecardFormat) -> _Call[Any]:
        path = f"/api/experiments/{experiment_id}/scorecard.{fmt}"
        return _Call("GET", path, {}, lambda r: r.json() if fmt == "json" else r.text)

    @staticmethod
    def compare(a: str, b: str, component: str) -> _Call[dict[str, Any]]:
        return _json_call("GET", "/api/compare", params={"a": a, "b": b, "component": component})

    @staticmethod
    def get(path: str) -> _Call[dict[str, Any]]:
        return _json_call("GET", path)


def _checked(response: httpx.Response, source: str | None = None) -> httpx.Response:
    """The response, or its problem as a `TracecardError`; with `source` (a suite file), the
    server's `request body:LINE: ...` becomes `PATH:LINE: ...`, as `load_suite` says it."""
    if response.status_code >= 400:
        try:
            problem = response.json()
        except ValueError:
            problem = {"detail": response.text}
        if not isinstance(problem, dict):
            problem = {"detail": str(problem)}
        detail = str(problem.get("detail", ""))
        if source is not None:
            detail = re.sub(r"(?m)^request body(?=:)", lambda _m: source, detail)
        raise TracecardError(response.status_code, detail, problem.get("extra"))
    return response


class _Base:
    def __init__(self, base_url: str, token: str | None) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self._headers = {"Tracecard-Token": token} if token else {}

    def _unreachable(self, exc: httpx.TransportError) -> TracecardConnectionError:
        return TracecardConnectionError(self.base_url, str(exc) or type(exc).__name__)

    def viewer_url(self, experiment_id: str | None = None) -> str:
        """Where a person looks at an experiment (or at the list of experiments)."""
        if experiment_id is None:
            return f"{self.base_url}/experiments"
        return f"{self.base_url}/experiments/{experiment_id}"
