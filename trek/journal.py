"""Append-only record journals: how a stage puts finished records on disk while it runs.

A long stage cannot rewrite its whole record file at every checkpoint (that is quadratic in the
run's size). Instead each finished record is *appended* to the record file as one JSON line, and
the appended lines are flushed and synced at each checkpoint; the file is rewritten (compacted:
one line per record, in the items' order) a constant number of times per run, when the stage ends.

Readers already take the last line of an id (a resumed record supersedes the old one), so a
journal is a valid record file at every moment, with one exception: a ``kill -9`` in the middle of
a write can leave a partial last line. :func:`trek.types.iter_json_lines` with ``torn_tail=True``
drops such a line with a warning, and :class:`Journal` cuts it off before appending after it.

Bytes written by a run are therefore the records made (once each) plus one compaction, and a
checkpoint costs what was finished since the previous one.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Hashable, Iterable
from pathlib import Path

from pydantic import BaseModel

from trek.outputs import OutputError, _ensure_folder, _kind, _reason, _stat

__all__ = ["Journal", "encode_record"]

_TAIL_CHUNK = 1 << 16


def encode_record(rec: BaseModel | dict) -> bytes:
    """One record as one JSONL line (with its newline), as every record file holds it."""
    if isinstance(rec, BaseModel):
        return rec.model_dump_json().encode("utf-8") + b"\n"
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8") + b"\n"


class Journal:
    """Appends records to one record file: :meth:`add` buffers, :meth:`flush` writes and syncs.

    The file is opened on the first flush that has something to write (so a stage that makes
    nothing never touches it). Opening repairs a partial last line left by a killed writer: a
    last line that is whole JSON but lacks its newline gets one; a broken one is cut off (its
    record is made again). Counters: ``lines`` and ``bytes`` appended.

    A record added with a ``tag`` (the stage executor passes the record's id) is located once it
    is written: :meth:`flush` returns ``(tag, offset, length)`` of each such line, so the caller
    can read the record back from the file (``os.pread``) instead of keeping it.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._fd: int | None = None
        self._buffer: list[bytes] = []
        self._tags: list[Hashable] = []
        self.lines = 0
        self.bytes = 0

    def add(self, rec: BaseModel | dict, tag: Hashable = None) -> None:
        self._buffer.append(encode_record(rec))
        self._tags.append(tag)

    def extend(self, recs: Iterable[BaseModel | dict]) -> None:
        for r in recs:
            self.add(r)

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def flush(self) -> list[tuple[Hashable, int, int]]:
        """Write the buffered lines at the end of the file and sync them (one ``write`` call);
        returns where each tagged line now is, ``(tag, offset, length)``."""
        if not self._buffer:
            return []
        if self._fd is None:
            self._open()
        assert self._fd is not None
        blob = b"".join(self._buffer)
        try:
            at = os.lseek(self._fd, 0, os.SEEK_END)
            view = memoryview(blob)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            os.fsync(self._fd)
        except OSError as e:
            raise OutputError(self.path, f"cannot be appended to ({_reason(e)})") from None
        spans = []
        for tag, line in zip(self._tags, self._buffer, strict=True):
            if tag is not None:
                spans.append((tag, at, len(line)))
            at += len(line)
        self.lines += len(self._buffer)
        self.bytes += len(blob)
        self._buffer.clear()
        self._tags.clear()
        return spans

    def close(self) -> None:
        """Close the file (buffered lines that were not flushed are dropped: flush first)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> None:
        p = self.path
        st = _stat(p)
        if st is not None and _kind(st.st_mode) is not None:
            raise OutputError(p, f"is {_kind(st.st_mode)}, not a regular file: records are not appended to it")
        _ensure_folder(p)
        try:
            fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)  # the umask applies
        except OSError as e:
            raise OutputError(p, f"cannot be written ({_reason(e)})") from None
        try:
            _repair_tail(fd)
            os.lseek(fd, 0, os.SEEK_END)
        except OSError as e:
            os.close(fd)
            raise OutputError(p, f"cannot be written ({_reason(e)})") from None
        self._fd = fd


def _repair_tail(fd: int) -> None:
    """Make the file end with a newline: complete a whole last line, cut a partial one."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    # find the start of the last line
    end = size
    start = 0
    while end > 0:
        lo = max(0, end - _TAIL_CHUNK)
        chunk = os.pread(fd, end - lo, lo)
        i = chunk.rfind(b"\n")
        if i >= 0:
            start = lo + i + 1
            break
        end = lo
    tail = os.pread(fd, size - start, start)
    try:
        json.loads(tail)
    except ValueError:
        os.ftruncate(fd, start)
    else:
        os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, b"\n")
