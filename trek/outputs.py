"""The one output rule: where a command may write, and how a file gets there.

Every file Trek writes (record files, ``run.json``, workbooks, pages, manifests) goes through
:func:`atomic_write`, and every command that writes to a path the user names checks it first with
:func:`check_out`:

* **never over an input**: an output that is a file the same command reads (the requests file,
  a run's ``trace.jsonl``, a pools file), or one of the record files of a run directory it reads
  (``RUN/grades.jsonl`` as a workbook), is refused before anything runs;
* **only regular files**: an output that is a folder, a device (``/dev/null``, ``/dev/full``), a
  pipe or a socket is refused; just before the rename the target is checked again, so a
  temporary file is never renamed over anything but a regular file (run as root, that rename
  would replace ``/dev/null`` with a plain file for every program on the machine);
* **all or nothing**: the new content goes to a temporary file in the same folder, is synced,
  then renamed over the target. A write that fails (read-only folder, full disk, a path under a
  file) raises :class:`OutputError` naming the path and the reason, leaves the previous file as
  it was and removes the temporary file;
* **never a run's records, never someone else's file**: the record check resolves ``..`` and
  symlinks first (whether or not the folder exists yet), and an existing file that is not an
  earlier output of the same command is refused unless ``--force`` (:func:`check_out`);
* **runs where runs belong**: a run folder is new, empty or a Trek run of the same kind, never
  inside the bundled data, the package or a recorded Ctrl build (:func:`check_run_folder`), and
  ``--replace`` only replaces a run of the same kind, never the current folder or one holding an
  input (:func:`check_replace`);
* **inert CSV**: a text cell that a spreadsheet would evaluate (``=``, ``+``, ``-``, ``@``) is
  written with a leading ``'`` (:func:`csv_safe`);
* **the umask decides the mode**: new files are created with mode ``0o666`` minus the process's
  umask (``0644`` under the usual ``022``), as any other program's files are.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from trek.paths import BUNDLED_MINI_DIR

__all__ = ["OutputError", "check_out", "check_folder_out", "check_run_folder", "check_replace", "make_folder",
           "folder_mode", "atomic_write", "install_file", "staged_folder", "real", "csv_cell", "csv_safe", "RUN_FILE_SUFFIXES"]

PathLike = str | os.PathLike[str]

#: Names that are a run directory's own records (never a command's ``--out`` inside a run it reads).
RUN_FILE_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".sqlite", ".sqlite-wal", ".sqlite-shm")


class OutputError(ValueError):
    """An output that cannot or must not be written; the message names the path and why."""

    def __init__(self, path: PathLike, message: str):
        self.path = str(path)
        super().__init__(f"{self.path}: {message}")


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words (``None`` for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _stat(p: Path) -> os.stat_result | None:
    try:
        return os.stat(p)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise OutputError(p, f"cannot be written: {_file_parent(p)} is a file, not a folder") from None
    except OSError as e:
        raise OutputError(p, f"cannot be checked ({e.strerror})") from None


def _file_parent(p: Path) -> Path:
    """The first ancestor of ``p`` that exists and is not a folder (where a path 'under a file' breaks)."""
    for a in reversed(p.parents):
        if a.exists() and not a.is_dir():
            return a
    return p.parent


def _same(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def _is_run_file(name: str) -> bool:
    return (name.startswith(".") and name.endswith(".lock")) or name.endswith(RUN_FILE_SUFFIXES)


def real(path: PathLike) -> Path:
    """``path`` with ``..`` and every symlink resolved, whether or not it exists yet (so
    ``RUN/new/../trace.jsonl`` is ``RUN/trace.jsonl``)."""
    return Path(os.path.realpath(os.path.abspath(path)))


def _owned(p: Path, owner: bytes | Callable[[Path], bool]) -> bool:
    """Whether the existing file ``p`` is an output of the command: it starts with the bytes
    ``owner`` (a CSV header, a JSON key), or ``owner(p)`` says so."""
    if callable(owner):
        try:
            return bool(owner(p))
        except Exception:  # noqa: BLE001 - a file the check cannot read is not the command's
            return False
    try:
        with open(p, "rb") as fh:
            return fh.read(len(owner)) == owner
    except OSError:
        return False


def check_out(
    path: PathLike, *, reads: Iterable[PathLike | None] = (), runs: Iterable[PathLike | None] = (),
    option: str = "--out", example: str | None = None, owner: bytes | Callable[[Path], bool] | None = None,
    command: str = "this command", force: bool = False,
) -> Path:
    """Refuse ``path`` as a file output unless it is a regular file (or missing) that the command
    does not read; returns it as a :class:`~pathlib.Path`.

    ``reads``: the files the command reads (``None`` entries are ignored). ``runs``: the run
    directories it reads; inside those, every record file of the run is refused (``*.jsonl``,
    ``*.json``, ``*.sqlite``, the lock), after resolving ``..`` and symlinks, whether or not the
    folder exists yet. ``example``: a file name to suggest when ``path`` is a folder. ``owner``:
    how an earlier output of the same command starts (bytes) or a test of it; an existing file
    that is not one is refused unless ``force`` (``command`` names the command in the error).
    """
    p = Path(path)
    st = _stat(p)
    if st is not None:
        kind = _kind(st.st_mode)
        if kind == "a folder":
            hint = f"; give a file name, e.g. {p / example}" if example else "; give a file name"
            raise OutputError(p, f"{option} is a folder{hint}")
        if kind is not None:
            raise OutputError(p, f"{option} is {kind}, not a regular file; Trek writes a new file and renames it into "
                              "place, which would replace it: give the path of a file")
    rp = real(p)
    for r in reads:
        if r is not None and (rp == real(r) or _same(p, Path(r))):
            raise OutputError(p, f"{option} is {r}, a file this command reads; writing it would destroy it: "
                              "give another path")
    for r in runs:
        if r is not None and rp.parent == real(r) and _is_run_file(rp.name):
            raise OutputError(p, f"{option} is one of the records of {r}, which this command reads; "
                              "writing it would destroy them: give a path outside the run's record files")
    if st is None:
        anc = next((a for a in p.parents if a.exists()), None)
        if anc is not None and not anc.is_dir():
            raise OutputError(p, f"cannot be written: {anc} is a file, not a folder")
    elif owner is not None and not force and st.st_size > 0 and not _owned(p, owner):
        raise OutputError(p, f"{option} exists and is not an output of {command}; give a new path, or --force to "
                          "replace it")
    return p


#: Where no run folder may be created: the bundled TrekBench-Mini data and the package itself.
def _protected() -> list[tuple[Path, str]]:
    return [(real(BUNDLED_MINI_DIR), "the bundled TrekBench-Mini data"), (real(Path(__file__).parent), "the trek package")]


#: What a grid folder (``ctrl run --runs``) may hold besides its run folders.
_GRID_FILES = (".sqlite", ".sqlite-wal", ".sqlite-shm", ".spend", ".lock", ".jsonl")


def _run_kind(folder: Path, meta_name: str) -> str | None:
    """The ``kind`` a folder's ``run.json`` (``meta_name``, named by :mod:`trek.runs`) names (``""``
    when it has none or it is unreadable)."""
    meta = folder / meta_name
    if not meta.is_file():
        return ""
    try:
        import json

        with open(meta, "rb") as fh:
            data = json.loads(fh.read(1 << 20))
        kind = data.get("kind") if isinstance(data, dict) else None
        return kind if isinstance(kind, str) else ""
    except (OSError, ValueError, RecursionError):
        return ""


def check_run_folder(path: PathLike, kinds: Iterable[str], *, meta: str, build: tuple[str, str], option: str = "--run",
                     grid: bool = False) -> Path:
    """Refuse ``path`` as the folder of a run (``grid``: a folder of runs, as ``ctrl run --runs``)
    of one of ``kinds`` unless it is new, empty, or already such a run: never a folder that is
    something else (a dataset, the repository, a folder of documents), never inside the bundled
    data, the package or a recorded Ctrl build (see :func:`check_folder_out` for files). ``meta``:
    the name of a run's ``run.json``; ``build``: the manifest and contexts file of a Ctrl build
    (the names are :mod:`trek.runs`'s, which calls this through ``RunDir.check_target``)."""
    BUILD_MANIFEST, CONTEXTS = build  # noqa: N806 - the names trek.runs gives

    p = Path(path)
    kinds = tuple(kinds)
    rp = real(p)
    for root, what in _protected():
        if rp == root or root in rp.parents:
            raise OutputError(p, f"{option} is inside {what} ({root}); runs are written elsewhere: give another folder")
    for a in (rp, *rp.parents):
        if (a / BUILD_MANIFEST).is_file() and (a / CONTEXTS).exists():
            raise OutputError(p, f"{option} is inside the Ctrl build {a} (it holds {BUILD_MANIFEST}); a build is an input "
                              "of runs, not their folder: give another folder")
    check_folder_out(p, option=option)
    if not rp.is_dir():
        return p
    entries = [e for e in rp.iterdir() if not e.name.startswith(".")]
    if not entries:
        return p
    want = " or ".join(kinds)
    if not grid:
        kind = _run_kind(rp, meta)
        foreign = next((e for e in sorted(entries) if not (e.is_file() and _is_run_file(e.name))), None)
        if kind == "" and foreign is not None:  # only run files and no run.json: a run that was cut short
            raise OutputError(p, f"{option} exists, is not empty and is not a Trek run (no run.json; it holds "
                              f"{foreign.name}): give a new or empty folder")
        if kind and kind not in kinds:
            raise OutputError(p, f"{option} is a Trek run of kind {kind!r}, not a {want} run: give another folder")
        return p
    if _run_kind(rp, meta) != "":
        raise OutputError(p, f"{option} is a run directory (it holds run.json), not a folder of runs: give its parent "
                          "or another folder")
    for e in entries:
        if e.is_dir():
            kind = _run_kind(e, meta)
            if kind not in kinds:
                what = "is not a Trek run" if kind == "" else f"is a run of kind {kind!r}"
                raise OutputError(p, f"{option} holds {e.name}, which {what}: a folder of {want} runs holds only "
                                  "those; give a new or empty folder")
        elif not e.name.endswith(_GRID_FILES):
            raise OutputError(p, f"{option} holds {e.name}, which is not part of a folder of {want} runs: give a new "
                              "or empty folder")
    return p


def check_replace(path: PathLike, kinds: Iterable[str], *, meta: str, inputs: Iterable[PathLike | None] = (),
                  option: str = "--out") -> Path:
    """Refuse to replace the folder ``path`` (``--replace``) unless it is a Trek run of one of
    ``kinds`` (its run.json says so); never the current folder or one holding it, never a folder
    that holds one of ``inputs``."""
    p = Path(path)
    rp = real(p)
    if not rp.exists():
        return p
    cwd = real(os.getcwd())
    if rp == cwd or rp in cwd.parents:
        raise OutputError(p, f"{option} is the current folder (or holds it); --replace never removes it: give "
                          "another folder")
    if not rp.is_dir():
        raise OutputError(p, f"{option} exists and is not a folder; --replace only replaces a run directory")
    for i in inputs:
        if i is not None and (real(i) == rp or rp in real(i).parents):
            raise OutputError(p, f"{option} holds {i}, an input of this command; --replace would delete it: give "
                              "another folder")
    kind = _run_kind(rp, meta)
    kinds = tuple(kinds)
    if kind not in kinds:
        what = "is not a Trek run (no run.json)" if kind == "" else f"is a Trek run of kind {kind!r}"
        raise OutputError(p, f"{option} {what}; --replace only replaces a {' or '.join(kinds)} run: give another "
                          "folder")
    return p


def check_folder_out(path: PathLike, *, reads: Iterable[PathLike | None] = (), option: str = "--out",
                     writes: Iterable[str] = ()) -> Path:
    """Refuse ``path`` as a folder output when it is a file (or a device, a pipe), lies under a
    file, or when one of the files ``writes`` the command puts in it is a file it reads."""
    p = Path(path)
    st = _stat(p)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise OutputError(p, f"{option} must be a folder; this is {_kind(st.st_mode) or 'a file'}")
    if st is None:
        anc = next((a for a in p.parents if a.exists()), None)
        if anc is not None and not anc.is_dir():
            raise OutputError(p, f"cannot be created: {anc} is a file, not a folder")
    for name in writes:
        check_out(p / name, reads=reads, option=f"{option} (its {name})")
    return p


def folder_mode() -> int:
    """The mode a new folder gets from the umask (``0o755`` under the usual ``022``)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o777 & ~mask


def make_folder(path: PathLike, option: str = "--out") -> Path:
    """Create the folder ``path`` (and its parents) or raise :class:`OutputError` saying why not
    (it is a file, it lies under a file, the parent cannot be written)."""
    p = Path(path)
    st = _stat(p)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise OutputError(p, f"{option} must be a folder; this is {_kind(st.st_mode) or 'a file'}")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise OutputError(p, f"cannot be created: {_file_parent(p / 'x')} is a file, not a folder") from None
    except OSError as e:
        raise OutputError(p, f"cannot be created ({_reason(e)})") from None
    return p


class _FdRaw(io.RawIOBase):
    """An unbuffered writer on a descriptor through :func:`os.write` (so a failing write, e.g. a
    full disk, surfaces as the ``OSError`` of that call)."""

    def __init__(self, fd: int):
        self.fd = fd

    def writable(self) -> bool:
        return True

    def write(self, b):  # type: ignore[no-untyped-def,override]
        return os.write(self.fd, b)


def _ensure_folder(p: Path) -> None:
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise OutputError(p, f"cannot be written: {_file_parent(p)} is a file, not a folder") from None
    except OSError as e:
        raise OutputError(p, f"cannot create its folder {p.parent} ({e.strerror})") from None


def _rename_over(tmp: Path, p: Path) -> None:
    st = _stat(p)  # again, just before the rename: never over a device, a pipe or a folder
    if st is not None and _kind(st.st_mode) is not None:
        raise OutputError(p, f"became {_kind(st.st_mode)} while it was written: not replaced")
    os.replace(tmp, p)


def install_file(src: PathLike, path: PathLike) -> Path:
    """Put the finished file ``src`` (written by another program: a notebook run, a download,
    a plot) at ``path`` the way :func:`atomic_write` does: synced, then renamed over a regular
    file only. ``src`` must be in the same folder (or file system) as ``path``; it is gone after."""
    s, p = Path(src), Path(path)
    st = _stat(p)
    if st is not None and _kind(st.st_mode) is not None:
        raise OutputError(p, f"is {_kind(st.st_mode)}, not a regular file: not replaced")
    try:
        fd = os.open(s, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        _rename_over(s, p)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(s)
        raise OutputError(p, f"cannot be written ({_reason(e)}); the previous file is unchanged") from None
    return p


@contextlib.contextmanager
def staged_folder(out: PathLike, *, tag: str = "new") -> Iterator[Path]:
    """A temporary folder beside ``out`` (mode from the umask) that becomes ``out`` when the block
    succeeds: an existing ``out`` is moved aside, the new folder renamed in, the old one removed,
    so a reader sees the old folder or the new one, never a mix. On an error the temporary
    folder is removed and ``out`` is left as it was."""
    o = Path(out)
    o.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{o.name}.{tag}-", dir=o.parent))
    tmp.chmod(folder_mode())  # mkdtemp makes it private (0700)
    try:
        yield tmp
        if o.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{o.name}.old-", dir=o.parent))
            os.replace(o, old / o.name)
            os.replace(tmp, o)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, o)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def atomic_write(path: PathLike, content: bytes | str | Callable[[IO[bytes]], object]) -> Path:
    """Replace ``path`` with ``content`` all at once (see the module doc); returns the path.

    ``content``: bytes, text (written as UTF-8), or a function that writes to a binary file
    object. Raises :class:`OutputError` for a target that is not a regular file and for any
    failed write; the previous file is then unchanged and no temporary file is left.
    """
    p = Path(path)
    st = _stat(p)
    if st is not None and _kind(st.st_mode) is not None:
        raise OutputError(p, f"is {_kind(st.st_mode)}, not a regular file: not replaced")
    _ensure_folder(p)
    tmp = p.with_name(f".{p.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)  # the umask applies
    except OSError as e:
        raise OutputError(p, f"cannot be written ({_reason(e)})") from None
    try:
        with io.BufferedWriter(_FdRaw(fd), 1 << 16) as fh:
            if isinstance(content, bytes):
                fh.write(content)
            elif isinstance(content, str):
                fh.write(content.encode("utf-8"))
            else:
                content(fh)
            fh.flush()
            os.fsync(fd)
        _rename_over(tmp, p)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and getattr(e, "filename", None) in (None, str(tmp), str(p)):
            raise OutputError(p, f"cannot be written ({_reason(e)}); the previous file is unchanged") from None
        raise
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)  # normally closed by the writer already
    return p


#: First characters that make a spreadsheet read a cell as a formula.
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


#: A text that is a plain number (``-0.117``, ``+3``, ``-1.5e-3``): a spreadsheet reads it as that
#: number, not as a formula, so the guard leaves it alone and ``pandas.read_csv`` reads a number.
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def csv_cell(value: object) -> object:
    """``value`` as a CSV cell a spreadsheet shows as text: a text starting with ``=``, ``+``,
    ``-``, ``@`` (or a tab, a carriage return) gets a leading ``'``, unless it is a plain number
    (``-0.117``); other values are unchanged."""
    if isinstance(value, str) and value.startswith(_FORMULA) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def _texty(values: Any) -> bool:
    import pandas as pd

    return values.dtype == object or pd.api.types.is_string_dtype(values.dtype)


def csv_safe(frame: Any) -> Any:
    """A copy of the DataFrame ``frame`` with every text cell through :func:`csv_cell` (numbers,
    negative ones included, stay numbers); the column names too."""
    import pandas as pd

    out = frame.copy()
    for i in range(out.shape[1]):
        col = out.iloc[:, i]
        if _texty(col):
            out.iloc[:, i] = col.map(csv_cell)

    def names(index: Any) -> Any:
        if isinstance(index, pd.MultiIndex):
            return index.set_levels([lv.map(csv_cell) if _texty(lv) else lv for lv in index.levels])
        return index.map(csv_cell) if _texty(index) else index

    out.columns = names(out.columns)
    out.index = names(out.index)
    return out


def _reason(e: OSError) -> str:
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on the device"
    if e.errno == errno.EROFS:
        return "the file system is read-only"
    return e.strerror or str(e)
