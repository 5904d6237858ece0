"""The run directory: its file names, its metadata, its loaders, and one DataFrame per run.

A run is a folder written by one system answering one question set::

    RUN_DIR/run.json          RunMeta: model, endpoint (never a key), system config, prompt versions
    RUN_DIR/questions.jsonl   the Question records (the run's question set)
    RUN_DIR/answers.jsonl     one Trajectory per question
    RUN_DIR/grades.jsonl      one Grade per answered question (``trek grade``)
    RUN_DIR/trace.jsonl       one TrekTrace record per traced failure (``trek trace``)
    RUN_DIR/*.sqlite          response, search and page caches

    RUN_DIR/audit-grading.jsonl  the audit judge's answers beside an exact judge's verdicts
    RUN_DIR/.trek.lock        the write lock (holds the writer's process id while it runs)
    RUN_DIR/.<records>.spend  the spend ledger of a records file (``.grades.jsonl.spend``)
    RUN_DIR/llm-cache.sqlite, search-cache.sqlite, pages.sqlite   response, search and page caches

A Ctrl build folder (``trek ctrl build --out``) holds ``pools.jsonl``, ``contexts.jsonl`` and
``build.json``, and with a model fabricator ``fabrications.jsonl`` (the fabrication stage's
checkpoint) and ``.build.spend``; a pools file ``NAME.jsonl`` of ``trek ctrl discover`` has
``NAME.report.json`` and ``NAME.discovery.jsonl`` (the discovery stage's checkpoint) beside it.

This module is the only place that knows those names (:class:`RunDir` hands out every path and
reads and writes every record file), and the only one that locks files (:func:`lock_file`,
:func:`run_lock`). The analysis layer reads a run through :func:`frame`: one row per question of
the run's question set, whether or not it has an answer or a grade.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import threading
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import BaseModel, ValidationError

from trek.llm.ledger import ledger_path
from trek.outputs import atomic_write, check_replace, check_run_folder

if TYPE_CHECKING:  # pandas is imported by the functions that build frames: a command starts without it
    import pandas as pd
from trek.paths import env_path
from trek.types import (
    Grade,
    Question,
    RecordError,
    RunMeta,
    Trajectory,
    Usage,
    describe_validation_error,
    iter_json_lines,
    iter_jsonl,
    subset_model,
    utcnow,
    write_jsonl,
)

__all__ = [
    "RunDir",
    "not_a_run_hint",
    "RunLockedError",
    "lock_file",
    "run_lock",
    "ledger_of",
    "default_cache_path",
    "default_pages_path",
    "default_search_cache_path",
    "META",
    "AUDIT",
    "LOCK",
    "LLM_CACHE",
    "SEARCH_CACHE",
    "PAGES",
    "POOLS",
    "CONTEXTS",
    "BUILD_MANIFEST",
    "BATCH_STATE",
    "RESPONSES",
    "LANGFUSE_SCORES",
    "OTLP_EVALUATIONS",
    "FABRICATIONS",
    "BUILD_LEDGER",
    "CALIBRATION_REPORT",
    "DISCOVERY_REPORT",
    "DISCOVERY_RECORDS",
    "QUESTIONS",
    "ANSWERS",
    "GRADES",
    "TRACE",
    "VERIFY",
    "FRAME_COLUMNS",
    "read_meta",
    "write_meta",
    "new_meta",
    "update_meta",
    "load_questions",
    "load_answers",
    "load_grades",
    "iter_answers",
    "iter_grades",
    "slim_answer",
    "write_records",
    "grow_questions",
    "check_identity",
    "discover",
    "frame",
    "correctness",
    "Tally",
]

META = "run.json"
QUESTIONS = "questions.jsonl"
ANSWERS = "answers.jsonl"
GRADES = "grades.jsonl"
TRACE = "trace.jsonl"
VERIFY = "verify.jsonl"  # trek trace verify
AUDIT = "audit-grading.jsonl"
LOCK = ".trek.lock"
#: Largest run.json read: 16 MiB (it holds a run's options, a few kilobytes).
META_LIMIT = 16 << 20
LLM_CACHE = "llm-cache.sqlite"
SEARCH_CACHE = "search-cache.sqlite"
PAGES = "pages.sqlite"
#: The run directory of epoch N > 1 of a ``trek wild run --epochs``, inside the run (epoch 1 is the run itself).
EPOCH_DIR = "epoch-{}"
#: The files of a Ctrl build folder (``trek ctrl build --out``).
POOLS = "pools.jsonl"
CONTEXTS = "contexts.jsonl"
BUILD_MANIFEST = "build.json"
#: The checkpoint of a Ctrl build's model fabrication (one record per question) and the build
#: folder's spend ledger (fabrication calls over every ``trek ctrl build`` into it).
FABRICATIONS = "fabrications.jsonl"
BUILD_LEDGER = ".build.spend"
#: Beside a pools file ``NAME.jsonl`` written by ``trek ctrl discover``: its report and the
#: checkpoint of its discovery (one record per question).
DISCOVERY_REPORT = ".report.json"
DISCOVERY_RECORDS = ".discovery.jsonl"
#: The file name ``trek ctrl calibrate --json`` suggests.
CALIBRATION_REPORT = "calibration.json"
#: The Batch API state of a ``trek llm run --batch`` (in the state folder beside its ``--out``).
BATCH_STATE = "openai-batches.json"
#: The output files of commands that write one file (the names their messages suggest).
RESPONSES = "responses.jsonl"  # trek llm run --out
LANGFUSE_SCORES = "scores.jsonl"  # trek trace export --format langfuse
OTLP_EVALUATIONS = "evaluations.json"  # trek trace export --format otlp

PathLike = str | os.PathLike[str]
M = TypeVar("M", bound=BaseModel)


#: The spend ledger of an output file: ``.<name>.spend`` beside it (``RUN_DIR/.answers.jsonl.spend``).
ledger_of = ledger_path


def default_cache_path(run_dir: PathLike | None = None) -> Path:
    """``$TREK_CACHE`` when set, else ``<run_dir>/llm-cache.sqlite`` (run_dir defaults to cwd)."""
    return RunDir(run_dir or ".").llm_cache


def default_pages_path(run_dir: PathLike | None = None) -> Path:
    """``$TREK_PAGES`` when set, else ``<run_dir>/pages.sqlite``."""
    return RunDir(run_dir or ".").pages


def default_search_cache_path(run_dir: PathLike | None = None) -> Path:
    """``$TREK_SEARCH_CACHE`` when set, else ``<run_dir>/search-cache.sqlite``."""
    return RunDir(run_dir or ".").search_cache


def _in_run(name: str) -> property:
    """The path of the run file ``name`` (``RUN_DIR/name``), as a property of :class:`RunDir`."""
    return property(lambda self: self.path / name, doc=f"``RUN_DIR/{name}``")


class RunDir:
    """One run directory: every file name and default path it holds, and its readers and writers.

    ``RunDir(path)`` does not touch the disk; the readers raise :class:`RecordError` naming the
    file and line of a bad record. The cache paths honour ``$TREK_CACHE``, ``$TREK_SEARCH_CACHE``
    and ``$TREK_PAGES`` (see :mod:`trek.paths`).
    """

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    # -- paths ----------------------------------------------------------------------------------
    meta_path = _in_run(META)
    questions_path = _in_run(QUESTIONS)
    answers_path = _in_run(ANSWERS)
    grades_path = _in_run(GRADES)
    trace_path = _in_run(TRACE)
    audit_path = _in_run(AUDIT)
    lock_path = _in_run(LOCK)
    pages_file = _in_run(PAGES)  # what `trek import` writes, whatever $TREK_PAGES says
    # a Ctrl build folder (``trek ctrl build --out``)
    pools_path = _in_run(POOLS)
    contexts_path = _in_run(CONTEXTS)
    build_manifest = _in_run(BUILD_MANIFEST)
    fabrications_path = _in_run(FABRICATIONS)
    build_ledger = _in_run(BUILD_LEDGER)

    def discovery_report(self, pools: str = POOLS) -> Path:
        """The report of ``trek ctrl discover --out RUN_DIR/pools`` (``NAME.report.json``)."""
        return self.path / f"{Path(pools).stem}{DISCOVERY_REPORT}"

    def discovery_records(self, pools: str = POOLS) -> Path:
        """The discovery checkpoint beside the pools file ``pools`` (``NAME.discovery.jsonl``)."""
        return self.path / f"{Path(pools).stem}{DISCOVERY_RECORDS}"

    @property
    def llm_cache(self) -> Path:
        """``$TREK_CACHE`` when set, else ``RUN_DIR/llm-cache.sqlite``."""
        return env_path("TREK_CACHE", self.path / LLM_CACHE)  # type: ignore[return-value]

    @property
    def search_cache(self) -> Path:
        """``$TREK_SEARCH_CACHE`` when set, else ``RUN_DIR/search-cache.sqlite``."""
        return env_path("TREK_SEARCH_CACHE", self.path / SEARCH_CACHE)  # type: ignore[return-value]

    @property
    def pages(self) -> Path:
        """``$TREK_PAGES`` when set, else ``RUN_DIR/pages.sqlite``."""
        return env_path("TREK_PAGES", self.path / PAGES)  # type: ignore[return-value]

    def ledger(self, name: str) -> Path:
        """The spend ledger of the record file ``name`` (``.grades.jsonl.spend``)."""
        return ledger_of(self.path / name)

    def old_spend_total(self, name: str) -> Path:
        """``.<name>.spent.json``: the total an older ``trek llm run`` kept before spend ledgers."""
        return self.path / f".{name}.spent.json"

    def batch_state(self, name: str) -> Path:
        """``.<name>.batches/``: the Batch API state folder of the output ``name`` (``trek llm run --batch``)."""
        return self.path / f".{name}.batches"

    def output_lock(self, name: str, hint: str = "wait for it or use another --out") -> contextlib.AbstractContextManager[Path]:
        """The write lock of one output file of the folder (``.<name>.lock``), for commands whose
        output is a file rather than a whole run (``trek llm run --out``): two outputs in one
        folder are written at once, one output by one process (also not twice in one process)."""
        out = self.path / name
        lock = self.path / f".{name}.lock"
        return lock_file(lock, what=f"{out} (lock {lock.name})", reentrant=False, hint=hint)

    # -- readers and writers --------------------------------------------------------------------
    def has(self, name: str) -> bool:
        return (self.path / name).exists()

    def meta(self) -> RunMeta | None:
        return read_meta(self.path)

    def write_meta(self, meta: RunMeta) -> Path:
        return write_meta(self.path, meta)

    def questions(self) -> dict[str, Question]:
        return load_questions(self.path)

    def answers(self, questions: Mapping[str, Question] | None = None) -> dict[str, Trajectory]:
        return load_answers(self.path, questions)

    def grades(self, questions: Mapping[str, Question] | None = None) -> dict[str, Grade]:
        return load_grades(self.path, questions)

    def records(self, name: str, model: type[M]) -> list[M]:
        """Every record of ``RUN_DIR/name`` as ``model`` (empty when the file does not exist yet)."""
        path = self.path / name
        return list(iter_jsonl(path, model)) if path.exists() else []

    def raw(self, name: str) -> Iterator[dict[str, Any]]:
        """The JSON objects of ``RUN_DIR/name`` as they are (none when it does not exist)."""
        path = self.path / name
        if path.exists():
            for _, obj in iter_json_lines(path):
                yield obj

    def write(self, name: str, records: Iterable[BaseModel | dict[str, Any]]) -> Path:
        return write_records(self.path, name, records)

    def client(self, role: Any, **settings: Any) -> Any:
        """The client that plays ``role`` (a :class:`trek.roles.Role`) in this run: the run's
        response cache (:attr:`llm_cache`), its price table and connection limit, and
        ``settings`` (``limits``, ``ledger``, ``budget_usd``, ``max_retries``, ``progress``...;
        see :func:`trek.roles.build_client`)."""
        from trek.roles import build_client

        settings.setdefault("cache", self.llm_cache)
        return build_client(role, **settings)

    def lock(self) -> contextlib.AbstractContextManager[Path]:
        """The write lock of the run (see :func:`run_lock`)."""
        return run_lock(self.path)

    # -- the output rule (trek.outputs) ---------------------------------------------------------
    def check_target(self, *kinds: str, option: str = "--run", grid: bool = False) -> RunDir:
        """Refuse this folder as the target of a run of ``kinds`` (``grid``: a folder of such runs)
        unless it is new, empty or already one; never inside the bundled data, the package or a
        recorded Ctrl build (:func:`trek.outputs.check_run_folder`)."""
        check_run_folder(self.path, kinds, meta=META, build=(BUILD_MANIFEST, CONTEXTS), option=option, grid=grid)
        return self

    def check_replace(self, *kinds: str, inputs: Iterable[PathLike | None] = (), option: str = "--out") -> RunDir:
        """Refuse to replace this folder unless it is a run of ``kinds``, not the current folder
        and holding none of ``inputs`` (:func:`trek.outputs.check_replace`)."""
        check_replace(self.path, kinds, meta=META, inputs=inputs, option=option)
        return self


# -- file locks ------------------------------------------------------------------------------------
class RunLockedError(RuntimeError):
    """Another process is writing into the same run directory (or output)."""


_held: dict[Path, tuple[int, int]] = {}  # lock file -> (fd, depth), this process
_held_lock = threading.Lock()


@contextlib.contextmanager
def lock_file(path: PathLike, what: str | None = None, hint: str = "wait for it to finish (or stop it) and run again",
              *, reentrant: bool = True) -> Iterator[Path]:
    """Hold an exclusive ``flock`` on the file ``path`` (created when missing; it holds the
    holder's process id) for the ``with`` block.

    The kernel drops the lock when the process dies (also on ``kill -9``), so a stale file never
    blocks anyone. Re-entrant within one process (unless ``reentrant=False``: then a second
    holder in the same process is refused too). A second process gets :class:`RunLockedError`
    at once (no waiting): "``what`` is being written by process N; ``hint``".
    """
    p = Path(path).resolve()
    with _held_lock:
        entry = _held.get(p) if reentrant else None
        if entry is not None:
            _held[p] = (entry[0], entry[1] + 1)
    if entry is None:
        try:
            fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise RecordError(p, None, f"cannot open the lock ({e.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _read_pid(fd)
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                who = f"process {holder}" if holder else "another process"
                raise RunLockedError(f"{what or p} is being written by {who}; {hint}") from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        if not reentrant:
            try:
                yield p
            finally:
                os.close(fd)
            return
        with _held_lock:
            _held[p] = (fd, 1)
    try:
        yield p
    finally:
        with _held_lock:
            fd, depth = _held[p]
            if depth > 1:
                _held[p] = (fd, depth - 1)
                fd = -1
            else:
                del _held[p]
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the descriptor releases the flock


@contextlib.contextmanager
def run_lock(run_dir: PathLike) -> Iterator[Path]:
    """Hold the write lock of ``run_dir`` (created when missing): an ``flock`` on
    ``RUN_DIR/.trek.lock`` (see :func:`lock_file`). Yields the resolved run directory."""
    d = Path(run_dir).resolve()
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RecordError(d, None, f"cannot create the run directory ({e.strerror})") from None
    if not d.is_dir():
        raise RecordError(d, None, "is not a directory")
    with lock_file(d / LOCK, what=str(d)):
        yield d


def _read_pid(fd: int) -> str | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return text if text.isdigit() else None


def _dir(run_dir: PathLike) -> Path:
    p = Path(run_dir)
    if not p.is_dir():
        raise RecordError(p, None, "run directory does not exist")
    return p


def not_a_run_hint(folder: PathLike) -> str | None:
    """A hint for a folder given as a run that holds no ``questions.jsonl`` but another tool's
    logs (inspect_ai's ``.eval`` files): the import that turns one into a run. ``None`` otherwise."""
    p = Path(folder)
    if not p.is_dir() or (p / QUESTIONS).exists():
        return None
    logs = sorted(p.glob("*.eval"))
    if not logs:
        return None
    return (f"{p} holds {len(logs)} inspect_ai log(s) (.eval), not a Trek run: make a run of one with "
            f"`trek import inspect-ai {logs[-1]} --out runs/NAME`, then grade runs/NAME")


# -- run.json ------------------------------------------------------------------------------------
def read_meta(run_dir: PathLike) -> RunMeta | None:
    """The run's ``run.json``, or ``None`` when the run has none yet."""
    from trek.jsonio import read_text  # bounded; a pipe or a device is refused without opening it

    path = Path(run_dir) / META
    if not path.exists():
        return None
    text = read_text(path, META, limit=META_LIMIT)
    try:
        return RunMeta.model_validate_json(text)
    except ValueError as e:
        raise RecordError(path, None, f"not a valid {META} ({str(e).splitlines()[0]})") from None


def write_meta(run_dir: PathLike, meta: RunMeta) -> Path:
    """Write ``run.json`` atomically (a temporary file, then a rename)."""
    return atomic_write(Path(run_dir) / META, meta.model_dump_json(indent=2) + "\n")


def new_meta(run_dir: PathLike, kind: str, client: Any, previous: RunMeta | None, **fields: Any) -> RunMeta:
    """The ``run.json`` of a run answered by ``client``: its model and endpoint, this Trek's version,
    and the creation time of ``previous`` (the run's earlier ``run.json``) if there is one."""
    from trek import __version__

    return RunMeta(run_id=Path(run_dir).name, kind=kind, model=client.model, endpoint=client.base_url,
                   trek_version=__version__, created_at=previous.created_at if previous else utcnow(), **fields)


def update_meta(run_dir: PathLike, **changes: Any) -> RunMeta:
    """Change fields of an existing ``run.json`` (``config`` is merged, not replaced)."""
    meta = read_meta(run_dir)
    if meta is None:
        raise RecordError(Path(run_dir) / META, None, "file does not exist")
    config = {**meta.config, **changes.pop("config", {})}
    meta = meta.model_copy(update={**changes, "config": config, "updated_at": utcnow()})
    write_meta(run_dir, meta)
    return meta


# -- record files --------------------------------------------------------------------------------
def load_questions(run_dir: PathLike) -> dict[str, Question]:
    """The run's question set by id, in file order; a repeated id is an error naming its line."""
    path = _dir(run_dir) / QUESTIONS
    out: dict[str, Question] = {}
    for line, q in _numbered(path, Question, torn_tail=False):
        if q.id in out:
            raise RecordError(path, line, f"field 'id': duplicate question id {q.id!r}")
        out[q.id] = q
    return out


def load_answers(run_dir: PathLike, questions: Mapping[str, Question] | None = None) -> dict[str, Trajectory]:
    """Trajectories by question id (a later line for the same id wins); empty when the run has
    no ``answers.jsonl`` yet. With ``questions``, an answer to an unknown id is an error."""
    path = _dir(run_dir) / ANSWERS
    if not path.exists():
        return {}
    return _by_question(path, Trajectory, questions)


def iter_answers(run_dir: PathLike, questions: Mapping[str, Question] | None = None) -> Iterator[Trajectory]:
    """The trajectories of ``answers.jsonl`` one at a time, in file order (a later line for the
    same id supersedes an earlier one: keep the last); none when the run has no answers yet.
    With ``questions``, an answer to an unknown id is an error naming its line."""
    path = _dir(run_dir) / ANSWERS
    if path.exists():
        yield from _checked(path, Trajectory, questions)


def iter_grades(run_dir: PathLike, questions: Mapping[str, Question] | None = None) -> Iterator[Grade]:
    """The grades of ``grades.jsonl`` one at a time (see :func:`iter_answers`)."""
    path = _dir(run_dir) / GRADES
    if path.exists():
        yield from _checked(path, Grade, questions)


#: The fields of a trajectory that grading and the run's frame read (:func:`slim_answer`).
SLIM_ANSWER_FIELDS = ("question_id", "model", "status", "final_answer", "error", "usage", "input_key",
                      "prompt_version", "coverage")


def slim_answer(t: Trajectory) -> Trajectory:
    """``t`` without its messages, steps, search calls, pages and details: the status, final
    answer, error, usage and coverage that grading, the frame and a trace's case read, in a
    fraction of the memory (the record on disk is unchanged; never write a slim copy back).

    The copy is a model of those fields alone (:func:`trek.types.subset_model`), not a
    ``Trajectory`` filled with defaults: reading any other field raises ``AttributeError``
    instead of giving an empty list, and a copy holds less than half the memory."""
    # every copy has every field set: they share one fields-set (pydantic would make one each)
    return cast(Trajectory, _slim_model().model_construct(_SLIM_SET, **{f: getattr(t, f) for f in SLIM_ANSWER_FIELDS}))


_SLIM_SET = set(SLIM_ANSWER_FIELDS)


@functools.cache
def answer_fields(*extra: str) -> type[BaseModel]:
    """A model of the slim fields (:data:`SLIM_ANSWER_FIELDS`) and ``extra`` of a trajectory, to
    read a line already validated as a whole again cheaply (:meth:`LineIndex.read`): pass what it
    gives to :func:`slim_answer` for a slim copy."""
    return subset_model(Trajectory, (*SLIM_ANSWER_FIELDS, *extra))


@functools.cache
def _slim_model() -> type[BaseModel]:
    """The model of :func:`slim_answer`'s copies: the slim fields, and the properties of
    ``Trajectory`` that read only them."""
    base: Any = subset_model(Trajectory, SLIM_ANSWER_FIELDS)
    return type("SlimTrajectory", (base,), {"observed": Trajectory.observed, "__module__": __name__})


def load_grades(run_dir: PathLike, questions: Mapping[str, Question] | None = None) -> dict[str, Grade]:
    """Grades by question id; empty when the run is not graded yet (see :func:`load_answers`)."""
    path = _dir(run_dir) / GRADES
    if not path.exists():
        return {}
    return _by_question(path, Grade, questions)


def write_records(
    run_dir: PathLike, name: str, records: Iterable[BaseModel | dict[str, Any]]
) -> Path:
    """Write one of the run's record files atomically (``name`` is e.g. :data:`ANSWERS`)."""
    return write_jsonl(Path(run_dir) / name, records)


def _numbered(path: Path, model: type[Any], torn_tail: bool = True) -> Iterator[tuple[int, Any]]:
    # record files are journals while a stage writes them: a killed writer's partial last line
    # is dropped with a warning (see trek.journal)
    for line, obj in iter_json_lines(path, torn_tail=torn_tail):
        try:
            yield line, model.model_validate(obj)
        except ValidationError as e:
            raise RecordError(path, line, f"{model.__name__}: {describe_validation_error(e)}") from None


def iter_checked(path: PathLike, model: type[M], questions: Container[str] | None = None) -> Iterator[tuple[int, M]]:
    """``(line, record)`` of a record file one at a time (nothing kept), each validated as
    ``model``; with ``questions`` (ids), a record of an unknown question id is an error naming
    its line. Lines for the same id are all yielded (a later one supersedes an earlier one)."""
    path = Path(path)
    for line, rec in _numbered(path, model):
        if questions is not None and rec.question_id not in questions:
            raise RecordError(path, line, f"field 'question_id': {rec.question_id!r} is not in {QUESTIONS}")
        yield line, rec


class LineIndex:
    """Where records are in a JSONL record file: per record, the byte offset and length of its
    line (and a small integer tag, e.g. a status code), in arrays, so that a large file is indexed
    in a few dozen bytes per record and a record is read again, validated, only when it is needed
    (:meth:`read`, one ``pread``). Records are numbered in the order they are added."""

    def __init__(self, path: PathLike, model: type[Any]):
        from array import array

        self.path, self.model = Path(path), model
        self.offsets, self.lengths, self.tags = array("q"), array("q"), bytearray()

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, offset: int, length: int, tag: int = 0) -> int:
        self.offsets.append(offset)
        self.lengths.append(length)
        self.tags.append(tag)
        return len(self.offsets) - 1

    def set(self, n: int, offset: int, length: int, tag: int = 0) -> None:
        self.offsets[n], self.lengths[n], self.tags[n] = offset, length, tag

    def read(self, n: int, fd: int | None = None, model: type[Any] | None = None) -> Any:
        """Record ``n`` read again from the file and validated (``fd``: the file, already open;
        ``model``: validated as this model instead, e.g. a :func:`~trek.types.subset_model` of the
        few fields a reader needs, the whole line having been validated when it was indexed)."""
        from trek.jsonio import loads

        own = fd is None
        if own:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            blob = os.pread(fd, self.lengths[n], self.offsets[n])  # type: ignore[arg-type]
        finally:
            if own:
                os.close(fd)  # type: ignore[arg-type]
        if len(blob) != self.lengths[n]:
            raise RecordError(self.path, None, f"changed while it was read (a line at byte {self.offsets[n]} is gone)")
        try:
            return (model or self.model).model_validate(loads(blob.decode("utf-8"), self.path))
        except ValidationError as e:  # pragma: no cover - every line was validated when it was indexed
            raise RecordError(self.path, None, f"{self.model.__name__}: {describe_validation_error(e)}") from None

    @contextlib.contextmanager
    def reader(self, model: type[Any] | None = None) -> Iterator[Any]:
        """``read(n)`` with the file kept open for the block (``model``: see :meth:`read`)."""
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            yield lambda n: self.read(n, fd, model)
        finally:
            os.close(fd)


def index_questions(run_dir: PathLike) -> tuple[dict[str, int], LineIndex]:
    """The run's question set indexed, not loaded: each id's number (file order) and where its
    line is; every line is validated (a repeated id is an error naming its line, as
    :func:`load_questions`). ``index.read(n)`` gives question ``n``."""
    from trek.jsonio import iter_jsonl_spans

    path = _dir(run_dir) / QUESTIONS
    ids: dict[str, int] = {}
    index = LineIndex(path, Question)
    for line, offset, length, obj in iter_jsonl_spans(path, torn_tail=False):
        try:
            q = Question.model_validate(obj)
        except ValidationError as e:
            raise RecordError(path, line, f"Question: {describe_validation_error(e)}") from None
        if q.id in ids:
            raise RecordError(path, line, f"field 'id': duplicate question id {q.id!r}")
        ids[q.id] = index.add(offset, length)
    return ids, index


def index_records(run_dir: PathLike, name: str, model: type[Any], questions: Mapping[str, int],
                  tag: Any = lambda rec: 0) -> LineIndex:
    """A record file of the run (``answers.jsonl``, ``grades.jsonl``) indexed by question
    number: record ``n`` is the last line for question ``n`` (``tags[n]`` is ``tag(record)``, 0-254;
    255 and a length of 0: no record). Every line is validated, and a record of an unknown
    question id is an error naming its line (as :func:`iter_answers`)."""
    from trek.jsonio import iter_jsonl_spans

    path = _dir(run_dir) / name
    index = LineIndex(path, model)
    for _ in range(len(questions)):
        index.add(0, 0, 255)
    if not path.exists():
        return index
    for line, offset, length, obj in iter_jsonl_spans(path, torn_tail=True):
        try:
            rec = model.model_validate(obj)
        except ValidationError as e:
            raise RecordError(path, line, f"{model.__name__}: {describe_validation_error(e)}") from None
        n = questions.get(rec.question_id)
        if n is None:
            raise RecordError(path, line, f"field 'question_id': {rec.question_id!r} is not in {QUESTIONS}")
        index.set(n, offset, length, tag(rec))
    return index


def _by_question(path: Path, model: type[Any], questions: Mapping[str, Question] | None) -> dict[str, Any]:
    return {rec.question_id: rec for _, rec in iter_checked(path, model, questions)}


def _checked(path: Path, model: type[Any], questions: Container[str] | None) -> Iterator[Any]:
    for _, rec in iter_checked(path, model, questions):
        yield rec


def grow_questions(run_dir: PathLike, questions: Iterable[Question]) -> list[Question]:
    """Write the run's question set after adding ``questions`` (new ids appended, known ones
    updated) and return it: a question set only grows, so a smaller ``--limit`` keeps the rest."""
    merged = dict(load_questions(run_dir)) if (Path(run_dir) / QUESTIONS).exists() else {}
    merged.update((q.id, q) for q in questions)
    write_records(run_dir, QUESTIONS, merged.values())
    return list(merged.values())


def grow_questions_indexed(run_dir: PathLike, questions: Iterable[Question]) -> LineIndex:
    """:func:`grow_questions` without holding the question set: the same file, byte for byte, and
    an index of its lines (``index.reader()``) instead of a list. ``questions`` is read once;
    each question is spooled to a temporary file as it is read and copied from there, and the
    questions already in the file are read again by offset, so what stays in memory per
    question is its id and a few integers."""
    import tempfile
    from array import array

    root = Path(run_dir)
    path = root / QUESTIONS
    old_ids, old = index_questions(root) if path.exists() else ({}, None)
    new_at: dict[str, int] = {}  # id -> its last spooled line (first position, last value: dict.update)
    offsets, lengths = array("q"), array("q")
    with tempfile.TemporaryFile() as spool:
        at = 0
        for q in questions:
            line = q.model_dump_json().encode("utf-8") + b"\n"
            spool.write(line)
            new_at[q.id] = len(offsets)
            offsets.append(at)
            lengths.append(len(line))
            at += len(line)
        spool.flush()
        fd = spool.fileno()
        index = LineIndex(path, Question)

        def lines() -> Iterator[bytes]:
            written = 0

            def put(line: bytes) -> bytes:
                nonlocal written
                index.add(written, len(line))
                written += len(line)
                return line

            def spooled(n: int) -> bytes:
                return os.pread(fd, lengths[n], offsets[n])

            if old is not None:
                with old.reader() as read:
                    for qid, n in old_ids.items():
                        k = new_at.pop(qid, None)
                        yield put(spooled(k) if k is not None else
                                  read(n).model_dump_json().encode("utf-8") + b"\n")
            for k in new_at.values():
                yield put(spooled(k))

        write_records(root, QUESTIONS, lines())
    return index


def check_identity(run_dir: PathLike, meta: RunMeta | None, model: str, system: Mapping[str, Any]) -> None:
    """Refuse to mix two systems in one run directory: checked against ``run.json`` when there
    is one, else against the answers themselves (a run whose ``run.json`` was deleted)."""
    if meta is not None:
        found = [(meta.model or "", meta.config.get("system"), "its run.json")]
    elif (Path(run_dir) / ANSWERS).exists():
        found = list({t.question_id: (t.model, t.system or dict(system), f"{ANSWERS} (question {t.question_id})")
                      for t in iter_answers(run_dir)}.values())  # line by line: no trajectory kept
    else:
        found = []
    for old_model, old_system, where in found:
        if old_model != model or old_system != dict(system):
            raise ValueError(f"{run_dir} holds a run of model {old_model!r} with system {old_system} (from {where}); "
                             f"this run is model {model!r} with system {dict(system)}. Use a new --run directory.")


# -- discovery -----------------------------------------------------------------------------------
def discover(
    root: PathLike, *, require: str = GRADES, runs: Mapping[str, PathLike] | None = None
) -> dict[str, Path]:
    """``{label: run directory}``.

    With ``runs`` given, those (each must hold ``require``); otherwise every folder directly
    under ``root`` that holds ``require``, labelled by folder name and ordered by ``run.json``'s
    ``config.order`` then name.
    """
    if runs:
        out = {str(k): Path(v) for k, v in runs.items()}
        for label, p in out.items():
            if not (p / require).exists():
                raise FileNotFoundError(f"run '{label}': {p / require} does not exist")
        return out
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"no runs folder at {base}")
    found = []
    for d in sorted(p for p in base.iterdir() if (p / require).exists()):
        meta = d / META
        order = 0
        if meta.exists():
            from trek import jsonio

            data = jsonio.load_json(meta, "run.json")  # bounded: a pipe or a deep value is a clear error
            cfg = data.get("config") if isinstance(data, dict) else None
            order = cfg.get("order", 0) if isinstance(cfg, dict) else 0
        found.append((order, d.name, d))
    if not found:
        raise FileNotFoundError(f"no runs with {require} under {base}")
    return {name: d for _, name, d in sorted(found)}


# -- the analysis surface ------------------------------------------------------------------------
FRAME_COLUMNS = [
    "question_id", "dataset", "answer_status", "answer", "outcome", "correct",
    "prompt_tokens", "completion_tokens", "reasoning_tokens", "cost_usd", "judge_cost_usd",
]


#: The columns of :func:`frame` that come from a run's answers and from its grades.
_ANSWER_COLUMNS = ("answer_status", "answer", "prompt_tokens", "completion_tokens", "reasoning_tokens", "cost_usd")
_GRADE_COLUMNS = ("outcome", "correct", "judge_cost_usd")


def frame(run_dir: PathLike, columns: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per question of the run's question set, in question order.

    Columns (see :data:`FRAME_COLUMNS`; ``columns`` names the ones to build, in that order,
    default all; a run's answers are not read when no answer column is asked for, nor its grades
    without a grade column):

    * ``answer_status``: the trajectory's status (``ok``, ``pending``, ...) or ``missing`` when
      the question has no trajectory; ``answer`` the final answer (``None`` when there is none);
    * ``outcome``: the grade outcome (``correct``, ``incorrect``, ``not_attempted``,
      ``undecided``, ``unparsed``, ``pending``) or ``ungraded`` when there is no grade;
    * ``correct``: ``True`` only for a ``correct`` grade. Everything else (wrong, not attempted,
      undecided, unparsed, pending, unanswered, ungraded) is ``False``: accuracy over this column is
      accuracy over the whole question set;
    * usage of the answer (tokens, dollars; NaN dollars when the model has no price) and the
      judge's dollars.

    The files are read line by line and only the fields these columns need are validated
    (:func:`trek.types.subset_model`): a run of 100,000 long trajectories costs the columns'
    memory, not the trajectories'.
    """
    import numpy as np
    import pandas as pd

    cols = list(FRAME_COLUMNS if columns is None else columns)
    unknown = [c for c in cols if c not in FRAME_COLUMNS]
    if unknown:
        raise ValueError(f"runs.frame: unknown column(s) {unknown}; the columns are {', '.join(FRAME_COLUMNS)}")
    rd = _dir(run_dir)
    qpath = rd / QUESTIONS
    ids: list[str] = []
    datasets: list[str] = []
    seen: set[str] = set()
    for line, q in _numbered(qpath, subset_model(Question, ("id", "dataset")), torn_tail=False):
        if q.id in seen:
            raise RecordError(qpath, line, f"field 'id': duplicate question id {q.id!r}")
        seen.add(q.id)
        ids.append(q.id)
        datasets.append(q.dataset)
    answers: dict[str, tuple[Any, ...]] = {}
    if any(c in cols for c in _ANSWER_COLUMNS) and (rd / ANSWERS).exists():
        model = subset_model(Trajectory, ("question_id", "status", "final_answer", "usage"))
        for t in _checked(rd / ANSWERS, model, seen):
            u = t.usage
            answers[t.question_id] = (t.status, t.final_answer, u.prompt_tokens, u.completion_tokens,
                                      u.reasoning_tokens, np.nan if u.cost_usd is None else u.cost_usd)
    grades: dict[str, tuple[Any, ...]] = {}
    if any(c in cols for c in _GRADE_COLUMNS) and (rd / GRADES).exists():
        model = subset_model(Grade, ("question_id", "outcome", "usage"))
        for g in _checked(rd / GRADES, model, seen):
            grades[g.question_id] = (g.outcome, g.outcome == "correct",
                                     np.nan if g.usage.cost_usd is None else g.usage.cost_usd)
    no_answer = ("missing", None, 0, 0, 0, np.nan)
    no_grade = ("ungraded", False, np.nan)
    data: dict[str, list[Any]] = {}
    for c in cols:
        if c == "question_id":
            data[c] = ids
        elif c == "dataset":
            data[c] = datasets
        elif c in _ANSWER_COLUMNS:
            k = _ANSWER_COLUMNS.index(c)
            data[c] = [answers.get(q, no_answer)[k] for q in ids]
        else:
            k = _GRADE_COLUMNS.index(c)
            data[c] = [grades.get(q, no_grade)[k] for q in ids]
    df = pd.DataFrame(data, columns=cols)
    if "correct" in df:
        df["correct"] = df["correct"].astype(bool)
    return df


#: The columns of :func:`outcome_frame`.
OUTCOME_COLUMNS = ["dataset", "answer_status", "outcome", "correct"]


def outcome_frame(run_dir: PathLike) -> pd.DataFrame:
    """The columns of :func:`frame` that an accuracy table needs (:data:`OUTCOME_COLUMNS`), with
    the same values, in a few bytes per question: ``dataset``, ``answer_status`` and ``outcome``
    as categoricals, ``correct`` as booleans (no question id, answer or usage is kept). The files
    are read line by line and checked as :func:`frame` checks them (a repeated question id or a
    record of an unknown question is an error naming its line); a run of 100,000 questions holds
    the id of each question only while its answers and grades are matched."""
    from array import array

    import numpy as np
    import pandas as pd

    rd = _dir(run_dir)
    qpath = rd / QUESTIONS
    number: dict[str, int] = {}
    names: dict[str, dict[str, int]] = {"dataset": {}, "answer_status": {"missing": 0}, "outcome": {"ungraded": 0}}
    codes = {c: array("H") for c in names}

    def code(column: str, value: str) -> int:
        known = names[column]
        if value not in known:
            known[value] = len(known)
        return known[value]

    for line, q in _numbered(qpath, subset_model(Question, ("id", "dataset")), torn_tail=False):
        if q.id in number:
            raise RecordError(qpath, line, f"field 'id': duplicate question id {q.id!r}")
        number[q.id] = len(number)
        codes["dataset"].append(code("dataset", q.dataset))
    n = len(number)
    codes["answer_status"] = array("H", bytes(2 * n))
    codes["outcome"] = array("H", bytes(2 * n))
    if (rd / ANSWERS).exists():
        for t in _checked(rd / ANSWERS, subset_model(Trajectory, ("question_id", "status")), number):
            codes["answer_status"][number[t.question_id]] = code("answer_status", t.status)
    if (rd / GRADES).exists():
        for g in _checked(rd / GRADES, subset_model(Grade, ("question_id", "outcome")), number):
            codes["outcome"][number[g.question_id]] = code("outcome", g.outcome)
    del number

    def column(name: str) -> pd.Categorical:
        cats = list(names[name])
        return pd.Categorical.from_codes(np.frombuffer(codes[name], dtype=np.uint16).astype(np.int32), cats)

    outcome = column("outcome")
    correct = (np.frombuffer(codes["outcome"], dtype=np.uint16) == names["outcome"]["correct"]
               if "correct" in names["outcome"] else np.zeros(n, dtype=bool))
    return pd.DataFrame({"dataset": column("dataset"), "answer_status": column("answer_status"), "outcome": outcome,
                         "correct": correct}, columns=OUTCOME_COLUMNS)


def correctness(runs: Mapping[str, PathLike]) -> pd.DataFrame:
    """One row per question, one boolean column per run label (``frame(...).correct``).

    Only questions present in every run are kept (paired tests need the same questions);
    index ``question_id``, sorted.
    """
    import pandas as pd

    cols = {label: frame(d).set_index("question_id")["correct"] for label, d in runs.items()}
    df = pd.DataFrame(cols).dropna()
    df.index.name = "question_id"
    return df.astype(bool).sort_index()


@dataclass
class Tally:
    """What one invocation of a runner did: answer counts (``skipped``: final before it started),
    the model usage and dollars of this invocation alone, and the errors of answers not ok."""

    total: int = 0
    ok: int = 0
    pending: int = 0
    failed: int = 0
    skipped: int = 0
    usage: Usage = field(default_factory=Usage)
    spent_usd: float = 0.0
    spent_text: str = "$0.0000"
    http_calls: int = 0
    errors: list[str] = field(default_factory=list)
    _start: tuple[Any, ...] = field(default=(), init=False, repr=False, compare=False)

    def watch(self, client: Any) -> None:
        """Count what ``client`` does from now on; :meth:`settle` takes it into the tally."""
        self._start = (client, client.usage, client.spent_usd, client.unpriced_calls, client.http_calls)

    def dollars(self) -> str:
        """What the watched client spent since :meth:`watch`, for a progress bar (``$0.0123``)."""
        if not self._start:
            return ""
        client, _, spent, unpriced, _ = self._start
        return client.spent_text(spent, unpriced).split(" (")[0]

    def settle(self) -> None:
        client, usage, spent, unpriced, http = self._start
        self.usage, self.spent_usd, self.http_calls = client.usage - usage, client.spent_usd - spent, client.http_calls - http
        self.spent_text = client.spent_text(spent, unpriced)

    def model_line(self) -> str:
        return (f"model: {self.usage.calls} calls ({self.usage.cached_calls} from cache, {self.http_calls} HTTP "
                f"requests), {self.usage.prompt_tokens} prompt + {self.usage.completion_tokens} completion tokens, "
                f"spent {self.spent_text}")
