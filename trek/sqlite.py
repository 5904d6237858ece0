"""One way to open Trek's SQLite files (LLM cache, search cache, page store).

Every connection is a :class:`Connection`: a statement that fails because the disk is full, the
file cannot be written or the device reports an I/O error raises :class:`StorageError` naming
the file (a :class:`~trek.errors.RunFatalError`: every later write would fail too, so a stage
stops instead of recording the error item by item). :func:`transaction` runs a block in one
transaction and rolls back only a transaction that is still open: SQLite ends a transaction by
itself when a write fails for lack of space, and a blind ``ROLLBACK`` would then replace the
disk-full error with "cannot rollback - no transaction is active".
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trek.errors import RunFatalError

__all__ = ["connect", "transaction", "Connection", "StorageError"]

#: Words of SQLite's messages for a file that cannot be written (as opposed to a busy database,
#: a bad statement or a file that is not a database).
_STORAGE_WORDS = ("disk is full", "disk i/o error", "readonly database", "read-only", "unable to open database")


class StorageError(RunFatalError):
    """A Trek SQLite file cannot be written (full disk, read-only file, I/O error)."""


def storage_error(e: BaseException, path: str | os.PathLike[str] | None) -> StorageError | None:
    """The :class:`StorageError` behind an SQLite error, or ``None`` when it is another error."""
    if not isinstance(e, sqlite3.OperationalError | sqlite3.DatabaseError) or isinstance(e, StorageError):
        return None
    text = str(e)
    if not any(w in text.lower() for w in _STORAGE_WORDS):
        return None
    why = "no space left on the device" if "full" in text.lower() else text
    return StorageError(f"{path or ':memory:'}: cannot write ({why}); make room or fix the folder's permissions "
                        "and run the same command again (what was stored before is kept)")


class Connection(sqlite3.Connection):
    """An SQLite connection whose write failures name the file (:class:`StorageError`)."""

    trek_path: str | None = None

    def _translated(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except sqlite3.Error as e:
            err = storage_error(e, self.trek_path)
            if err is None:
                raise
            raise err from e

    def execute(self, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        return self._translated(super().execute, *args)

    def executemany(self, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        return self._translated(super().executemany, *args)

    def executescript(self, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        return self._translated(super().executescript, *args)

    def commit(self) -> None:
        self._translated(super().commit)


def connect(path: str | os.PathLike[str] | None, schema: str | None = None) -> Connection:
    """Open ``path`` (``None``: in memory) for use from several threads and processes.

    Autocommit mode (each statement is its own transaction), write-ahead logging so readers
    never block the writer, ``synchronous=NORMAL`` (durable at checkpoints, never corrupt),
    and a generous busy timeout for concurrent writers. ``schema`` is run once if given.
    """
    if path is None:
        conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None, factory=Connection)
    else:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(str(p), timeout=60.0, check_same_thread=False, isolation_level=None,
                                   factory=Connection)
        except sqlite3.Error as e:
            raise storage_error(e, p) or e from None
        conn.trek_path = str(p)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA busy_timeout=60000")
    conn.execute("PRAGMA synchronous=NORMAL")
    if schema:
        conn.executescript(schema)
    return conn


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection, begin: str = "BEGIN") -> Iterator[None]:
    """Run the block in one transaction (``begin``: ``BEGIN`` or ``BEGIN IMMEDIATE``): committed
    at the end, rolled back on an error while SQLite still has it open (see the module doc)."""
    conn.execute(begin)
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise
