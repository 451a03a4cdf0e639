"""Settings: one TOML file (`tracecard.toml`), every key overridable by an environment variable.

Environment variables are `TRACECARD_<KEY>`; nested keys join with `__`, e.g.
`TRACECARD_UPSTREAMS__TOOLS__URL=http://127.0.0.1:9000/mcp` or `TRACECARD_API_TOKEN=...`.
Values are parsed as JSON when they parse (numbers, booleans, lists), else taken as strings.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tracecard.traces.engine import default_db_url

ENV_PREFIX = "TRACECARD_"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class ConfigError(Exception):
    """A configuration a person must fix; the message says where and what."""


class UpstreamSettings(BaseModel):
    """A tool server reached by name: `url` for HTTP, `command` for a stdio server."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = None
    command: list[str] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    per_run: bool = False
    fixture: str | None = None
    kind: str = (
        "mcp"  # "mcp" (JSON-RPC, at /mcp/{name}) | "http" (plain HTTP tool, at /http/{name})
    )
    timeout_s: float | None = None  # overrides the global upstream timeout
    headers: dict[str, str] = Field(default_factory=dict)  # added to every forwarded request

    @model_validator(mode="after")
    def _one_transport(self) -> UpstreamSettings:
        if (self.url is None) == (self.command is None):
            raise ValueError("give exactly one of `url` or `command`")
        if self.kind not in ("mcp", "http"):
            raise ValueError("kind must be 'mcp' or 'http'")
        if self.kind == "http" and self.url is None:
            raise ValueError("a plain HTTP upstream needs `url`")
        return self


class RecordingSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    payload_cap_bytes: int = 256 * 1024  # a payload attribute longer than this is truncated
    redact_headers: list[str] = Field(
        default_factory=lambda: ["authorization", "proxy-authorization", "cookie", "x-api-key"]
    )
    redact_keys: list[str] = Field(
        default_factory=lambda: [
            "password",
            "passwd",
            "secret",
            "token",
            "api_key",
            "apikey",
            "access_token",
            "authorization",
            "client_secret",
            "private_key",
        ]
    )
    inject_traceparent: bool = True  # add `traceparent` to params._meta where absent
    otlp_endpoint: str | None = None  # also send every span to this OTLP/HTTP collector
    otlp_headers: dict[str, str] = Field(default_factory=dict)
    batch_max_queue: int = 65536
    batch_delay_ms: int = 200


class Settings(BaseModel):
    """Everything the server needs; built by `load_settings` or directly by tests."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = 7800
    db: str = Field(default_factory=default_db_url)
    api_token: str | None = None
    public_url: str | None = None  # how agents reach this server; default http://host:port
    upstream_timeout_s: float = 60.0
    max_body_bytes: int = 16 * 1024 * 1024
    sandbox_root: str = ".tracecard/sandboxes"
    sandbox_retention: int = 200  # sandboxes kept; older ones are removed
    upstreams: dict[str, UpstreamSettings] = Field(default_factory=dict)
    recording: RecordingSettings = Field(default_factory=RecordingSettings)
    config_path: str | None = None

    @model_validator(mode="after")
    def _token_off_loopback(self) -> Settings:
        if self.host not in LOOPBACK and not self.api_token:
            raise ValueError(
                f"binding {self.host} exposes tracecard beyond this machine: set an API token "
                "(`api_token` in the config or TRACECARD_API_TOKEN) or bind 127.0.0.1"
            )
        return self

    @property
    def base_url(self) -> str:
        if self.public_url:
            return self.public_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"

    def resolve_path(self, path: str) -> Path:
        """A path from the config file, relative to the config file's folder."""
        candidate = Path(path)
        if candidate.is_absolute() or self.config_path is None:
            return candidate
        return Path(self.config_path).parent / candidate


def _env_value(raw: str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw


def _apply_env(document: dict[str, Any], environ: Mapping[str, str]) -> None:
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        keys = [k.lower() for k in name[len(ENV_PREFIX) :].split("__") if k]
        # Agents get TRACECARD_RUN_ID and friends (docs/agents.md): only settings keys apply.
        if not keys or keys[0] not in Settings.model_fields:
            continue
        target = document
        for key in keys[:-1]:
            target = target.setdefault(key, {})
            if not isinstance(target, dict):
                raise ConfigError(f"{name}: {'.'.join(keys)} is not a table in the config")
        target[keys[-1]] = _env_value(raw)


def load_settings(
    config_path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Read the TOML file (if any), apply `TRACECARD_*` variables, then explicit overrides."""
    document: dict[str, Any] = {}
    if config_path is not None:
        path = Path(config_path)
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"{path}: no such config file") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
        document["config_path"] = str(path)
    _apply_env(document, os.environ if environ is None else environ)
    document.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Settings.model_validate(document)
    except ValidationError as exc:
        where = str(config_path) if config_path else "settings"
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"{where}: {problems}") from exc
