"""Batch runner: one chat request per JSONL line in, one result line per id out.

Input line: ``{"id": ..., "messages": [...], "model"?: str, "sample"?: int, "tools"?: [...],
...sampling parameters}``. Output line, in input order::

    {"id", "status": "ok" | "pending" | "failed", "content", "usage", "cached", "error", "model",
     "request_key", "tool_calls"?}

The run is a :class:`BatchStage` on the stage executor (:func:`trek.stage.execute`), as every
other stage: the input key of an id is its request's cache key, so running the same command
again keeps the ids already ``ok`` for the same request without a call and tries ``pending`` and
``failed`` ones again. Results are appended to the output as they finish (a journal,
:mod:`trek.journal`, synced at checkpoints), and the output is rewritten once at the end
(temporary file + rename): one line per id, in input order. A ``kill -9`` leaves at most a
partial last line (dropped with a warning on the next run) and possibly superseded lines (the
last line of an id wins). Answers that arrived before an interruption are in the cache, so a
re-run asks the endpoint for none of them again.

Every request is checked before any call: a malformed field (a message ``content`` that is
neither text nor a list of parts, ``temperature: "hot"``, ``max_tokens: -5``) is an error naming
the file, line, id and field. A request the endpoint rejects for itself alone (a 400 such as a
message too long for the model, a 413 body too large) comes out ``failed`` with the endpoint's
reason and the file, line and id; the other ids go on. A requests file is checked whole first,
then read again line by line for each pass over it (:class:`RequestsFile`), so a run holds only
the requests in flight, whatever the size of the file (a pipe, which can be read only once, is
held whole).

Paid results are never discarded silently. Before any call the runner refuses (with
:class:`BatchError` or :class:`~trek.outputs.OutputError`) an ``--out`` that is the requests
file (or any file the run reads), a folder, a device or a pipe, or under a file; an output that
another run is writing (the output's lock, :meth:`trek.runs.RunDir.output_lock`, held for the
whole run; the operating system releases it when a process dies); an output that is not an
earlier output; and an output holding ``ok`` ids that the requests file no longer lists.

A budget caps the spend recorded for one output across resumes: every fresh call is recorded
in the spend ledger ``.<out>.spend`` beside it (:mod:`trek.llm.ledger`: reserved at its worst
case before it is sent, settled with its price), so a resumed run spends only what is left,
also after a ``kill -9``. Delete the ledger to start a new budget for the same output.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, model_serializer

from trek.aio import run_sync
from trek.llm.cache import request_key
from trek.llm.client import ChatRequest, LLMClient
from trek.llm.ledger import ledger_path, read_ledger
from trek.outputs import atomic_write, check_out
from trek.roles import Role
from trek.runs import BATCH_STATE, RESPONSES, RunDir, RunLockedError
from trek.stage import Slot, Stage, execute
from trek.types import Record, RecordError, Usage, iter_json_lines

__all__ = ["BatchError", "BatchItem", "BatchResult", "BatchStage", "BatchSummary", "RequestsFile", "load_requests", "read_requests",
           "run_batch",
           "run_openai_batch",
           "run_requests"]

_ROLES = {"system", "developer", "user", "assistant", "tool"}
_RESERVED = {"id", "messages", "model", "sample", "tools"}
#: Sampling parameters checked before a request is sent: (lowest, highest) of a number.
_NUMBER_RANGES = {"temperature": (0.0, 2.0), "top_p": (0.0, 1.0), "presence_penalty": (-2.0, 2.0),
                  "frequency_penalty": (-2.0, 2.0)}
#: Parameters that must be positive whole numbers.
_POSITIVE_INTS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


class BatchError(ValueError):
    """The run cannot start without risking results already paid for (or cannot write them)."""


@dataclass
class BatchItem:
    id: str
    request: ChatRequest
    line: int


@dataclass
class BatchSummary:
    total: int
    ok: int
    pending: int
    kept: int
    http_calls: int
    cache_hits: int
    out: Path
    spent_usd: float = 0.0  # fresh calls for this output over all runs (the ledger)
    failed: int = 0  # rejected by the endpoint for themselves alone
    errors: list[str] = field(default_factory=list)  # the reasons of the failed ids
    example: str | None = None  # the reason of one pending id
    batch: Any = None  # the Batch API's BatchRun (``--batch``)
    client_notes: list[str] = field(default_factory=list)  # what the client did (endpoints, tokens)

    def describe(self) -> str:
        failed = f", {self.failed} failed (rejected by the endpoint)" if self.failed else ""
        return (
            f"{self.total} ids: {self.ok} ok, {self.pending} pending{failed} "
            f"({self.kept} kept from the previous output, {self.cache_hits} cache hits, "
            f"{self.http_calls} HTTP requests) -> {self.out}"
        )

    @property
    def exit_code(self) -> int:
        """0 when every id is ok, 3 when some are pending, 4 when none is but some failed."""
        return 3 if self.pending else 4 if self.failed else 0

    def report(self) -> list[str]:
        """What the command says at the end, line by line."""
        lines = [self.batch.describe()] if self.batch is not None else []
        lines += [self.describe(), *self.client_notes, *(f"  {e}" for e in self.errors[:10])]
        if self.pending:
            lines.append(f"{self.pending} ids are pending" + (f" (e.g. {self.example})" if self.example else "")
                         + ": run the same command again to retry them.")
        elif self.failed:
            lines.append(f"{self.failed} ids failed: the endpoint rejected them (see their errors in {self.out}); "
                         "a re-run tries them again.")
        return lines


def load_requests(path: str | os.PathLike[str], default_model: str | None = None) -> list[BatchItem]:
    """Read and check a requests file; every problem names the file, line and field. Every
    request is held: :func:`read_requests` holds none of a regular file's."""
    return list(_checked(Path(path), default_model, pipes=True, unique=True))  # a pipe (/dev/stdin) is read once


class RequestsFile:
    """A requests file as a re-readable source of :class:`BatchItem` (:class:`trek.stage.Source`):
    made, it checks the whole file (the same errors as :func:`load_requests`, before any call)
    and keeps only the number of requests; each pass over it reads and checks the file again
    line by line, so no request is held beyond the one being read. A file changed since it was
    checked (its size, time of change or inode) is refused with :class:`BatchError` at the start
    of the next pass."""

    def __init__(self, path: str | os.PathLike[str], default_model: str | None = None):
        self.path, self.default_model = Path(path), default_model
        self._stamp = self._stat()
        self.length = sum(1 for _ in _checked(self.path, default_model, pipes=False, unique=True))
        if self._stat() != self._stamp:
            raise BatchError(f"{self.path} changed while it was being checked; run the command again")

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None  # the reader's own error names it
        return st.st_size, st.st_mtime_ns, st.st_ino

    def __iter__(self) -> Iterator[BatchItem]:
        if self._stat() != self._stamp:
            raise BatchError(f"{self.path} changed after its requests were checked (the run reads it again for "
                             "each pass over them); run the command again")
        # ids were found unique when the file was checked: a later pass holds no set of them
        return _checked(self.path, self.default_model, pipes=False, unique=False)

    def __len__(self) -> int:
        return self.length


def read_requests(path: str | os.PathLike[str], default_model: str | None = None) -> RequestsFile | list[BatchItem]:
    """A requests file checked whole, as a source of items to go over as often as needed: a
    regular file as a :class:`RequestsFile` (read again for every pass, so memory does not grow
    with the number of requests); a pipe or a device, which can be read only once, as a list."""
    p = Path(path)
    try:
        regular = stat.S_ISREG(p.stat().st_mode)
    except OSError:
        regular = True  # missing or unreadable: the reader's own error names it
    return RequestsFile(p, default_model) if regular else load_requests(p, default_model)


def _checked(p: Path, default_model: str | None, *, pipes: bool, unique: bool) -> Iterator[BatchItem]:
    """The requests of ``p`` one at a time, each checked before it is given (``unique``: also
    that no id comes twice)."""
    seen: dict[str, int] = {}
    for lineno, obj in iter_json_lines(p, pipes=pipes):
        rid = obj.get("id")
        if rid is None or (isinstance(rid, str) and not rid.strip()) or isinstance(rid, bool):
            raise RecordError(p, lineno, "field 'id': missing or empty")
        if not isinstance(rid, str | int):
            raise RecordError(p, lineno, f"field 'id': must be a string or integer, got {type(rid).__name__}")
        rid = str(rid)
        if unique:
            if rid in seen:
                raise RecordError(p, lineno, f"field 'id': duplicate id '{rid}' (first on line {seen[rid]})")
            seen[rid] = lineno
        msgs = obj.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise RecordError(p, lineno, "field 'messages': must be a non-empty list of messages")
        for j, m in enumerate(msgs):
            if not isinstance(m, dict):
                raise RecordError(p, lineno, f"id '{rid}': field 'messages.{j}': must be an object")
            if m.get("role") not in _ROLES:
                raise RecordError(
                    p, lineno,
                    f"id '{rid}': field 'messages.{j}.role': must be one of {sorted(_ROLES)}, got {m.get('role')!r}",
                )
            if "content" not in m and "tool_calls" not in m:
                raise RecordError(p, lineno, f"id '{rid}': field 'messages.{j}.content': missing")
            problem = _content_problem(m)
            if problem:
                raise RecordError(p, lineno, f"id '{rid}': field 'messages.{j}.content': {problem}")
        model = obj.get("model", default_model)
        if not model or not isinstance(model, str):
            raise RecordError(p, lineno, "field 'model': missing (give it per line or with --model)")
        sample = obj.get("sample", 0)
        if not isinstance(sample, int) or isinstance(sample, bool) or sample < 0:
            raise RecordError(p, lineno, "field 'sample': must be a non-negative integer")
        tools = obj.get("tools")
        if tools is not None and not isinstance(tools, list):
            raise RecordError(p, lineno, "field 'tools': must be a list")
        params = {k: v for k, v in obj.items() if k not in _RESERVED}
        problem = _params_problem(params)
        if problem:
            raise RecordError(p, lineno, f"id '{rid}': {problem}")
        if params.get("stream"):
            raise RecordError(p, lineno, "field 'stream': streaming is not supported by the batch runner")
        if params.get("n") not in (None, 1):
            raise RecordError(p, lineno, "field 'n': use one line per sample with 'sample' instead of n > 1")
        yield BatchItem(rid, ChatRequest(messages=msgs, model=model, tools=tools, sample=sample, params=params, id=rid),
                        lineno)


def _content_problem(m: dict[str, Any]) -> str | None:
    """Why a message's ``content`` cannot be sent (``None`` when it can): text, a list of parts
    (objects, or strings), or null beside tool calls (an assistant turn that called tools)."""
    c = m.get("content")
    if isinstance(c, str):
        return None
    if c is None:
        return None if m.get("tool_calls") or m.get("function_call") else "must be text, not null (null only beside tool_calls)"
    if isinstance(c, list):
        bad = [i for i, part in enumerate(c) if not isinstance(part, dict | str)]
        return f"part {bad[0]} must be an object such as {{'type': 'text', 'text': ...}}" if bad else None
    return f"must be text or a list of parts, not {type(c).__name__} {c!r}"[:200]


def _params_problem(params: dict[str, Any]) -> str | None:
    """Why a request's sampling parameters cannot be sent (``None`` when they can)."""
    for name, (lo, hi) in _NUMBER_RANGES.items():
        v = params.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not lo <= v <= hi):
            return f"field '{name}': must be a number from {lo:g} to {hi:g}, got {v!r}"
    for name in _POSITIVE_INTS:
        v = params.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            return f"field '{name}': must be a whole number of tokens, at least 1, got {v!r}"
    seed = params.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        return f"field 'seed': must be a whole number, got {seed!r}"
    return None


def check_output_path(out: Path, requests_path: Path | None = None,
                      reads: Iterable[str | os.PathLike[str] | None] = ()) -> None:
    """Refuse an output path that is the requests file or another file the run reads (``reads``:
    the cache, the price table), a folder, a device or a pipe (:func:`trek.outputs.check_out`),
    or in a folder we cannot create."""
    if requests_path is not None and out.exists() and requests_path.exists() and out.samefile(requests_path):
        raise BatchError(f"--out {out} is the requests file; writing it would destroy the requests")
    from trek.sqlite import reading_only

    check_out(out, reads=[requests_path, *reads], example=RESPONSES)
    if reading_only():  # a dry run makes no folder: the nearest one that exists must be writable
        parent = next(p for p in out.absolute().parents if p.exists())
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise BatchError(f"cannot create the folder of --out {out} ({parent} is not a writable folder)")
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BatchError(f"cannot create the folder of --out {out} ({e.strerror})") from None


def _ledger(out: Path) -> Path:
    """The spend ledger of an output (an older ``.<out>.spent.json`` total is carried into it)."""
    led = ledger_path(out)
    legacy = RunDir(out.parent).old_spend_total(out.name)
    if legacy.exists() and not led.exists():
        try:
            spent = float(json.loads(legacy.read_text(encoding="utf-8"))["spent_usd"])
        except (OSError, ValueError, KeyError, TypeError):
            raise BatchError(f"{legacy} (the spend recorded for {out.name}) is unreadable; fix or delete it") from None
        if not spent >= 0:
            raise BatchError(f"{legacy}: spent_usd must be a non-negative number")
        atomic_write(led, json.dumps({"spent": "carried over", "usd": spent}) + "\n")
        legacy.unlink()
    return led


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[None]:
    """Hold the output's lock (:meth:`RunDir.output_lock`) for the run; a second run on the same
    output is refused."""
    try:
        with RunDir(out.parent).output_lock(out.name):
            yield
    except RunLockedError as e:
        raise BatchError(f"another run is writing {out}: {e}") from None
    except RecordError as e:
        if Path(e.path).name.endswith(".lock"):
            raise BatchError(f"cannot write in {out.parent} for --out") from None
        raise


# -- the stage ------------------------------------------------------------------------------------
class BatchResult(Record):
    """One line of the output: the result of one request id."""

    id: str
    status: str
    content: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cached: bool = False
    error: str | None = None
    model: str | None = None
    request_key: str | None = None
    tool_calls: list[dict[str, Any]] | None = None

    @model_serializer(mode="wrap")
    def _no_empty_tool_calls(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        if data.get("tool_calls") is None:
            data.pop("tool_calls", None)  # a line names tool calls only when the reply made some
        return data


class BatchStage(Stage[BatchItem, BatchResult]):
    """``trek llm run`` on :mod:`trek.stage`: one :class:`BatchResult` per request id in ``out``.

    The input key of an id is the cache key of its request (model, messages, parameters,
    sample, endpoint), so an ``ok`` line is kept while the request is unchanged."""

    record = BatchResult
    name = "trek llm run"
    unit = "req"

    def __init__(self, out: Path, client: LLMClient, requests_path: Path):
        self.out, self.client, self.requests_path = out, client, requests_path
        self.hits = 0

    def slot(self, item: BatchItem) -> Slot:
        return Slot(self.out, item.id)

    def input_key(self, item: BatchItem) -> str:
        from trek.llm.estimate import request_body

        r = item.request
        return request_key(self.client.cache_request("chat", request_body(self.client, r), r.sample))

    def record_id(self, record: BatchResult) -> str:
        return record.id

    def record_key(self, record: BatchResult) -> str | None:
        return record.request_key

    def finished(self, record: BatchResult) -> bool:
        return record.status == "ok"

    async def produce(self, item: BatchItem, key: str) -> BatchResult:
        r = item.request
        res = await self.client.achat(r.messages, model=r.model, tools=r.tools, sample=r.sample, **r.params)
        self.hits += res.cached
        return BatchResult(id=item.id, status=res.status, content=res.content if res.ok else None, usage=res.usage,
                           cached=res.cached, error=res.error, model=res.model, request_key=res.key or key,
                           tool_calls=(res.tool_calls or None) if res.ok else None)

    def failure(self, item: BatchItem, key: str, error: str) -> BatchResult:
        # rejected for itself alone (or broken): say which line of which file
        return BatchResult(id=item.id, status="failed", model=item.request.model or self.client.model,
                           error=f"{self.requests_path}, line {item.line}, id '{item.id}': {error}")

    def postfix(self) -> str:
        c = self.client
        return f"hits={self.hits} tok={c.usage.total_tokens} {c.spent_text()} {c.pace()}".rstrip()

    def llm_clients(self) -> list[Any]:
        return [self.client]


def _check_previous(out: Path, listed: set[str]) -> None:
    """Refuse an ``out`` that is not an earlier output, or that holds answered ids the requests
    no longer list (their answers were paid for)."""
    if not out.exists():
        return
    status: dict[str, Any] = {}
    try:
        for lineno, obj in iter_json_lines(out, torn_tail=True, warn_torn=False):  # execute() warns
            if "id" not in obj:
                raise RecordError(out, lineno, "line has no 'id'")
            status[str(obj["id"])] = obj.get("status")
    except RecordError as e:
        raise BatchError(f"--out is not an earlier output of `trek llm run` ({e}); move it away or pick another") from None
    orphans = [rid for rid, st in status.items() if st == "ok" and rid not in listed]
    if orphans:
        shown = ", ".join(orphans[:5]) + (", ..." if len(orphans) > 5 else "")
        raise BatchError(
            f"{out} holds {len(orphans)} answered ids that the requests file no longer lists ({shown}); "
            "put them back in the requests file, or write to a new --out"
        )


async def run_batch(
    requests_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    client: LLMClient,
    *,
    checkpoint_seconds: float = 2.0,
    items: Collection[BatchItem] | None = None,
    locked: bool = False,
) -> BatchSummary:
    """Run every request not already answered in ``out_path`` (a :class:`BatchStage` through
    :func:`trek.stage.execute`) and close the client.

    ``items``: the requests file as :func:`read_requests` gives it (checked whole; a pipe is
    read once, so it works too); default: read it here. ``locked``: the caller already holds ``out_path``'s lock
    (the Batch API path takes it before it submits anything). ``client.budget_usd`` (if set) caps the spend recorded
    for ``out_path`` over all runs. Raises :class:`BatchError` (before any call) when the run
    would put paid results at risk.
    """
    req_path, out = Path(requests_path), Path(out_path)
    check_output_path(out, req_path, reads=[getattr(getattr(client, "cache", None), "path", None)])
    if items is None:
        items = read_requests(req_path, default_model=client.model)
    stage = BatchStage(out, client, req_path)
    calls0, hits0 = client.http_calls, client.cache_hits
    try:
        with contextlib.nullcontext() if locked else _locked(out):
            _check_previous(out, {it.id for it in items})
            ledger = _ledger(out)
            try:
                tally = await execute(stage, items, outputs=[out], progress=client.progress, lock=False,
                                      checkpoint_seconds=checkpoint_seconds, ledger=ledger)
            except RecordError as e:
                if Path(e.path) == out:  # a line the pre-check read but is not a result line
                    raise BatchError(f"--out is not an earlier output of `trek llm run` ({e}); move it away or "
                                     "pick another") from None
                raise
    finally:
        await client.aclose()
    # the output read back one line at a time: only the counts and the errors to report are kept
    n_ok = 0
    failed: list[str] = []
    example: str | None = None
    for r in tally.iter(out):
        if r.status == "ok":
            n_ok += 1
        elif r.status == "failed":
            failed.append(r.error or "")
        elif r.status == "pending" and r.error and example is None:
            example = r.error
    return BatchSummary(
        total=len(items), ok=n_ok, pending=len(items) - n_ok - len(failed), kept=tally.kept,
        http_calls=client.http_calls - calls0, cache_hits=client.cache_hits - hits0, out=out,
        spent_usd=read_ledger(ledger), failed=len(failed), errors=failed, example=example,
    )


# -- the Batch API ---------------------------------------------------------------------------------
async def run_openai_batch(
    requests_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    client: LLMClient,
    *,
    state_dir: str | os.PathLike[str] | None = None,
    wait: bool = True,
    poll_seconds: float = 30.0,
    max_wait: float | None = None,
    progress: bool = True,
    items: Collection[BatchItem] | None = None,
) -> Any:
    """``trek llm run --batch``: the requests file through the Batch API, then the usual output.

    ``items``: the requests as :func:`read_requests` gives them (default: read
    the file here; a pipe is read once, so it works too).

    The output's lock is taken first and held to the end, so a second run on the same output is
    refused before it uploads or submits anything. The batch state lives in ``.<out>.batches/``
    beside the output. After the replies are in the cache, the output is written by
    :func:`run_batch` replaying the cache (no live call); ids not answered by a batch come out
    ``pending``. The batch-priced dollars of the
    replies loaded are added to the output's spend ledger (``--budget``).
    """
    from trek.llm.estimate import RecordingClient, estimate_requests, request_body
    from trek.llm.ledger import spending
    from trek.llm.openai_batch import submit_and_collect
    from trek.llm.usage import BATCH_PRICE_FACTOR

    out = Path(out_path)
    check_output_path(out, Path(requests_path), reads=[getattr(client.cache, "path", None)])
    if items is None:
        items = read_requests(requests_path, default_model=client.model)
    with _locked(out):
        _check_previous(out, {it.id for it in items})  # before anything is paid for
        reqs = [("chat", request_body(client, it.request), it.request.sample) for it in items]
        spent_before = read_ledger(_ledger(out))
        if client.budget_usd is not None:
            est = estimate_requests(reqs, client, price_factor=BATCH_PRICE_FACTOR)
            if spent_before + est.usd_high > client.budget_usd:
                raise ValueError(
                    f"--budget ${client.budget_usd:.2f}: the batch may cost up to ${est.usd_high:.4f} at the batch price "
                    f"(${spent_before:.4f} spent before); raise the budget or split the requests"
                )
        folder = Path(state_dir) if state_dir else RunDir(out.parent).batch_state(out.name)
        br = await submit_and_collect(reqs, client, folder, wait=wait, poll_seconds=poll_seconds,
                                      max_wait=max_wait, progress=progress, state_file=BATCH_STATE)
        replay = RecordingClient(client, use_cache=True,
                                 error="not answered by the Batch API yet (still running, failed or expired): run again",
                                 reasons=br.failures)
        if br.cost_usd:
            with spending([], _ledger(out)) as ledger:
                ledger.record(br.cost_usd, client.model)
        summary = await run_batch(requests_path, out, replay, items=items, locked=True)
        summary.batch = br
        return summary


# -- the command -----------------------------------------------------------------------------------
def run_requests(
    requests: Path,
    out: Path,
    role: Role,
    *,
    cache: Path | None = None,
    batch: dict[str, Any] | None = None,
    proceed: Callable[[Any, Path], bool] = lambda estimate, ledger: True,
    announce: Callable[[LLMClient], None] = lambda client: None,
    **settings: Any,
) -> BatchSummary | None:
    """``trek llm run``: the requests file through ``role``'s client into ``out``.

    Checks the output and every request before any call, builds the client of the folder of
    ``out`` (:meth:`RunDir.client`: ``cache`` or the folder's response cache, ``settings``:
    ``timeout``, ``max_retries``, ``budget_usd``, ``assume_output``, ``progress``, ``transport``),
    hands it to ``announce``, then asks ``proceed(estimate, ledger)`` (``False``: stop here, e.g. a
    dry run) and runs the requests live (:func:`run_batch`) or, with ``batch`` (the settings of
    :func:`run_openai_batch`), through the Batch API. Returns the summary,
    with :meth:`BatchSummary.report` saying what the client did.
    """
    from trek.llm.cache import LLMCache
    from trek.llm.estimate import estimate_requests
    from trek.llm.usage import BATCH_PRICE_FACTOR

    run = RunDir(out.parent)
    cache_path = cache or run.llm_cache
    check_output_path(out, requests, reads=[cache_path, role.prices])  # before the cache file is made beside it
    # checked whole before any call; a file is read again for each pass (no request is held),
    # a pipe read once and held
    items = read_requests(requests, default_model=role.model)
    client = run.client(role, cache=LLMCache(cache_path), **settings)
    announce(client)
    est = estimate_requests((it.request for it in items), client, label="trek llm run",
                            price_factor=BATCH_PRICE_FACTOR if batch is not None else 1.0,
                            assume_output=settings.get("assume_output"))
    if not proceed(est, _ledger(out)):
        return None
    if batch is not None:
        summary = run_sync(run_openai_batch(requests, out, client, items=items, progress=client.progress, **batch))
    else:
        summary = run_sync(run_batch(requests, out, client, items=items))
    summary.client_notes = _client_notes(client, summary)
    return summary


def _client_notes(client: LLMClient, summary: BatchSummary) -> list[str]:
    notes = [client.endpoint_summary()] if client.pooled else []
    if client.usage.calls:
        notes.append(f"tokens: {client.usage.prompt_tokens} in, {client.usage.completion_tokens} out; spent "
                     f"{client.spent_text()}" + (f" (${summary.spent_usd:.4f} for this output over all runs)"
                                                 if client.budget_usd is not None else ""))
    return notes
