"""One way to open Trek's SQLite files (LLM cache, search cache, page store).

Every connection is a :class:`Connection`: a statement that fails because the disk is full, the
file cannot be written or the device reports an I/O error raises :class:`StorageError` naming
the file (a :class:`~trek.errors.RunFatalError`: every later write would fail too, so a stage
stops instead of recording the error item by item). :func:`transaction` runs a block in one
transaction and rolls back only a transaction that is still open: SQLite ends a transaction by
itself when a write fails for lack of space, and a blind ``ROLLBACK`` would then replace the
disk-full error with "cannot rollback - no transaction is active".

A dry run writes nothing: inside :func:`read_only` (or with ``connect(..., read_only=True)``) a
file that exists is opened read-only and one that does not is an empty database in memory, so no
file, folder, write-ahead log or shared-memory index appears on disk. A write to such a file is a
:class:`StorageError` saying so; :func:`memory_copy` gives a writable copy in memory for the rare
estimate that needs to add rows (the demo corpus loaded into a page store).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trek.errors import RunFatalError

__all__ = ["connect", "transaction", "read_only", "reading_only", "memory_copy", "Connection", "StorageError"]

#: Set by :func:`read_only`: every :func:`connect` of the block opens its file read-only.
_READ_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("trek_sqlite_read_only", default=False)

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
    if "readonly database" in text.lower() and _READ_ONLY.get():
        return StorageError(f"{path or ':memory:'}: a dry run may not write (it opens every store read-only); "
                            "this is a bug in Trek, please report it with the command line")
    return StorageError(f"{path or ':memory:'}: cannot write ({why}); make room or fix the folder's permissions "
                        "and run the same command again (what was stored before is kept)")


class Connection(sqlite3.Connection):
    """An SQLite connection whose write failures name the file (:class:`StorageError`)."""

    trek_path: str | None = None
    #: Opened read-only (:func:`read_only`): a write fails.
    trek_read_only: bool = False
    #: Writes go to the file ``trek_path`` (False in memory, for a read-only file and its copy).
    trek_writes_file: bool = False

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


def connect(path: str | os.PathLike[str] | None, schema: str | None = None, *,
            read_only: bool | None = None) -> Connection:
    """Open ``path`` (``None``: in memory) for use from several threads and processes.

    Autocommit mode (each statement is its own transaction), write-ahead logging so readers
    never block the writer, ``synchronous=NORMAL`` (durable at checkpoints, never corrupt),
    and a generous busy timeout for concurrent writers. ``schema`` is run once if given.

    ``read_only`` (default: inside :func:`read_only` or not): a missing file is an empty
    database in memory (with ``schema``; no folder is made), an existing one is opened read-only
    without creating its write-ahead log (see :func:`_open_read_only`).
    """
    if read_only is None:
        read_only = _READ_ONLY.get()
    if path is None or (read_only and not Path(path).exists()):
        conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None, factory=Connection)
    elif read_only:
        return _open_read_only(Path(path), schema)
    else:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(str(p), timeout=60.0, check_same_thread=False, isolation_level=None,
                                   factory=Connection)
        except sqlite3.Error as e:
            raise storage_error(e, p) or e from None
        conn.trek_path, conn.trek_writes_file = str(p), True
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA busy_timeout=60000")
    conn.execute("PRAGMA synchronous=NORMAL")
    if schema:
        conn.executescript(schema)
    return conn


def _open_read_only(p: Path, schema: str | None) -> Connection:
    """``p`` opened read-only. Without a write-ahead log beside it (the file was closed cleanly)
    it is opened ``immutable`` (SQLite then creates no ``-wal`` or ``-shm`` file); with one, in
    ``mode=ro``, which reads the log a writer left. A schema the file lacks (an older store) is
    made on a copy in memory, since the file may not be changed."""
    from urllib.parse import quote

    flags = "mode=ro" if Path(f"{p}-wal").exists() else "immutable=1"
    try:
        conn = sqlite3.connect(f"file:{quote(str(p.resolve()))}?{flags}", uri=True, timeout=60.0,
                               check_same_thread=False, isolation_level=None, factory=Connection)
        conn.execute("PRAGMA busy_timeout=60000")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # a file that is no database says so here
    except sqlite3.Error as e:
        raise storage_error(e, p) or e from None
    conn.trek_path, conn.trek_read_only = str(p), True
    if schema:
        try:
            conn.executescript(schema)  # CREATE ... IF NOT EXISTS: no write when everything is there
        except sqlite3.OperationalError as e:
            if "readonly" not in str(e):
                raise
            conn = memory_copy(conn)
            conn.executescript(schema)
    return conn


def memory_copy(conn: sqlite3.Connection) -> Connection:
    """A writable copy in memory of the database ``conn`` holds (``conn`` is closed)."""
    copy = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None, factory=Connection)
    conn.backup(copy)
    copy.trek_path = getattr(conn, "trek_path", None)
    conn.close()
    return copy


def reading_only() -> bool:
    """Inside :func:`read_only` (a dry run): nothing may be written, no folder made."""
    return _READ_ONLY.get()


@contextlib.contextmanager
def read_only(enabled: bool = True) -> Iterator[None]:
    """Open every Trek SQLite file of the block read-only (``enabled=False``: as usual): what a
    dry run does, so that it leaves the disk as it found it (see the module doc)."""
    token = _READ_ONLY.set(enabled or _READ_ONLY.get())
    try:
        yield
    finally:
        _READ_ONLY.reset(token)


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
