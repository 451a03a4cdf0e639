"""Import the example modules (examples/ is not a package) and reset the helpdesk's state."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
HELPDESK = ROOT / "examples" / "helpdesk"
AGENTS = ROOT / "examples" / "agents"
for folder in (HELPDESK, AGENTS):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


def helpdesk_module(state_dir: Path) -> ModuleType:
    """The helpdesk tools, reading and writing `state_dir/state.json`."""
    import helpdesk

    helpdesk.STATE_DIR = state_dir
    return helpdesk


def scripts_module() -> ModuleType:
    """examples/agents/helpdesk_scripts.py."""
    import helpdesk_scripts

    return helpdesk_scripts


def code_blocks(markdown: Path, language: str) -> list[str]:
    """The fenced code blocks of one language in a Markdown file, in order."""
    blocks: list[str] = []
    current: list[str] | None = None
    for line in markdown.read_text(encoding="utf-8").splitlines():
        if current is None and line.strip() == f"```{language}":
            current = []
        elif current is not None and line.strip() == "```":
            blocks.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    return blocks
