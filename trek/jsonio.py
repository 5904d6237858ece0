"""The one bounded reader of Trek's inputs: JSON, JSONL, gzip and zip members.

Every file a user hands to Trek (logs to import, requests, price tables, pools, contexts, run
records) is read through this module, so a hostile or broken file ends with one clear
:class:`~trek.types.RecordError` naming the file (and the line, the zip member) instead of a
traceback, a hang or the machine's memory:

* **only regular files**: a folder, a named pipe (which would block the reader forever), a
  device or a socket is refused before it is opened;
* **bounded nesting**: a value nested deeper than :data:`MAX_DEPTH` arrays or objects is refused
  (100,000 ``[`` would otherwise end in a ``RecursionError`` here or in any later walk of it);
* **bounded size**: a whole document (``.json``, a zip member) holds at most :data:`MAX_DOCUMENT`
  bytes once decompressed and a JSONL line at most :data:`MAX_LINE`; a compressed input that
  inflates more than :data:`MAX_RATIO` times past :data:`RATIO_FLOOR` bytes is refused as a
  decompression bomb while it is read, so memory stays bounded by the limits, not by the input;
* **finite numbers**: ``NaN``, ``Infinity`` and numbers that overflow to infinity (``1e400``) are
  refused where they are read.

* **workbooks** (``.xlsx``, :func:`open_workbook`): the file, each of its zip members and the
  number of members are bounded as zip inputs are, before openpyxl opens it; a sheet is read
  (:func:`sheet_rows`) with its declared dimension ignored and at most :data:`MAX_SHEET_ROWS`
  rows of :data:`MAX_SHEET_COLUMNS` columns, so ``A1:XFD1048576`` pads nothing.

The limits are module constants, named in the errors; docs/deviations.md lists them under "Deviations
and choices".
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import logging
import math
import os
import stat
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from trek.errors import RecordError

__all__ = ["MAX_DEPTH", "MAX_DOCUMENT", "MAX_LINE", "MAX_RATIO", "RATIO_FLOOR", "ZIP_SLACK", "check_regular", "open_input",
           "read_bytes", "read_text", "loads", "load_json", "iter_jsonl", "iter_jsonl_spans", "zip_member", "depth_error",
           "unique_paths", "finite_float", "open_workbook", "sheet_rows", "MAX_WORKBOOK", "MAX_WORKBOOK_MEMBER",
           "MAX_SHEET_ROWS", "MAX_SHEET_COLUMNS", "read_csv_text"]

PathLike = str | os.PathLike[str]

#: Deepest nesting of arrays and objects a value may have.
MAX_DEPTH = 200
#: Largest whole JSON document (decompressed), in bytes: 256 MiB.
MAX_DOCUMENT = 256 << 20
#: Longest line of a JSONL file (decompressed), in bytes: 64 MiB.
MAX_LINE = 64 << 20
#: Most a compressed input may inflate (decompressed / compressed bytes) once past RATIO_FLOOR.
MAX_RATIO = 200
#: Decompressed bytes under which the ratio is not checked (small files compress well).
RATIO_FLOOR = 16 << 20


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


def check_regular(path: PathLike, what: str = "file", pipes: bool = False) -> Path:
    """``path`` as a Path when it is an existing regular file (symlinks followed; a pipe too with
    ``pipes``, for an input meant to be streamed such as ``/dev/stdin``); otherwise a
    :class:`RecordError` saying what it is (missing, a folder, a pipe, a device, a socket)."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise RecordError(p, None, "file does not exist") from None
    except NotADirectoryError:
        raise RecordError(p, None, "file does not exist (a part of the path is a file, not a folder)") from None
    except OSError as e:
        raise RecordError(p, None, f"cannot be read ({e.strerror})") from None
    mode = st.st_mode
    if stat.S_ISREG(mode) or (pipes and stat.S_ISFIFO(mode)):
        return p
    if stat.S_ISDIR(mode):
        kind = "a folder"
    elif stat.S_ISFIFO(mode):
        kind = "a named pipe (reading it could block forever)"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "a device"
    elif stat.S_ISSOCK(mode):
        kind = "a socket"
    else:
        kind = "not a regular file"
    raise RecordError(p, None, f"is {kind}, not a {what}")


class _Bounded(io.RawIOBase):
    """A reader of decompressed bytes that refuses a decompression bomb while it reads: it
    compares what came out with what the compressed ``source`` has consumed so far."""

    def __init__(self, inner: IO[bytes], source: IO[bytes], path: Path, member: str | None = None):
        self.inner, self.source, self.path, self.member = inner, source, path, member
        self.out = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b):  # type: ignore[no-untyped-def,override]
        try:
            data = self.inner.read(len(b))
        except (OSError, EOFError, zlib.error, zipfile.BadZipFile) as e:
            raise RecordError(self.path, None, f"{self._where()}cannot be decompressed ({e})") from None
        n = len(data)
        b[:n] = data
        self.out += n
        if self.out > RATIO_FLOOR:
            consumed = max(1, self.source.tell())
            if self.out > MAX_RATIO * consumed:
                raise RecordError(self.path, None, f"{self._where()}inflates more than {MAX_RATIO} times (over "
                                  f"{_mib(self.out)} from {consumed:,} compressed bytes): refused as a decompression "
                                  "bomb")
        return n

    def _where(self) -> str:
        return f"member {self.member}: " if self.member else ""


@contextlib.contextmanager
def open_input(path: PathLike, what: str = "file", pipes: bool = False) -> Iterator[IO[bytes]]:
    """A binary reader of a regular file (a pipe with ``pipes``), through gzip (bounded, see the
    module doc) when the name ends in ``.gz``."""
    p = check_regular(path, what, pipes)
    try:
        raw = p.open("rb")
    except OSError as e:
        raise RecordError(p, None, f"cannot be read ({e.strerror})") from None
    with raw:
        if p.suffix.lower() == ".gz":
            gz = gzip.GzipFile(fileobj=raw, mode="rb")
            yield io.BufferedReader(_Bounded(gz, raw, p), 1 << 16)
        else:
            yield raw


def _read_all(fh: IO[bytes], path: Path, limit: int, member: str | None = None) -> bytes:
    chunks, n = [], 0
    while True:
        try:
            chunk = fh.read(1 << 20)
        except (OSError, EOFError, zlib.error, zipfile.BadZipFile) as e:
            raise RecordError(path, None, f"cannot be read ({e})") from None
        if not chunk:
            return b"".join(chunks)
        n += len(chunk)
        if n > limit:
            where = f"member {member} " if member else ""
            raise RecordError(path, None, f"{where}is larger than {_mib(limit)} (decompressed): refused")
        chunks.append(chunk)


def read_bytes(path: PathLike, what: str = "file", limit: int | None = None) -> bytes:
    """The (decompressed) bytes of a regular file, at most ``limit`` (:data:`MAX_DOCUMENT`)."""
    with open_input(path, what) as fh:
        return _read_all(fh, Path(path), MAX_DOCUMENT if limit is None else limit)


def read_text(path: PathLike, what: str = "file", limit: int | None = None) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a byte-order mark is dropped)."""
    raw = read_bytes(path, what, limit)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RecordError(path, None, "not UTF-8 text (a binary file?)") from None


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def finite_float(text: str) -> float:
    """``json.loads``'s ``parse_float`` that refuses a number overflowing to infinity ("1e400")."""
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"the number {text[:40]} is too large (it overflows to infinity)")
    return v


def depth_error(value: Any, limit: int | None = None) -> str | None:
    """Why ``value`` is nested too deep (``None`` when it is within ``limit``), without recursion."""
    limit = MAX_DEPTH if limit is None else limit
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            children = v.values()
        elif isinstance(v, list):
            children = v
        else:
            continue
        if d > limit:
            return f"nested deeper than {limit} arrays or objects: refused"
        stack.extend((c, d + 1) for c in children if isinstance(c, (dict, list)))
    return None


def loads(text: str | bytes, path: PathLike, line: int | None = None, *, nonfinite: bool = False) -> Any:
    """The JSON value of ``text`` read from ``path`` (``line`` of it), refused with a
    :class:`RecordError` when it is not JSON, holds a non-finite number or nests too deep.
    ``nonfinite``: ``NaN`` and ``Infinity`` are read as floats (inspect_ai's logs write an unscored
    score and an undefined metric as ``NaN``)."""
    try:
        value = json.loads(text) if nonfinite else json.loads(text, parse_constant=_constant, parse_float=finite_float)
    except json.JSONDecodeError as e:
        where = f": line {e.lineno}, column {e.colno}" if line is None else f" at column {e.colno}"
        tail = text.rstrip() if isinstance(text, str) else text.rstrip().decode("utf-8", "replace")
        why = ("; the file ends in the middle of a value (truncated?)"
               if line is None and (e.pos >= len(tail) or not tail.endswith(("}", "]"))) else "")
        raise RecordError(path, line, f"not valid JSON ({e.msg}{where}){why}") from None
    except RecursionError:
        raise RecordError(path, line, f"nested deeper than {MAX_DEPTH} arrays or objects: refused") from None
    except UnicodeDecodeError:
        raise RecordError(path, line, "not UTF-8 text (a binary file?)") from None
    except ValueError as e:  # NaN, Infinity, 1e400, an integer of over 4,300 digits
        raise RecordError(path, line, f"not valid JSON ({e})") from None
    err = depth_error(value)
    if err:
        raise RecordError(path, line, err)
    return value


def load_json(path: PathLike, what: str = "JSON file") -> Any:
    """The JSON value of a whole (optionally gzipped) file, bounded as the module doc says."""
    return loads(read_text(path, what), path)


def iter_jsonl(path: PathLike, objects: bool = True, pipes: bool = False,
               torn_tail: bool = False, warn_torn: bool = True) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for every non-blank line of a JSONL file (``.gz`` read through
    gzip); with ``objects`` every value must be a JSON object; ``pipes``: a named pipe is read too;
    ``torn_tail``: a last line without its newline that is not JSON (a journal whose writer was
    killed) is dropped with a warning instead of raising (``warn_torn=False``: dropped without one,
    for a first look at a file that the stage executor reads again and reports on)."""
    for lineno, _, _, obj in iter_jsonl_spans(path, objects, pipes, torn_tail, warn_torn):
        yield lineno, obj


def iter_jsonl_spans(path: PathLike, objects: bool = True, pipes: bool = False,
                     torn_tail: bool = False, warn_torn: bool = True) -> Iterator[tuple[int, int, int, Any]]:
    """:func:`iter_jsonl` with where each line is: ``(line number, byte offset, byte length,
    value)``, the offset and length those of the line in the (decompressed) file, its newline
    included, so a record can be read again later by ``pread`` (the stage executor's index)."""
    p = Path(path)
    with open_input(p, "JSONL file", pipes) as fh:
        lineno = 0
        offset = 0
        while True:
            try:
                raw = fh.readline(MAX_LINE + 1)
            except RecordError as e:
                raise RecordError(p, lineno + 1, str(e).removeprefix(f"{p}: ")) from None
            except (OSError, EOFError, zlib.error) as e:  # a damaged or truncated gzip file
                raise RecordError(p, lineno + 1, f"cannot be decompressed ({e})") from None
            if not raw:
                return
            lineno += 1
            start = offset
            offset += len(raw)
            if len(raw) > MAX_LINE:
                raise RecordError(p, lineno, f"the line is longer than {_mib(MAX_LINE)}: refused")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise RecordError(p, lineno, "not UTF-8 text (a binary file?)") from None
            if not line.strip():
                continue
            try:
                obj = loads(line, p, lineno)
            except RecordError:
                if torn_tail and not raw.endswith(b"\n"):
                    if warn_torn:
                        logging.getLogger("trek").warning(
                            "%s, line %d: a partial last line (the writer was stopped while writing it) was dropped; "
                            "its record is made again", p, lineno)
                    return
                raise
            if objects and not isinstance(obj, dict):
                raise RecordError(p, lineno, f"expected a JSON object, got {type(obj).__name__}")
            yield lineno, start, len(raw), obj


#: Bytes a zip member may inflate beyond MAX_RATIO times the compressed bytes read so far: the
#: ratio of a member is checked from its first byte, this allowance covering the first blocks.
ZIP_SLACK = 1 << 20


class _ZipConsumed:
    """How many compressed bytes of a zip member the reader has taken from the archive so far
    (counted, not the size the zip declares)."""

    def __init__(self, ext: Any, size: int):
        self.ext, self.size = ext, size

    def tell(self) -> int:
        left = getattr(self.ext, "_compress_left", None)
        return max(1, self.size - left) if isinstance(left, int) else max(1, self.size)


class _MemberBounded(_Bounded):
    """:class:`_Bounded` for one zip member: the ratio is checked from the first byte (with
    :data:`ZIP_SLACK`), against the compressed bytes actually read."""

    def readinto(self, b):  # type: ignore[no-untyped-def,override]
        try:
            data = self.inner.read(len(b))
        except (OSError, EOFError, zlib.error, zipfile.BadZipFile, RuntimeError, NotImplementedError) as e:
            raise RecordError(self.path, None, f"{self._where()}cannot be decompressed ({e})") from None
        n = len(data)
        b[:n] = data
        self.out += n
        consumed = self.source.tell()
        if self.out > MAX_RATIO * consumed + ZIP_SLACK:
            raise RecordError(self.path, None, f"{self._where()}inflates more than {MAX_RATIO} times (over "
                              f"{_mib(self.out)} from {consumed:,} compressed bytes): refused as a decompression bomb")
        return n


def zip_member(z: zipfile.ZipFile, name: str, path: PathLike, limit: int | None = None) -> bytes:
    """The bytes of member ``name`` of the open zip ``z`` (read from ``path``), bounded in size
    and in ratio from the member's first byte (:data:`ZIP_SLACK`; the compressed bytes counted as
    they are read, the sizes a zip declares are not trusted)."""
    p = Path(path)
    try:
        info = z.getinfo(name)
        inner = z.open(info)
    except (KeyError, zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as e:
        raise RecordError(p, None, f"member {name} cannot be read ({e})") from None
    with inner:
        bounded = _MemberBounded(inner, _ZipConsumed(inner, info.compress_size), p, name)  # type: ignore[arg-type]
        return _read_all(io.BufferedReader(bounded, 1 << 16), p, MAX_DOCUMENT if limit is None else limit, name)


def unique_paths(paths: Iterable[PathLike]) -> tuple[list[Path], list[Path]]:
    """``paths`` with repeats left out (the same file or folder twice, also through ``..`` or a
    symlink), and the repeats, so a command can say what it did not count twice."""
    seen: set[str] = set()
    keep, again = [], []
    for x in paths:
        key = os.path.realpath(x)
        (again if key in seen else keep).append(Path(x))
        seen.add(key)
    return keep, again


#: Largest workbook file (.xlsx) read: 64 MiB.
MAX_WORKBOOK = 64 << 20
#: Largest member of a workbook once decompressed (a sheet's XML, the shared strings): 64 MiB.
MAX_WORKBOOK_MEMBER = 64 << 20
#: Most members a workbook may hold.
MAX_WORKBOOK_MEMBERS = 1_000
#: Most rows of a sheet read (the header included).
MAX_SHEET_ROWS = 200_000
#: Columns of a sheet read (cells further right are not looked at).
MAX_SHEET_COLUMNS = 256


def _drain_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path, limit: int) -> None:
    """Read member ``info`` of ``z`` to its end through the bounded reader, keeping nothing."""
    try:
        inner = z.open(info)
    except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as e:
        raise RecordError(path, None, f"member {info.filename} cannot be read ({e})") from None
    with inner:
        fh = io.BufferedReader(_MemberBounded(inner, _ZipConsumed(inner, info.compress_size), path,  # type: ignore[arg-type]
                                              info.filename), 1 << 16)
        n = 0
        while True:
            try:
                chunk = fh.read(1 << 20)
            except (OSError, EOFError, zlib.error, zipfile.BadZipFile) as e:
                raise RecordError(path, None, f"member {info.filename} cannot be read ({e})") from None
            if not chunk:
                return
            n += len(chunk)
            if n > limit:
                raise RecordError(path, None, f"member {info.filename} is larger than {_mib(limit)} (decompressed): "
                                  "refused")


@contextlib.contextmanager
def open_workbook(path: PathLike, what: str = "workbook (.xlsx)") -> Iterator[Any]:
    """A read-only openpyxl workbook of the regular file ``path`` (values, not formulas), for the
    ``with`` block. Refused with a :class:`RecordError` naming the file before openpyxl reads it:
    not a regular file (a pipe or device is never opened), more than :data:`MAX_WORKBOOK` bytes,
    not a zip, more than :data:`MAX_WORKBOOK_MEMBERS` members, or a member that inflates past
    :data:`MAX_WORKBOOK_MEMBER` bytes or :data:`MAX_RATIO` times. Read its sheets with
    :func:`sheet_rows`."""
    p = check_regular(path, what)
    try:
        size = p.stat().st_size
        raw = p.open("rb")
    except OSError as e:
        raise RecordError(p, None, f"cannot be read ({e.strerror})") from None
    with raw:
        if size > MAX_WORKBOOK:
            raise RecordError(p, None, f"is larger than {_mib(MAX_WORKBOOK)}: refused as a {what}")
        try:
            z = zipfile.ZipFile(raw)
        except (zipfile.BadZipFile, OSError, ValueError) as e:
            raise RecordError(p, None, f"cannot be read as an Excel workbook (not an .xlsx zip: {e})") from None
        with z:
            infos = z.infolist()
            if len(infos) > MAX_WORKBOOK_MEMBERS:
                raise RecordError(p, None, f"holds {len(infos):,} members, more than a workbook's "
                                  f"{MAX_WORKBOOK_MEMBERS:,}: refused")
            for info in infos:
                _drain_member(z, info, p, MAX_WORKBOOK_MEMBER)
        raw.seek(0)
        from openpyxl import load_workbook

        try:
            wb = load_workbook(raw, read_only=True, data_only=True)
        except Exception as e:  # noqa: BLE001 - zip, XML and openpyxl errors alike
            raise RecordError(p, None, f"cannot be read as an Excel workbook ({type(e).__name__}: {e})") from None
        try:
            yield wb
        finally:
            wb.close()


def sheet_rows(wb: Any, name: str, path: PathLike) -> list[tuple[Any, ...]]:
    """The rows of sheet ``name`` of ``wb`` (from :func:`open_workbook`) as tuples of values, the
    declared dimension ignored; more than :data:`MAX_SHEET_ROWS` rows is a :class:`RecordError`."""
    ws = wb[name]
    ws.reset_dimensions()  # a declared A1:XFD1048576 would be padded cell by cell
    rows: list[tuple[Any, ...]] = []
    try:
        for row in ws.iter_rows(max_col=MAX_SHEET_COLUMNS, max_row=MAX_SHEET_ROWS + 1, values_only=True):
            if len(rows) == MAX_SHEET_ROWS:
                raise RecordError(path, None, f"sheet {name!r} has more than {MAX_SHEET_ROWS:,} rows: refused")
            rows.append(tuple(row))
    except RecordError:
        raise
    except Exception as e:  # noqa: BLE001 - XML and openpyxl errors alike
        raise RecordError(path, None, f"sheet {name!r} of the workbook cannot be read ({type(e).__name__}: {e})") from None
    while rows and all(v is None for v in rows[-1]):
        rows.pop()
    width = max((max((i + 1 for i, v in enumerate(r) if v is not None), default=0) for r in rows), default=0)
    return [r[:width] + (None,) * (width - len(r[:width])) for r in rows]


def read_csv_text(path: PathLike, what: str = "CSV file", limit: int | None = None) -> str:
    """The text of a CSV input through the bounded reader (:func:`read_text`): a regular file of
    at most ``limit`` (:data:`MAX_DOCUMENT`) bytes, UTF-8."""
    return read_text(path, what, limit)
