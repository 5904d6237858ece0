"""The response cache: one SQLite file (WAL mode), safe for several processes at once.

One shape serves every remote call Trek caches: model replies (:class:`LLMCache`) and search
results (:class:`trek.search.base.SearchCache`) are both a :class:`ResponseCache`.

Interface: ``await cache.get(request, compute) -> (raw_response, cached)``.

``request`` is a JSON-serializable dict holding exactly what changes a model's output: the
endpoint identity, the model, the request body (messages, tools, sampling parameters) and an
explicit sample index. Timeouts, concurrency, retry settings and API keys are never part of it
(the client does not put them there). The provider's raw JSON reply is stored with its usage;
entries never expire, so changing a parser never invalidates the cache.

A cache travels as a replay log: :meth:`ResponseCache.dump` writes entries as (gzipped) JSONL,
one ``{"key", "request", "response"}`` per line sorted by key, and :meth:`ResponseCache.load`
adds such a file to a cache. :attr:`ResponseCache.touched` holds every key read or stored since
the cache was opened, so a dump can keep exactly what one piece of work needed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from trek.paths import env_path
from trek.sqlite import connect
from trek.types import RecordError, iter_json_lines, write_jsonl

__all__ = ["ResponseCache", "LLMCache", "request_key", "default_cache_path"]

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
    return hashlib.sha256(_canonical(request).encode("utf-8")).hexdigest()


def default_cache_path(run_dir: str | os.PathLike[str] | None = None) -> Path:
    """``$TREK_CACHE`` when set, else ``<run_dir>/llm-cache.sqlite`` (run_dir defaults to cwd)."""
    return env_path("TREK_CACHE", Path(run_dir or ".") / "llm-cache.sqlite")


class ResponseCache:
    """SQLite-backed response cache (``path=None``: in memory).

    Each process opens its own connection; writes are single ``INSERT OR IGNORE`` statements
    in autocommit mode, so concurrent writers never see a half-written entry and the first
    stored reply for a key wins. Identical requests in flight in the same process are
    computed once (the second caller waits for the first).
    """

    def __init__(self, path: str | os.PathLike[str] | None):
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        if self.path is not None and self.path.is_dir():
            raise ValueError(f"cache {self.path} is a folder; give a file name, e.g. {self.path / 'llm-cache.sqlite'}")
        try:
            self._conn = self._retry_locked(lambda: connect(self.path, _SCHEMA))
        except sqlite3.DatabaseError as e:  # garbage file, unwritable folder, ...
            raise ValueError(f"cache {self.path} cannot be used as an SQLite cache ({e}); move it away or pick another") from None
        except OSError as e:
            raise ValueError(f"cache {self.path} cannot be created ({e.strerror})") from None
        self._inflight: dict[str, asyncio.Future[Any]] = {}
        self.hits = 0
        self.misses = 0
        #: Keys read (found) or stored since this cache was opened.
        self.touched: set[str] = set()

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
        self.touched.add(key)
        return json.loads(row[0])

    def store(self, key: str, request: dict[str, Any], response: dict[str, Any]) -> None:
        """Store a raw response; an existing entry for the same key is kept."""
        req_s, resp_s = _canonical(request), json.dumps(response, ensure_ascii=False)
        with self._lock:
            self._retry_locked(
                lambda: self._conn.execute(
                    "INSERT OR IGNORE INTO responses (key, request, response, created_at) VALUES (?, ?, ?, ?)",
                    (key, req_s, resp_s, time.time()),
                )
            )
            self.touched.add(key)

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
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany(
                    "INSERT OR IGNORE INTO responses (key, request, response, created_at) VALUES (?, ?, ?, 0)", rows
                )
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]) - before

    def __contains__(self, request: dict[str, Any]) -> bool:
        return self.lookup(request_key(request)) is not None

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- the one interface -----------------------------------------------------------------
    async def get(
        self, request: dict[str, Any], compute: Callable[[], Awaitable[dict[str, Any]]]
    ) -> tuple[dict[str, Any], bool]:
        """Return ``(raw_response, cached)``; call ``compute()`` only on a miss.

        ``compute`` raising means nothing is stored: a failed call is never cached.
        """
        key = request_key(request)
        hit = self.lookup(key)
        if hit is not None:
            self.hits += 1
            return hit, True
        pending = self._inflight.get(key)
        if pending is not None:
            result = await asyncio.shield(pending)
            self.hits += 1
            return result, True
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            response = await compute()
        except BaseException as e:
            if not fut.done():
                fut.set_exception(e)
                fut.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        else:
            self.store(key, request, response)
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
