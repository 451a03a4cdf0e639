"""Whether a database's schema is already at the migrations' head, found without loading
Alembic (0.5 s of a read-only command's start): the head is the one revision no migration file
names as its `down_revision`. Anything unexpected (a merge, a file this reader does not
understand, no `alembic_version` table) answers False, and the command migrates as before."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracecard.traces.store import Store

__all__ = ["at_head", "head_revision"]

_REVISION = re.compile(r"^revision(?:: str)? = ['\"]([0-9a-zA-Z_]+)['\"]$", re.M)
_DOWN = re.compile(r"^down_revision(?:: [^=]+)? = (None|['\"]([0-9a-zA-Z_]+)['\"])$", re.M)


def head_revision() -> str | None:
    """The single head of `tracecard/traces/migrations/versions/`, or None when not one."""
    import tracecard.traces

    versions = Path(tracecard.traces.__file__).parent / "migrations" / "versions"
    revisions: set[str] = set()
    downs: set[str] = set()
    for path in versions.glob("*.py"):
        source = path.read_text(encoding="utf-8")
        revision, down = _REVISION.findall(source), _DOWN.findall(source)
        if len(revision) != 1 or len(down) != 1:
            return None
        revisions.add(revision[0])
        if down[0][1]:
            downs.add(down[0][1])
    heads = revisions - downs
    return heads.pop() if len(heads) == 1 else None


def at_head(store: Store) -> bool:
    """True when the database records exactly the head revision (nothing to migrate)."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    head = head_revision()
    if head is None:
        return False
    try:
        with store.engine.connect() as connection:
            stored = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    except SQLAlchemyError:
        return False
    return [row[0] for row in stored] == [head]
