"""The one resumable stage executor: the loop that Wild answering, grading, TrekTrace and Ctrl
runs share.

A *stage* turns items (questions to answer, answers to grade, failures to trace, Ctrl cells'
questions) into records, one per item, kept in JSONL files of run directories. Each stage
defines only its own logic by subclassing :class:`Stage`:

* :meth:`Stage.slot`: the record file an item's record goes to and the record's id there;
* :meth:`Stage.input_key`: a digest of everything that decides the item's record (the item's
  data, models, settings, prompt versions). A finished record is kept only while its
  ``input_key`` is unchanged, so correcting one reference answer re-does exactly that item;
* :meth:`Stage.finished`: which records are final (``pending`` and ``failed`` ones are tried
  again on the next run);
* :meth:`Stage.produce`: the record of one item (async, through the stage's clients);
* :meth:`Stage.failure`: the record of an item whose work raised an internal error.

:func:`execute` owns everything else, the same way for every stage:

* **resume**: finished records whose input key is unchanged are kept without any call. Resume
  reads each record file once, line by line, keeping per record only its id, input key, status,
  error and where its line is (byte offset and length): the records themselves are not kept
  (a stage that names :attr:`Stage.head_fields` has only those fields validated). The records
  made in this invocation are kept as rows of a few arrays (where the line is, a status number,
  a final flag; the error only where there is one) and the plan's ids and input keys as one
  buffer each, so a fresh run of 100,000 items holds a few megabytes of them;
* **fan-out** through :func:`trek.aio.fan_out` (one progress bar: done/total, statuses and
  what the stage adds, e.g. dollars);
* **checkpoints**: finished records are appended to their record file (a journal,
  :class:`trek.journal.Journal`) and flushed and synced at most every ``checkpoint_seconds``, so
  a checkpoint costs only what finished since the last one. When the stage ends (also on an
  error or Ctrl-C) each record file is compacted once (rewritten atomically with one line per
  record, in the items' order, copied line by line from where each record is in the file, so
  memory does not grow with the run), and only if it holds superseded or foreign lines. A ``kill -9``
  leaves at most a partial last line, which the next run drops with a warning; the work of
  items finished after the last checkpoint is redone on the next run, from the response cache;
* **errors**: an internal error in one item, or a request rejected for that item alone, becomes
  a ``failed`` record carrying the message and the run goes on; an error that dooms every item (:func:`trek.errors.is_run_fatal`) stops the
  run after the checkpoint;
* **the run lock**: every run directory written is locked for the duration
  (:func:`run_lock`); a second writer gets an error naming the holder's process id;
* **the spend ledger**: with ``ledger=PATH`` the stage's clients (:meth:`Stage.llm_clients`) record
  every fresh call in one :class:`~trek.llm.ledger.SpendLedger` at ``PATH`` (usually
  ``.<records file>.spend`` beside the records), whose budget (``budget_usd``, else the
  clients' own) is a ceiling over every invocation of the stage: a resumed run spends only
  what is left (an outer command's ledger, already held by a client, is kept);
* **the tally** (:class:`StageTally`): records kept, made now, by status, and their errors;
  not the records (:meth:`StageTally.iter` reads them back from the file). Finished records are
  encoded into the journal's buffer as they arrive and released, so a stage's memory is a small
  index per record, whatever the size of the records.

Items come from a re-readable :class:`Source` (a list, or :class:`Reread` over a file read by
offset): :func:`plan` reads it once (per item only its id and, for an item to run, its input key
are kept) and :func:`execute` once more to start the items to run, as they start, so no item
is held beyond those in flight.

Clients: :func:`borrowed_cache` gives clients without a response cache the run's cache for the
duration of a stage; :func:`synchronous` makes the synchronous twin of a stage's coroutine
(same signature, closes the clients it names at the end).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import inspect
import json
import os
import time
from array import array
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, ParamSpec, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from trek.aio import closing, fan_out, run_sync
from trek.errors import FatalLLMError, is_run_fatal
from trek.journal import Journal
from trek.runs import LOCK, RunLockedError, run_lock
from trek.types import RecordError, describe_validation_error, iter_jsonl, subset_model, write_jsonl

__all__ = [
    "Slot",
    "Source",
    "Reread",
    "Stage",
    "StagePlan",
    "StageTally",
    "plan",
    "execute",
    "digest",
    "RunLockedError",
    "run_lock",
    "borrowed_cache",
    "synchronous",
    "LOCK_FILE",
    "WINDOW",
    "window",
]

I = TypeVar("I")  # noqa: E741 - the item type
I_co = TypeVar("I_co", covariant=True)
R = TypeVar("R", bound=BaseModel)
P = ParamSpec("P")
T = TypeVar("T")

#: The lock file of a run directory (holds the process id of the writer while it runs).
LOCK_FILE = LOCK


def digest(payload: Any, length: int = 64) -> str:
    """A stable SHA-256 hex digest of a JSON-able payload (keys sorted), cut to ``length``."""
    blob = json.dumps(payload, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]


@dataclass(frozen=True)
class Slot:
    """Where one item's record lives: the record file and the record's id in it."""

    path: Path
    id: str


class Stage(Generic[I, R]):
    """One stage's own logic (see the module docstring). Subclasses set :attr:`record` and
    implement :meth:`slot`, :meth:`input_key`, :meth:`produce` and :meth:`failure`."""

    #: The pydantic record type of the stage's files (it has ``input_key`` and ``status``-like fields).
    record: ClassVar[type[BaseModel]]
    #: Progress bar label and unit.
    name: ClassVar[str] = "stage"
    unit: ClassVar[str] = "it"
    #: Keep records of ids that are not among this invocation's items (e.g. answers to questions
    #: a smaller ``--limit`` left out); otherwise a file holds exactly the records of its items.
    keep_unlisted: ClassVar[bool] = False
    #: The record fields that :meth:`record_id`, :meth:`record_key`, :meth:`status`,
    #: :meth:`finished` and the tally (``error``) read. Resume then validates only these fields
    #: of each previous line (a small model made from :attr:`record`'s fields), not whole
    #: records; ``None``: every previous line is validated as a whole :attr:`record` (and
    #: released at once), for a stage whose methods read other fields.
    head_fields: ClassVar[tuple[str, ...] | None] = None

    def slot(self, item: I) -> Slot:
        raise NotImplementedError

    def input_key(self, item: I) -> str:
        raise NotImplementedError

    async def produce(self, item: I, key: str) -> R:
        raise NotImplementedError

    def failure(self, item: I, key: str, error: str) -> R:
        raise NotImplementedError

    def status(self, record: R) -> str:
        """The record's status as counted in the tally."""
        return str(record.status)

    def finished(self, record: R) -> bool:
        """Final records are kept on the next run (while their input key is unchanged)."""
        return self.status(record) not in ("pending", "failed")

    def record_id(self, record: R) -> str:
        return str(record.question_id)

    def record_key(self, record: R) -> str | None:
        return getattr(record, "input_key", None)

    def postfix(self) -> str:
        """Extra text for the progress bar (e.g. dollars spent so far)."""
        return ""

    def llm_clients(self) -> Sequence[Any]:
        """The LLM clients the stage spends through (they share the stage's spend ledger)."""
        return ()

    def load(self, path: Path) -> dict[str, R]:
        """The records already in ``path`` by id (a later line for the same id wins; a partial
        last line left by a killed writer is dropped with a warning). Reads every record into
        memory: the executor itself only indexes the file (see :func:`plan`)."""
        if not path.exists():
            return {}
        return {self.record_id(r): r for r in iter_jsonl(path, self.record, torn_tail=True)}  # type: ignore[misc]


class Head:
    """What the executor keeps of one record: where its line is in the record file (``offset``
    and ``length`` in bytes; ``-1`` until a journal flush has written it), its input key, whether
    it is final, its status and error."""

    __slots__ = ("offset", "length", "key", "final", "status", "error")

    def __init__(self, offset: int, length: int, key: str | None, final: bool, status: str, error: str | None):
        self.offset, self.length, self.key, self.final, self.status, self.error = \
            offset, length, key, final, status, error

    def __repr__(self) -> str:
        return (f"Head(offset={self.offset}, length={self.length}, key={self.key!r}, final={self.final}, "
                f"status={self.status!r}, error={self.error!r})")


def _head(stage: Stage[Any, Any], rec: Any, offset: int, length: int) -> Head:
    err = getattr(rec, "error", None)
    return Head(offset, length, stage.record_key(rec), stage.finished(rec), stage.status(rec),
                err if isinstance(err, str) else None)


@dataclass
class _Scan:
    """What a record file holds: each id's :class:`Head` (last line wins; first appearance
    order), and its ids line by line (to tell whether it needs compaction)."""

    heads: dict[str, Head]
    line_ids: list[str]
    exists: bool


def _scan(stage: Stage[Any, Any], path: Path) -> _Scan:
    from trek.jsonio import iter_jsonl_spans

    if not path.exists():
        return _Scan({}, [], False)
    model = stage.record if stage.head_fields is None else subset_model(stage.record, tuple(stage.head_fields))
    heads: dict[str, Head] = {}
    ids: list[str] = []
    for lineno, offset, length, obj in iter_jsonl_spans(path, torn_tail=True):
        try:
            rec = model.model_validate(obj)
        except ValidationError as e:
            raise RecordError(path, lineno, f"{stage.record.__name__}: {describe_validation_error(e)}") from None
        del obj
        rid = stage.record_id(rec)
        heads[rid] = _head(stage, rec, offset, length)
        ids.append(rid)
    # a torn tail that was dropped shows as a file whose size is past its last newline
    with path.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell():
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                ids.append("\x00torn")
    return _Scan(heads, ids, True)


class Strings:
    """A list of strings kept as one UTF-8 buffer and the end of each (about the strings' bytes
    plus 8 a string, where a list of ``str`` objects takes about 60 more each): the plan's ids
    and input keys of 100,000 items in a few megabytes, the local search index's page keys.
    Reading one makes a new ``str``."""

    def __init__(self, items: Iterable[str] = ()):
        self._blob = bytearray()
        self._ends = array("q")
        for it in items:
            self.append(it)

    def append(self, text: str) -> None:
        self._blob += text.encode("utf-8")
        self._ends.append(len(self._blob))

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, n: int) -> str:
        if n < 0:
            n += len(self._ends)
        if not 0 <= n < len(self._ends):
            raise IndexError(n)
        start = self._ends[n - 1] if n else 0
        return self._blob[start:self._ends[n]].decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        start = 0
        blob = self._blob
        for end in self._ends:
            yield blob[start:end].decode("utf-8")
            start = end

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Strings):
            return self._ends == other._ends and self._blob == other._blob
        if isinstance(other, list | tuple):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __repr__(self) -> str:
        return f"Strings({list(self)!r})"


class _Made:
    """The records one file gets in this invocation, by the position of their item in the file's
    list of ids: where each line is (``offset``, ``length``; -1 until a journal flush wrote it),
    its status (a number into ``statuses``; 0: no record made), whether it is final, and its
    error (only the records that have one). About 20 bytes a record where a :class:`Head` and
    its dict entry took about 200: a run of 100,000 items holds arrays, not objects."""

    def __init__(self, n: int):
        self.offset = array("q", [-1]) * n
        self.length = array("q", bytes(8 * n))
        self.status = bytearray(n)
        self.final = bytearray(n)
        self.errors: dict[int, str] = {}
        self.statuses: dict[str, int] = {"": 0}
        self.names: list[str] = [""]

    def set(self, pos: int, status: str, final: bool, error: str | None) -> None:
        code = self.statuses.get(status)
        if code is None:
            if len(self.names) == 256:  # pragma: no cover - a stage has a handful of statuses
                raise ValueError(f"more than 255 record statuses (new: {status!r})")
            code = self.statuses[status] = len(self.names)
            self.names.append(status)
        self.status[pos], self.final[pos] = code, final
        if error is not None:
            self.errors[pos] = error
        else:
            self.errors.pop(pos, None)

    def head(self, pos: int) -> Head | None:
        """Record ``pos`` as a :class:`Head` (made for the moment it is read), or ``None``."""
        if not self.status[pos]:
            return None
        return Head(self.offset[pos], self.length[pos], None, bool(self.final[pos]), self.names[self.status[pos]],
                    self.errors.get(pos))


def _lines(path: Path, heads: Iterable[Head]) -> Iterator[bytes]:
    """The lines of ``heads`` read back from ``path`` (one ``pread`` each), in that order."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        for h in heads:
            blob = os.pread(fd, h.length, h.offset)
            if len(blob) != h.length:
                raise RecordError(path, None, f"changed while the stage ran (a line at byte {h.offset} is gone)")
            yield blob
    finally:
        os.close(fd)


@dataclass
class StageTally(Generic[R]):
    """What one invocation of a stage did (counts, not records).

    ``paths``: the record files written, each with the record type. ``kept``: finished records
    reused without any call; ``made``: records produced now. ``counts``: statuses of the items'
    records after this invocation. ``errors``: ``"<status> <id>: <error>"`` of every item record
    that is not final. The records themselves are read back from their files:
    :meth:`iter` streams one file's, :meth:`of` and :attr:`all` make lists (small runs).
    """

    items: int = 0
    kept: int = 0
    made: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    paths: dict[Path, type[BaseModel]] = field(default_factory=dict)
    #: per status, the first (sorted) error text of the items' records of that status ("" when
    #: one has none): what a report quotes as an example
    first_errors: dict[str, str] = field(default_factory=dict)

    def iter(self, path: str | os.PathLike[str]) -> Iterator[R]:
        """The records now in ``path`` (items' order), read from the file one at a time."""
        p = Path(path)
        model = self.paths.get(p)
        if model is None or not p.exists():
            return iter(())
        return iter_jsonl(p, model)  # type: ignore[return-value]

    def of(self, path: str | os.PathLike[str]) -> list[R]:
        """The records now in ``path`` as a list (every record in memory: :meth:`iter` streams)."""
        return list(self.iter(path))

    @property
    def all(self) -> list[R]:
        return [r for p in self.paths for r in self.iter(p)]


class Source(Protocol[I_co]):
    """A re-readable source of items: every call of ``__iter__`` yields the same items in the same
    order (a list, a tuple, or :class:`Reread` over a file read by offset). The executor reads it a
    bounded number of times (:func:`plan` once, :func:`execute` twice) and keeps no item."""

    def __iter__(self) -> Iterator[I_co]: ...


class Reread(Generic[T]):
    """A :class:`Source` made of a factory of iterators: ``iter(source)`` calls ``factory()``
    afresh each time, so the items are made while they are read and none is kept. ``length``
    (when known) is what ``len()`` gives."""

    def __init__(self, factory: Callable[[], Iterable[T]], length: int | None = None):
        self.factory, self.length = factory, length

    def __iter__(self) -> Iterator[T]:
        return iter(self.factory())

    def __len__(self) -> int:
        if self.length is None:
            return sum(1 for _ in self)
        return self.length

    def __bool__(self) -> bool:
        return self.length != 0 if self.length is not None else next(iter(self), _END) is not _END


_END = object()


@dataclass
class StagePlan(Generic[I, R]):
    """What a stage would do now: the finished records it keeps (by slot, as their
    :class:`Head`) and the items it runs. Dry runs use the same plan as :func:`execute`, so an
    estimate sees exactly the work. ``heads``: per record file, every record it holds.

    The plan keeps no item: per item only its id (``files``, by record file, in the items' order),
    whether it runs (``run``) and, for an item to run, its input key (``keys``, in the items'
    order); :meth:`iter_jobs`, :attr:`jobs` and :attr:`todo` read the items again from the source."""

    files: dict[Path, Strings]
    heads: dict[Path, dict[str, Head]]
    kept: dict[Slot, Head]
    #: the input key of each item to run, in the items' order
    keys: Strings
    source: Any = None
    #: per record file, the id of each of its lines as found (to tell whether it needs compaction)
    lines: dict[Path, list[str] | None] = field(default_factory=dict)
    #: per item, the index of its record file in ``files`` (the items' order across files)
    order: array[int] = field(default_factory=lambda: array("I"))
    #: per item, 1 when it runs
    run: bytearray = field(default_factory=bytearray)
    n_kept: int = 0
    stage: Any = None

    @property
    def items(self) -> int:
        return len(self.order)

    @property
    def runs(self) -> int:
        """How many items the stage runs."""
        return len(self.keys)

    @property
    def slots(self) -> list[Slot]:
        """Every item's slot, in the items' order."""
        return list(_slots(self.files, self.order))

    def iter_jobs(self) -> Iterator[tuple[I, Slot, str]]:
        """The items to run with their slot and input key, read again from the source (a
        source that gives other items than the plan's raises ``RuntimeError``)."""
        for it, slot, key, _ in self._iter_jobs():
            yield it, slot, key

    def _iter_jobs(self) -> Iterator[tuple[I, Slot, str, int]]:
        """:meth:`iter_jobs` with each item's position in its record file's list of ids."""
        paths = list(self.files)
        at = [0] * len(paths)
        job = 0
        n = -1
        for n, it in enumerate(self.source):
            if n >= len(self.order):
                raise RuntimeError("the stage's items changed between two passes over them (more items)")
            fi = self.order[n]
            p = paths[fi]
            rid = self.files[p][at[fi]]
            at[fi] += 1
            if not self.run[n]:
                continue
            s = self.stage.slot(it)
            if s.path != p or s.id != rid:
                raise RuntimeError(f"the stage's items changed between two passes over them: item {n} is {s.id!r} "
                                   f"in {s.path}, was {rid!r} in {p}")
            key = self.keys[job]
            job += 1
            yield it, Slot(p, rid), key, at[fi] - 1  # type: ignore[misc]  # the plan's id: one string per record
        if n + 1 != len(self.order):
            raise RuntimeError("the stage's items changed between two passes over them (fewer items)")

    @property
    def jobs(self) -> list[tuple[I, Slot, str]]:
        return list(self.iter_jobs())

    @property
    def todo(self) -> list[I]:
        return [it for it, _, _ in self.iter_jobs()]


def _slots(files: Mapping[Path, Sequence[str] | Strings], order: Iterable[int]) -> Iterator[Slot]:
    paths = list(files)
    at = [0] * len(paths)
    for fi in order:
        p = paths[fi]
        yield Slot(p, files[p][at[fi]])
        at[fi] += 1


def plan(stage: Stage[I, R], items: Iterable[I], outputs: Iterable[str | os.PathLike[str]] = (), *,
         keep: bool = True, on_path: Callable[[Path], None] | None = None) -> StagePlan[I, R]:
    """Which of ``items`` (a re-readable :class:`Source`, e.g. a list) the stage keeps from its
    record files and which it must run (see :func:`execute`); reads the files, calls nothing.
    One pass over ``items``; a record file is read when its first item (or output) names it.
    ``keep``: fill :attr:`StagePlan.kept` (``False``: only count, :attr:`StagePlan.n_kept`);
    ``on_path(path)`` is called before a record file is first read (the executor locks its folder)."""
    files: dict[Path, Strings] = {}
    index: dict[Path, int] = {}
    seen: dict[Path, set[str]] = {}
    scans: dict[Path, _Scan] = {}
    keys = Strings()
    kept: dict[Slot, Head] = {}
    order: array[int] = array("I")
    run = bytearray()
    n_kept = 0

    def open_file(path: Path) -> None:
        if on_path is not None:
            on_path(path)
        index[path] = len(files)
        files[path], seen[path] = Strings(), set()
        scans[path] = _scan(stage, path)

    for p in outputs:
        if Path(p) not in index:
            open_file(Path(p))
    for it in items:
        s = stage.slot(it)
        if s.path not in index:
            open_file(s.path)
        ids = seen[s.path]
        if s.id in ids:
            raise ValueError(f"{s.path}: two items would write record {s.id!r}")
        ids.add(s.id)
        files[s.path].append(s.id)
        order.append(index[s.path])
        key = stage.input_key(it)
        old = scans[s.path].heads.get(s.id)
        if old is not None and old.final and old.key == key:
            n_kept += 1
            run.append(0)
            if keep:
                kept[s] = old
        else:
            run.append(1)
            keys.append(key)
    seen.clear()  # the duplicate check is done: its sets go
    return StagePlan(files, {p: sc.heads for p, sc in scans.items()}, kept, keys, items,
                     {p: (sc.line_ids if sc.exists else None) for p, sc in scans.items()}, order, run, n_kept, stage)


#: The fewest items :func:`execute` keeps in flight when it is given no ``limit`` (see :func:`window`).
WINDOW = 256


def window(stage: Stage[Any, Any], limit: int | None = None) -> int:
    """How many items :func:`execute` runs at once: ``limit`` when given, else enough to keep the
    stage's clients busy (twice the requests they may have in flight together, and at least
    :data:`WINDOW`). The clients' own limits bound the calls; this bounds the tasks waiting for
    them, so the memory of a run does not grow with its number of items."""
    if limit:
        return limit
    conns = 0
    for c in stage.llm_clients():
        n = getattr(c, "connections", None)
        if not isinstance(n, int):  # a client without replicas: its connection limit
            n = getattr(c, "max_connections", None)
        if isinstance(n, int) and n > 0:
            conns += n
    return max(WINDOW, 2 * conns)


async def execute(
    stage: Stage[I, R],
    items: Iterable[I],
    *,
    outputs: Iterable[str | os.PathLike[str]] = (),
    limit: int | None = None,
    progress: bool = True,
    checkpoint_seconds: float = 1.0,
    lock: bool = True,
    ledger: str | os.PathLike[str] | None = None,
    budget_usd: float | None = None,
) -> StageTally[R]:
    """Run ``stage`` over ``items`` (see the module docstring) and return its tally.

    ``outputs`` names record files the stage owns even when no item maps to them (they are
    written, possibly empty, at the end). ``limit``: at most this many items in flight (``None``:
    :func:`window` picks a bound from the stage's clients); an item's task is made only when it
    may start, so at most that many tasks exist at once.
    ``lock``: take the run lock of every run directory written (callers that already hold it
    may pass ``False``; the lock is re-entrant within a process anyway). ``ledger``: the spend
    ledger file of the stage's clients, with ``budget_usd`` (default: the clients' own budget)
    as its ceiling over every invocation (see the module docstring); ``None``: none.
    """
    from trek.llm.ledger import spending

    if isinstance(items, Iterator):
        raise TypeError("execute() reads its items twice: give a re-readable source (a list, trek.stage.Reread), "
                        "not an iterator")
    outputs = [Path(p) for p in outputs]
    with contextlib.ExitStack() as stack:
        locked: set[Path] = set()

        def lock_dir(d: Path) -> None:
            if lock and d not in locked:
                locked.add(d)
                stack.enter_context(run_lock(d))

        for d in sorted({p.parent for p in outputs}):
            lock_dir(d)
        if ledger is not None:
            stack.enter_context(spending(stage.llm_clients(), ledger, budget_usd))
        # one pass over the items: their ids and input keys (the records files read as they are named)
        p_ = plan(stage, items, outputs, keep=False, on_path=lambda p: lock_dir(p.parent))
        files, order = p_.files, p_.order
        heads, lines = p_.heads, p_.lines  # the plan's index, updated as records are made
        n_todo = p_.runs
        tally: StageTally[R] = StageTally(items=p_.items, kept=p_.n_kept,
                                          paths={p: stage.record for p in files})
        # the second pass: the items to run, read again from the source
        todo = p_._iter_jobs() if n_todo else iter(())
        del p_
        # the records made now, in arrays by position (heads keeps only what the files held)
        made = {p: _Made(len(ids)) for p, ids in files.items()}

        def record(path: Path, pos: int, rid: str) -> Head | None:
            h = made[path].head(pos)
            return h if h is not None else heads[path].get(rid)

        def contents(path: Path) -> Iterator[tuple[str, Head]]:
            """The file's records after this invocation, (id, head), in the items' order; then,
            for a stage that keeps them, the records of ids no item names, in the file's order."""
            have = heads[path]
            listed = files[path]
            for pos, rid in enumerate(listed):
                h = record(path, pos, rid)
                if h is not None:
                    yield rid, h
            if stage.keep_unlisted and have:
                known = set(listed)
                yield from ((i, h) for i, h in have.items() if i not in known)

        journals = {p: Journal(p) for p in files}
        last = time.monotonic()
        live: Counter[str] = Counter()

        def checkpoint() -> None:
            for p in sorted(journals):
                m = made[p]
                for pos, offset, length in journals[p].flush():
                    m.offset[pos], m.length[pos] = offset, length  # type: ignore[index]

        def compact() -> None:
            # one rewrite per file and invocation, and only when the file is not already exactly
            # its records in the items' order (e.g. a run that only kept records writes nothing);
            # the lines are copied from where they are in the file, one at a time
            for p in sorted(files):
                j = journals[p]
                j.close()
                found = lines.get(p)
                if j.lines == 0 and found is not None and found == [rid for rid, _ in contents(p)]:
                    continue

                def written(path: Path = p) -> Iterator[Head]:
                    for _, h in contents(path):
                        if h.offset < 0:  # pragma: no cover - checkpoint() came first
                            raise RuntimeError(f"{path}: a record was not written before compaction")
                        yield h

                write_jsonl(p, _lines(p, written()) if p.exists() else ())

        def done(_: int, result: tuple[Slot, int, R]) -> None:
            nonlocal last
            s, pos, rec = result
            err = getattr(rec, "error", None)
            status = stage.status(rec)
            made[s.path].set(pos, status, stage.finished(rec), err if isinstance(err, str) else None)
            live[status] += 1
            journals[s.path].add(rec, tag=pos)
            if time.monotonic() - last >= checkpoint_seconds:
                checkpoint()
                last = time.monotonic()  # after the writes: a slow checkpoint never triggers the next

        async def one(job: tuple[I, Slot, str, int]) -> tuple[Slot, int, R]:
            it, s, key, pos = job
            try:
                rec = await stage.produce(it, key)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - one broken item must not stop the others
                if is_run_fatal(e):
                    raise
                why = f"request rejected: {e}" if isinstance(e, FatalLLMError) else \
                    f"internal error: {type(e).__name__}: {e}"
                rec = stage.failure(it, key, why)
            return s, pos, rec

        def postfix() -> str:
            text = " ".join(f"{k}={v}" for k, v in sorted(live.items()))
            extra = stage.postfix()
            return f"{text} {extra}".strip()

        try:
            await fan_out(todo, one, limit=window(stage, limit), desc=stage.name, unit=stage.unit, progress=progress,
                          postfix=postfix, on_result=done, keep_results=False, total=n_todo)
        except BaseException:
            try:
                checkpoint()
                compact()
            except Exception:  # noqa: BLE001 - the original error is the one to report
                pass
            finally:
                for j in journals.values():
                    j.close()
            raise
        checkpoint()
        compact()
        tally.made = n_todo
        at = dict.fromkeys(files, 0)
        for s in _slots(files, order):
            h = record(s.path, at[s.path], s.id)
            at[s.path] += 1
            if h is None:  # pragma: no cover - every item has a record after fan_out
                continue
            tally.counts[h.status] += 1
            e = h.error or ""
            if h.status not in tally.first_errors or e < tally.first_errors[h.status]:
                tally.first_errors[h.status] = e
            if not h.final and h.error:
                tally.errors.append(f"{h.status} {s.id}: {h.error}")
        return tally


# -- clients ---------------------------------------------------------------------------------------
@contextlib.contextmanager
def borrowed_cache(clients: Iterable[Any], path: str | os.PathLike[str]) -> Iterator[None]:
    """Give every client without a response cache the cache at ``path`` for the block (one
    cache object shared by all of them), then take it back and close it. A client that makes no
    calls (``makes_calls`` false: the exact judge) needs none."""
    from trek.llm.cache import LLMCache

    bare = [c for c in {id(c): c for c in clients}.values()
            if getattr(c, "cache", None) is None and getattr(c, "makes_calls", True)]
    if not bare:
        yield
        return
    cache = LLMCache(path)
    for c in bare:
        c.cache = cache
    try:
        yield
    finally:
        for c in bare:
            c.cache = None
        cache.close()


def synchronous(afn: Callable[P, Awaitable[T]], *, close: Sequence[str] = ("client",)) -> Callable[P, T]:
    """The synchronous twin of a stage coroutine: same parameters (``inspect.signature`` and
    type checkers see them), runs through :func:`trek.aio.run_sync` (also inside a notebook's
    running loop) and closes the arguments named in ``close`` at the end."""
    sig = inspect.signature(afn)
    unknown = [n for n in close if n not in sig.parameters]
    if unknown:
        raise TypeError(f"{afn.__name__} has no parameter(s) {unknown}")

    @functools.wraps(afn)
    def wrapper(*args: P.args, **kw: P.kwargs) -> T:
        bound = sig.bind(*args, **kw)

        async def go() -> T:
            async with closing(*(bound.arguments.get(n) for n in close)):
                return await afn(*bound.args, **bound.kwargs)

        return run_sync(go())

    wrapper.__doc__ = (
        f"Synchronous :func:`{afn.__name__}` (closes {', '.join(close)} at the end).\n\n{afn.__doc__ or ''}"
    )
    return wrapper
