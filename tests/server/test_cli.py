"""The `tracecard` command: help texts and refusing a bad configuration."""

from __future__ import annotations

import subprocess
import sys

from tests.support.processes import ROOT
from tracecard.server.cli.main import main


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracecard.server.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_help() -> None:
    result = _cli("--help")
    assert result.returncode == 0 and "serve" in result.stdout


def test_serve_help() -> None:
    result = _cli("serve", "--help")
    assert result.returncode == 0
    for option in ("--config", "--host", "--port", "--db"):
        assert option in result.stdout


def test_serve_refuses_public_binding_without_a_token(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("TRACECARD_API_TOKEN", raising=False)
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "API token" in capsys.readouterr().err
