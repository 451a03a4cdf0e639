"""Settings: one TOML file (`tracecard.toml`), every key overridable by an environment variable.

Loaded with pydantic-settings: the TOML source, then `TRACECARD_<KEY>` variables (nested keys
join with `__`: `TRACECARD_UPSTREAMS__TOOLS__URL=http://127.0.0.1:9000/mcp`), then command-line
flags. Types come from the model (`TRACECARD_API_TOKEN=20261201` is a string; lists and tables
are JSON), and an error names the variable, or the file and line, it came from.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from tracecard.scorers._locate import LocatedIssue, dotted, find_line, reason_of, toml_error_line
from tracecard.server.errors import ConfigError as ConfigError  # (its old home)
from tracecard.traces.urls import default_db_url

ENV_PREFIX = "TRACECARD_"
CONFIG_NAME = "tracecard.toml"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


UPSTREAM_KINDS = ("mcp", "http", "openai", "anthropic")
MODEL_KINDS = ("openai", "anthropic")  # model APIs, proxied at /llm/{name}/...


class UpstreamSettings(BaseModel):
    """A tool server reached by name: `url` for HTTP, `command` for a stdio server."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = None
    command: list[str] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    per_run: bool = False
    fixture: str | None = None
    # "mcp" (JSON-RPC, at /mcp/{name}) | "http" (plain HTTP tool, at /http/{name}) |
    # "openai" | "anthropic" (a model API, at /llm/{name}/...: docs/llm.md)
    kind: str = "mcp"
    timeout_s: float | None = None  # overrides the global upstream timeout
    headers: dict[str, str] = Field(default_factory=dict)  # added to every forwarded request
    redact: bool = True  # false: store argument/result values in clear (fake benchmark secrets)
    # tools for probes only: hidden from agents' tools/list, refused to their tools/call
    # (server/proxy/visibility.py); tracecard's verifier traffic sees and calls them
    verifier_tools: list[str] = Field(default_factory=list)
    # a helper started once (`{preload}`: its Unix socket) whose per-run processes are forked
    # from it; they find it in $TRACECARD_PRELOAD (docs/stdio.md, "Warm processes")
    preload: list[str] | None = None
    # a verifier-only tool tracecard calls with {"turn": i} as it hands out turn i >= 1 of a
    # multi-turn task (server/evaluation/turn_notice.py): how the upstream learns the turn
    turn_tool: str | None = None

    @model_validator(mode="after")
    def _one_transport(self) -> UpstreamSettings:
        if (self.url is None) == (self.command is None):
            raise ValueError("give exactly one of `url` or `command`")
        if self.kind not in UPSTREAM_KINDS:
            raise ValueError(f"kind must be one of {', '.join(map(repr, UPSTREAM_KINDS))}")
        if self.kind != "mcp" and self.url is None:
            raise ValueError(f"a {self.kind!r} upstream needs `url`")
        if self.verifier_tools and self.kind != "mcp":
            raise ValueError('`verifier_tools` needs an MCP upstream (kind = "mcp")')
        if any(not name.strip() for name in self.verifier_tools):
            raise ValueError("`verifier_tools` holds an empty tool name")
        if self.preload is not None and (not self.preload or self.command is None):
            raise ValueError("`preload` needs a command of its own and a stdio `command`")
        if self.turn_tool is not None and self.turn_tool not in self.verifier_tools:
            raise ValueError(
                f"`turn_tool` {self.turn_tool!r} must also be in `verifier_tools`: "
                "agents must never see or call it"
            )
        return self


# The default secret key words (docs/proxy.md#redaction): "auth" is a word of `auth_token`,
# `authToken`, `x-auth` and `oauth`, not of `author` or `authority`.
DEFAULT_REDACT_KEYS: Final = (
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "api key",
    "apikey",
    "auth",
    "authorization",
    "authorisation",
    "bearer",
    "cookie",
    "private key",
    "privatekey",
    "credential",
)
_KEY_ENTRY: Final = re.compile(r"[A-Za-z0-9 _.\-]*[A-Za-z0-9][A-Za-z0-9 _.\-]*")


class RecordingSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    payload_cap_bytes: int = 256 * 1024  # a payload attribute longer than this is truncated
    redact_headers: list[str] = Field(
        default_factory=lambda: [
            "authorization",
            "proxy-authorization",
            "cookie",
            "x-api-key",
            "api-key",  # Azure OpenAI's key header
        ]
    )
    # Secret key words: a JSON key, query/form field or OTLP attribute name is split into words
    # (camelCase, snake_case, kebab-case, dots) and its value is replaced by the keyed
    # fingerprint `[redacted:…]` when its words contain an entry (docs/proxy.md#redaction).
    redact_keys: list[str] = Field(default_factory=lambda: list(DEFAULT_REDACT_KEYS))

    @field_validator("redact_keys")
    @classmethod
    def _entries_are_words(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            if not _KEY_ENTRY.fullmatch(entry):
                raise ValueError(
                    f"redact_keys: {entry!r} is not a word or phrase (letters, digits, spaces,"
                    " '_', '-' or '.'): keys are matched as words, e.g. 'api key'"
                )
        return entries

    inject_traceparent: bool = True  # add `traceparent` to params._meta where absent
    # model spans' content attributes (messages, system instructions, tool definitions): opt-in
    # in the GenAI conventions, on in tracecard; the requested tool calls are kept either way
    model_content: bool = True
    otlp_endpoint: str | None = None  # also send every span to this OTLP/HTTP collector
    otlp_headers: dict[str, str] = Field(default_factory=dict)
    batch_max_queue: int = 65536
    batch_delay_ms: int = 200
    spool: bool = True  # log every span batch to disk before storing it
    # fsync each logged batch (kept across a power loss, not only a crash of the process).
    # Unset: as durable as the database behind it: yes on PostgreSQL, whose commits are; no on
    # SQLite, whose WAL with `synchronous=NORMAL` can lose its last commits on a power loss
    spool_fsync: bool | None = None
    # with the spool: under load, the spooled batches are committed to the database together,
    # at most once this often (a span after a quiet interval is stored at once; 0: each batch)
    store_every_ms: int = Field(default=1000, ge=0)
    spool_dir: str | None = None  # default: beside the SQLite file, or .tracecard/spool/<hash>
    # spans no database would take, even in readable form: JSON lines beside the spool, this big
    dead_letter_max_bytes: int = Field(default=64 * 1024 * 1024, ge=0)


class PoolSettings(BaseModel):
    """Warm per-run stdio processes (docs/stdio.md, "Warm processes")."""

    model_config = ConfigDict(extra="forbid")

    # false: every per-run process starts cold when its run needs it, and no `preload` runs
    enabled: bool = True
    size: int = Field(default=4, ge=0)  # warm processes waiting at most, over all upstreams


class LimitSettings(BaseModel):
    """`[limits.model.NAME]` / `[limits.upstream.NAME]`: how many cells using that key may run at
    once across every worker, and how many may start per minute (docs/workers.md)."""

    model_config = ConfigDict(extra="forbid")

    concurrency: int | None = Field(default=None, ge=1)
    per_minute: int | None = Field(default=None, ge=1)


class Settings(BaseModel):
    """Everything the server needs; built by `load_settings` or directly by tests."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = 7800
    db: str = Field(default_factory=default_db_url)
    api_token: str | None = None
    # Host names (any port) this server answers to besides localhost, 127.0.0.1, [::1] and
    # public_url's; "*" turns the Host check off (docs/configuration.md, server/security.py).
    allowed_hosts: list[str] = Field(default_factory=list)
    # Browser origins besides tracecard's own that may call it (e.g. "http://localhost:6274").
    allowed_origins: list[str] = Field(default_factory=list)
    public_url: str | None = None  # how agents reach this server; default http://host:port
    # reverse proxies whose X-Forwarded-For/-Proto are believed (uvicorn's proxy headers); empty:
    # none, and that middleware is not run on every request (docs/configuration.md)
    trusted_proxies: list[str] = Field(default_factory=list)
    upstream_timeout_s: float = 60.0
    max_body_bytes: int = 16 * 1024 * 1024
    # one SSE event of an upstream's stream (MCP or model) held at most this long to be read;
    # a longer one (an event that never ends) ends the stream with an error (docs/proxy.md)
    max_sse_event_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    otlp_max_spans: int = 20_000  # spans per OTLP request; more is refused with 413
    max_experiment_runs: int = 10_000  # tasks x trials of one experiment; more is refused (422)
    # How long a server keeps an upstream's tools/list for checking suites (0: ask every time).
    tool_list_ttl_s: float = Field(default=300.0, ge=0)
    # An ad-hoc run (traffic that named no run) with no request for this long ends: `finished`,
    # end reason `idle`; the client's next request opens a new run (docs/proxy.md).
    adhoc_idle_s: float = Field(default=300.0, gt=0)
    sandbox_root: str = ".tracecard/sandboxes"
    sandbox_retention: int = 200  # sandboxes kept; older ones are removed
    upstreams: dict[str, UpstreamSettings] = Field(default_factory=dict)
    recording: RecordingSettings = Field(default_factory=RecordingSettings)
    pool: PoolSettings = Field(default_factory=PoolSettings)
    # durable jobs: "model" | "upstream" -> upstream name -> limits across workers (server/jobs)
    limits: dict[Literal["model", "upstream"], dict[str, LimitSettings]] = Field(
        default_factory=dict
    )
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


class _Sources(Settings, BaseSettings):
    """The same fields, as pydantic-settings sees them (the sources read the model's types)."""

    model_config = SettingsConfigDict(extra="forbid")


class _Environment(EnvSettingsSource):
    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(
            _Sources, case_sensitive=False, env_prefix=ENV_PREFIX, env_nested_delimiter="__"
        )

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {name.lower(): value for name, value in self._environ.items()}


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _has(document: Mapping[str, Any], loc: tuple[str | int, ...]) -> bool:
    target: Any = document
    for step in loc:
        if not isinstance(target, Mapping) or step not in target:
            return False
        target = target[step]
    return True


def _variable(loc: tuple[str | int, ...], environ: Mapping[str, str]) -> str | None:
    """The environment variable that set the value at `loc` (or the table holding it)."""
    names = {name.upper(): name for name in environ}
    for length in range(len(loc), 0, -1):
        candidate = ENV_PREFIX + "__".join(str(step) for step in loc[:length]).upper()
        if candidate in names:
            return names[candidate]
    return None


def find_config(start: Path | None = None) -> Path | None:
    """`tracecard.toml` in `start` (default: the current folder) or the nearest parent."""
    folder = (start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        path = candidate / CONFIG_NAME
        if path.is_file():
            return path
    return None


def load_settings(
    config_path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Read the TOML file (if any), apply `TRACECARD_*` variables, then explicit overrides
    (command-line flags; None means not given)."""
    environ = os.environ if environ is None else environ
    document: dict[str, Any] = {}
    text = ""
    if config_path is not None:
        path = Path(config_path)
        try:
            text = path.read_text(encoding="utf-8")
            document = TomlConfigSettingsSource(_Sources, toml_file=path)()
        except FileNotFoundError as exc:
            raise ConfigError(f"{path}: no such config file") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}:{toml_error_line(exc) or 1}: not valid TOML: {exc}") from exc
        document["config_path"] = str(path)
    from_env = _from_environment(environ)
    flags = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings.model_validate(_merge(_merge(document, from_env), flags))
    except ValidationError as exc:
        issues = [
            _locate(tuple(e["loc"]), reason_of(e), config_path, text, from_env, flags, environ)
            for e in exc.errors()
        ]
        raise ConfigError("\n".join(str(issue) for issue in issues)) from exc


def _from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The `TRACECARD_*` values; a list or table that is not JSON names its variable."""
    try:
        return dict(_Environment(environ)())
    except SettingsError as exc:
        for name, value in environ.items():  # pydantic-settings names only the top-level key
            if name.upper().startswith(ENV_PREFIX):
                try:
                    _Environment({name: value})()
                except SettingsError as alone:
                    key = name[len(ENV_PREFIX) :].lower().replace("__", ".")
                    raise ConfigError(
                        f"{name}: {key}: not valid JSON ({alone.__cause__}); a list or table "
                        """is written as JSON, e.g. '["a", "b"]' or '{"k": "v"}'"""
                    ) from exc
        raise ConfigError(f"settings: {exc}") from exc


def _locate(
    loc: tuple[str | int, ...],
    reason: str,
    config_path: str | Path | None,
    text: str,
    from_env: Mapping[str, Any],
    flags: Mapping[str, Any],
    environ: Mapping[str, str],
) -> LocatedIssue:
    """Where the bad value came from: a flag, a variable, or a line of the file."""
    if loc and _has(flags, loc[:1]):
        return LocatedIssue(f"--{str(loc[0]).replace('_', '-')}", None, dotted(loc), reason)
    variable = _variable(loc, environ) if loc and _has(from_env, loc[:1]) else None
    if variable is not None:
        return LocatedIssue(variable, None, dotted(loc), reason)
    if config_path is None:
        return LocatedIssue("settings", None, dotted(loc), reason)
    return LocatedIssue(str(config_path), find_line(text, loc, "toml"), dotted(loc), reason)
