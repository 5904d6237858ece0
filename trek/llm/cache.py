"""The response cache: one SQLite file (WAL mode), safe for several processes at once.

One shape serves every remote call Trek caches: model replies (:class:`LLMCache`) and search
results (:class:`trek.search.base.SearchCache`) are both a :class:`ResponseCache`.

Interface: ``await cache.get(request, compute) -> (raw_response, cached)``.

``request`` is a JSON-serializable dict holding exactly what changes a model's output: the
endpoint identity, the model, the request body (messages, tools, sampling parameters) and an
explicit sample index. Timeouts, concurrency, retry settings and API keys are never part of it
(the client does not put them there). The provider's raw JSON reply is stored with its usage;
entries never expire, so changing a parser never invalidates the cache.

Durability: ``get`` hands a computed reply back only once the row holding it is committed, so
a process killed at any point (``kill -9``) never loses a reply it has used or paid for beyond
the calls still in flight. In an event loop the commit runs on a writer thread of the cache's
own: replies that arrive together share one transaction (group commit), and the loop's thread
spends no time in SQLite writes. Commits are durable against a killed process (the write-ahead
log is in the operating system's hands when the commit returns); ``synchronous=NORMAL`` means a
power cut may lose the last commits, never corrupt the file.

A cache travels as a replay log: :meth:`ResponseCache.dump` writes entries as (gzipped) JSONL,
one ``{"key", "request", "response"}`` per line sorted by key, and :meth:`ResponseCache.load`
adds such a file to a cache. A cache opened with ``track=True`` keeps in
:attr:`ResponseCache.touched` every key read or stored since it was opened, so a dump can keep exactly
what one piece of work needed; by default nothing is kept (a long run's keys would grow its memory
with every call).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from trek.sqlite import connect, transaction
from trek.types import RecordError, iter_json_lines, write_jsonl

__all__ = ["ResponseCache", "LLMCache", "request_key", "keyed"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key        TEXT PRIMARY KEY,
    request    TEXT NOT NULL,
    response   TEXT NOT NULL,
    created_at REAL NOT NULL
);
"""


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_key(request: dict[str, Any]) -> str:
    """The cache key of a request: sha256 of its canonical JSON."""
    return keyed(request)[0]


def keyed(request: dict[str, Any]) -> tuple[str, str]:
    """``(key, canonical JSON)`` of a request: the text is what the cache stores beside the
    reply, so a caller that needs both serialises the request once."""
    text = _canonical(request)
    return hashlib.sha256(text.encode("utf-8")).hexdigest(), text


_INSERT = "INSERT OR IGNORE INTO responses (key, request, response, created_at) VALUES (?, ?, ?, ?)"


class _GroupCommit:
    """A writer thread with its own connection: rows queued while it commits are written in
    the next transaction together, and each row's future is settled (on its event loop) only
    after the commit that holds it. SQLite releases the GIL while it writes, so the event
    loop goes on serving replies in the meantime."""

    def __init__(self, path: Path, retry: Callable[[Callable[[], Any]], Any]):
        self._path, self._retry = path, retry
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        # rows submitted during one pass of an event loop, handed to the writer together at the
        # end of that pass (one queue put and one thread wake for many replies, not one each)
        self._pending: dict[asyncio.AbstractEventLoop, list[Any]] = {}
        self._pending_lock = threading.Lock()

    def submit(self, row: tuple[str, str, str], loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None]) -> None:
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="trek-cache-writer", daemon=True)
                    self._thread.start()
        with self._pending_lock:
            rows = self._pending.get(loop)
            if rows is None:
                rows = self._pending[loop] = []
                loop.call_soon(self._hand_over, loop)
            rows.append((row, loop, fut))

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._pending_lock:
            rows = self._pending.pop(loop, None)
        if rows:
            self._queue.put(rows)

    def close(self) -> None:
        with self._start_lock:
            if self._thread is not None:
                for loop in list(self._pending):
                    self._hand_over(loop)
                self._queue.put(None)
                self._thread.join()
                self._thread = None

    def _run(self) -> None:
        conn = connect(self._path)
        try:
            while True:
                item = self._queue.get()
                if item is None:
                    return
                batch = list(item)
                stop = False
                while len(batch) < 512:
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        stop = True
                        break
                    batch.extend(nxt)
                error = self._commit(conn, [(k, req, resp, time.time()) for (k, req, resp), _, _ in batch])
                by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
                for _, loop, fut in batch:
                    by_loop.setdefault(loop, []).append(fut)
                for loop, futs in by_loop.items():
                    try:
                        loop.call_soon_threadsafe(_settle, futs, error)
                    except RuntimeError:  # that loop is gone: nobody waits for these rows any more
                        pass
                if stop:
                    return
        finally:
            conn.close()

    def _commit(self, conn: sqlite3.Connection, rows: list[tuple[str, str, str, float]]) -> BaseException | None:
        def write() -> None:
            with transaction(conn, "BEGIN IMMEDIATE"):
                conn.executemany(_INSERT, rows)

        try:
            self._retry(write)
        except Exception as e:  # noqa: BLE001 - handed to every caller waiting for these rows
            return e
        return None


def _settle(futs: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for fut in futs:
        if not fut.done():
            if error is None:
                fut.set_result(None)
            else:
                fut.set_exception(error)



class ResponseCache:
    """SQLite-backed response cache (``path=None``: in memory).

    Each process opens its own connection; writes are ``INSERT OR IGNORE`` statements in
    transactions of their own (synchronous :meth:`store`) or grouped by the writer thread
    (:meth:`get` in an event loop), so concurrent writers never see a half-written entry and the
    first stored reply for a key wins. Identical requests in flight in the same process are
    computed once (the second caller waits for the first).
    """

    def __init__(self, path: str | os.PathLike[str] | None, *, track: bool = False):
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        if self.path is not None and self.path.is_dir():
            raise ValueError(f"cache {self.path} is a folder; give a file name, e.g. {self.path}/responses.sqlite")
        try:
            self._conn = self._retry_locked(lambda: connect(self.path, _SCHEMA))
        except sqlite3.DatabaseError as e:  # garbage file, unwritable folder, ...
            raise ValueError(f"cache {self.path} cannot be used as an SQLite cache ({e}); move it away or pick another") from None
        except OSError as e:
            raise ValueError(f"cache {self.path} cannot be created ({e.strerror})") from None
        self._inflight: dict[str, asyncio.Future[Any]] = {}
        # in memory, or read-only (a dry run: trek.sqlite.read_only): no writer thread of its own
        writes = self.path is not None and self._conn.trek_writes_file
        self._writer = _GroupCommit(self.path, self._retry_locked) if writes and self.path is not None else None
        self.hits = 0
        self.misses = 0
        self._touched: set[str] = set()
        self._track = track

    @property
    def touched(self) -> set[str]:
        """Keys read (found) or stored since this cache was opened with ``track=True`` (a
        :meth:`dump` of them keeps what one piece of work needed). A cache opened without it keeps
        none, and asking is an error rather than an empty set that would dump nothing."""
        if not self._track:
            raise RuntimeError(f"cache {self.path or '(in memory)'} was opened without track=True: it keeps no "
                               "record of the keys it touched (open it with LLMCache(path, track=True))")
        return self._touched

    # -- low level -------------------------------------------------------------------------
    def _retry_locked(self, fn: Callable[[], Any]) -> Any:
        delay = 0.01
        for _ in range(200):
            try:
                return fn()
            except sqlite3.OperationalError as e:  # "database is locked" under heavy contention
                if "locked" not in str(e) and "busy" not in str(e):
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
        return fn()

    def lookup(self, key: str) -> dict[str, Any] | None:
        """The stored raw response for ``key``, or ``None``."""
        with self._lock:
            row = self._retry_locked(
                lambda: self._conn.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
            )
        if row is None:
            return None
        if self._track:
            self._touched.add(key)
        return json.loads(row[0])

    def store(self, key: str, request: dict[str, Any], response: dict[str, Any]) -> None:
        """Store a raw response; an existing entry for the same key is kept."""
        self._store_text(key, _canonical(request), response)

    def _store_text(self, key: str, request_text: str, response: dict[str, Any]) -> None:
        resp_s = json.dumps(response, ensure_ascii=False)
        with self._lock:
            self._retry_locked(lambda: self._conn.execute(_INSERT, (key, request_text, resp_s, time.time())))
            if self._track:
                self._touched.add(key)

    async def _astore(self, key: str, request_text: str, response: dict[str, Any]) -> None:
        """:meth:`store` from an event loop: returns once the row is committed (by the writer
        thread, together with the rows that arrived meanwhile)."""
        if self._writer is None:  # in memory: no disk, nothing to wait for
            self._store_text(key, request_text, response)
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._writer.submit((key, request_text, json.dumps(response, ensure_ascii=False)), loop, done)
        await done
        if self._track:
            self._touched.add(key)

    def dump(self, path: str | os.PathLike[str], keys: Iterable[str] | None = None) -> int:
        """Write the entries of ``keys`` (default: all) to a replay log; returns how many.

        One ``{"key", "request", "response"}`` JSON object per line, sorted by key; a name
        ending in ``.gz`` is gzipped reproducibly. A key that is not in the cache is an error.
        """
        wanted = sorted(set(keys)) if keys is not None else None
        with self._lock:
            if wanted is None:
                wanted = [k for (k,) in self._conn.execute("SELECT key FROM responses ORDER BY key")]
            rows = []
            for k in wanted:
                row = self._conn.execute("SELECT request, response FROM responses WHERE key = ?", (k,)).fetchone()
                if row is None:
                    raise KeyError(f"cache {self.path or ':memory:'} holds no entry {k}")
                rows.append({"key": k, "request": json.loads(row[0]), "response": json.loads(row[1])})
        write_jsonl(path, rows)
        return len(rows)

    def load(self, path: str | os.PathLike[str]) -> int:
        """Add the entries of a replay log written by :meth:`dump`; returns how many were new.

        A line without ``key``, ``request`` and ``response``, or whose key is not the digest of
        its request, raises :class:`~trek.types.RecordError` naming the file and line; nothing
        of the file is added then.
        """
        rows = []
        for lineno, obj in iter_json_lines(path):
            missing = [f for f in ("key", "request", "response") if f not in obj]
            if missing:
                raise RecordError(path, lineno, f"replay entry lacks {', '.join(missing)}")
            if not isinstance(obj["request"], dict) or request_key(obj["request"]) != obj["key"]:
                raise RecordError(path, lineno, "replay entry's key is not the digest of its request")
            rows.append((obj["key"], _canonical(obj["request"]), json.dumps(obj["response"], ensure_ascii=False)))
        with self._lock:
            before = int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
            with transaction(self._conn):
                self._conn.executemany(
                    "INSERT OR IGNORE INTO responses (key, request, response, created_at) VALUES (?, ?, ?, 0)", rows
                )
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]) - before

    def __contains__(self, request: dict[str, Any]) -> bool:
        return self.lookup(request_key(request)) is not None

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        with self._lock:
            self._conn.close()

    # -- the one interface -----------------------------------------------------------------
    async def get(
        self, request: dict[str, Any], compute: Callable[[], Awaitable[dict[str, Any]]]
    ) -> tuple[dict[str, Any], bool]:
        """Return ``(raw_response, cached)``; call ``compute()`` only on a miss.

        ``compute`` raising means nothing is stored: a failed call is never cached. A computed
        reply is returned once it is committed to the cache file.
        """
        key, text = keyed(request)
        hit = self.lookup(key)
        if hit is not None:
            self.hits += 1
            return hit, True
        return await self.fill(key, text, compute)

    async def fill(
        self, key: str, request_text: str, compute: Callable[[], Awaitable[dict[str, Any]]]
    ) -> tuple[dict[str, Any], bool]:
        """:meth:`get` for a caller that has just looked ``key`` up and missed (``key`` and
        ``request_text`` from :func:`keyed`): joins an identical computation in flight, else
        computes, stores (committed before it returns) and returns ``(raw_response, cached)``."""
        pending = self._inflight.get(key)
        if pending is not None:
            result = await asyncio.shield(pending)
            self.hits += 1
            return result, True
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            response = await compute()
            await self._astore(key, request_text, response)
        except BaseException as e:
            if not fut.done():
                fut.set_exception(e)
                fut.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        else:
            self.misses += 1
            fut.set_result(response)
            return response, False
        finally:
            self._inflight.pop(key, None)

    def get_sync(
        self, request: dict[str, Any], compute: Callable[[], dict[str, Any]]
    ) -> tuple[dict[str, Any], bool]:
        """Synchronous variant of :meth:`get` for plain functions."""
        key = request_key(request)
        hit = self.lookup(key)
        if hit is not None:
            self.hits += 1
            return hit, True
        response = compute()
        self.store(key, request, response)
        self.misses += 1
        return response, False


#: The model-reply cache is a :class:`ResponseCache`.
LLMCache = ResponseCache
