"""One way to open Trek's SQLite files (LLM cache, search cache, page store)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

__all__ = ["connect"]


def connect(path: str | os.PathLike[str] | None, schema: str | None = None) -> sqlite3.Connection:
    """Open ``path`` (``None``: in memory) for use from several threads and processes.

    Autocommit mode (each statement is its own transaction), write-ahead logging so readers
    never block the writer, ``synchronous=NORMAL`` (durable at checkpoints, never corrupt),
    and a generous busy timeout for concurrent writers. ``schema`` is run once if given.
    """
    if path is None:
        conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    else:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(p), timeout=60.0, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA busy_timeout=60000")
    conn.execute("PRAGMA synchronous=NORMAL")
    if schema:
        conn.executescript(schema)
    return conn
