"""Batch runner: one chat request per JSONL line in, one result line per id out.

Input line: ``{"id": ..., "messages": [...], "model"?: str, "sample"?: int, "tools"?: [...],
...sampling parameters}``. Output line, in input order::

    {"id", "status": "ok" | "pending" | "failed", "content", "usage", "cached", "error", "model",
     "request_key", "tool_calls"?}

Running the same command again resumes: ids already ``ok`` for the same request are kept
without a call, ``pending`` and ``failed`` ones are tried again. Results are appended to the output
as they finish (a journal, :mod:`trek.journal`, synced at checkpoints), and the output is
rewritten once at the end (temporary file + rename): one line per id, in input order. A ``kill
-9`` leaves at most a partial last line (dropped with a warning on the next run) and possibly
superseded lines (the last line of an id wins). Answers that arrived before an interruption are
in the cache, so a re-run asks the endpoint for none of them again.

Every request is checked before any call: a malformed field (a message ``content`` that is
neither text nor a list of parts, ``temperature: "hot"``, ``max_tokens: -5``) is an error naming
the file, line, id and field. A request the endpoint rejects for itself alone (a 400 such as a
message too long for the model, a 413 body too large) comes out ``failed`` with the endpoint's
reason and the file, line and id; the other ids go on.

Paid results are never discarded silently. Before any call the runner refuses (with
:class:`BatchError` or :class:`~trek.outputs.OutputError`) an ``--out`` that is the requests
file (or any file the run reads), a folder, a device or a pipe, or under a file; an output that
another run is writing (a lock file ``.<out>.lock`` held for the whole
run; the operating system releases it when a process dies); and an output holding ``ok`` ids
that the requests file no longer lists. The previous output is streamed: only an index of
ids is held in memory, kept lines are copied from the file.

A budget caps the spend recorded for one output across resumes: every fresh call is recorded
in the spend ledger ``.<out>.spend`` beside it (:mod:`trek.llm.ledger`: reserved at its worst
case before it is sent, settled with its price), so a resumed run spends only what is left,
also after a ``kill -9``. Delete the ledger to start a new budget for the same output.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from trek.journal import Journal
from trek.llm.cache import request_key
from trek.llm.client import ChatRequest, LLMClient, LLMResult
from trek.llm.ledger import ledger_path, spending
from trek.outputs import check_out
from trek.runs import RunLockedError, lock_file
from trek.types import RecordError, iter_json_lines, write_jsonl

__all__ = ["BatchError", "BatchItem", "BatchSummary", "load_requests", "run_batch"]

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

    def describe(self) -> str:
        failed = f", {self.failed} failed (rejected by the endpoint)" if self.failed else ""
        return (
            f"{self.total} ids: {self.ok} ok, {self.pending} pending{failed} "
            f"({self.kept} kept from the previous output, {self.cache_hits} cache hits, "
            f"{self.http_calls} HTTP requests) -> {self.out}"
        )


def load_requests(path: str | os.PathLike[str], default_model: str | None = None) -> list[BatchItem]:
    """Read and check a requests file; every problem names the file, line and field."""
    p = Path(path)
    items: list[BatchItem] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_json_lines(p, pipes=True):  # a pipe (/dev/stdin) is read once
        rid = obj.get("id")
        if rid is None or (isinstance(rid, str) and not rid.strip()) or isinstance(rid, bool):
            raise RecordError(p, lineno, "field 'id': missing or empty")
        if not isinstance(rid, str | int):
            raise RecordError(p, lineno, f"field 'id': must be a string or integer, got {type(rid).__name__}")
        rid = str(rid)
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
        items.append(
            BatchItem(rid, ChatRequest(messages=msgs, model=model, tools=tools, sample=sample, params=params, id=rid), lineno)
        )
    return items


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


class _Previous:
    """An earlier output, streamed: ``{id: (status, request_key)}`` plus where each line is.

    Kept lines are read back from the open file one at a time (the open handle keeps the old
    file readable after the output is atomically replaced), so memory does not grow with it.
    """

    def __init__(self, out: Path):
        self.index: dict[str, tuple[str | None, str | None, int]] = {}
        self._fh: IO[bytes] | None = None
        self._offsets: list[int] = []
        self._line_ids: list[str | None] = []
        if not out.exists():
            return
        try:
            for lineno, obj in iter_json_lines(out, torn_tail=True):
                if "id" not in obj:
                    raise RecordError(out, lineno, "line has no 'id'")
                self.index[str(obj["id"])] = (obj.get("status"), obj.get("request_key"), lineno)
                self._line_ids.append(str(obj["id"]))
        except RecordError as e:
            raise BatchError(f"--out is not an earlier output of `trek llm run` ({e}); move it away or pick another") from None
        self._fh = out.open("rb")
        pos, last = 0, b"\n"
        for raw in self._fh:  # line starts, to seek to a kept line later
            self._offsets.append(pos)
            pos += len(raw)
            last = raw
        self._whole = last.endswith(b"\n")  # no partial last line left by a killed run

    def canonical(self, order: list[str], ids: set[str]) -> bool:
        """The file is exactly one line per id of ``ids``, in ``order`` (nothing to compact)."""
        want = [rid for rid in order if rid in ids]
        return self._fh is not None and self._whole and self._line_ids == want

    def line(self, rid: str) -> dict[str, Any]:
        assert self._fh is not None
        self._fh.seek(self._offsets[self.index[rid][2] - 1])
        return json.loads(self._fh.readline())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[None]:
    """Hold ``.<out>.lock`` for the run; a second run on the same output is refused."""
    lock = out.with_name(f".{out.name}.lock")
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(lock_file(lock, what=f"{out} (lock {lock.name})", reentrant=False,
                                          hint="wait for it or use another --out"))
        except RunLockedError as e:
            raise BatchError(f"another run is writing {out}: {e}") from None
        except RecordError:
            raise BatchError(f"cannot write in {out.parent} for --out") from None
        yield


def check_output_path(out: Path, requests_path: Path | None = None,
                      reads: Iterable[str | os.PathLike[str] | None] = ()) -> None:
    """Refuse an output path that is the requests file or another file the run reads (``reads``:
    the cache, the price table), a folder, a device or a pipe (:func:`trek.outputs.check_out`),
    or in a folder we cannot create."""
    if requests_path is not None and out.exists() and requests_path.exists() and out.samefile(requests_path):
        raise BatchError(f"--out {out} is the requests file; writing it would destroy the requests")
    check_out(out, reads=[requests_path, *reads], example="responses.jsonl")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BatchError(f"cannot create the folder of --out {out} ({e.strerror})") from None


def _ledger(out: Path) -> Path:
    """The spend ledger of an output (an older ``.<out>.spent.json`` total is carried into it)."""
    led = ledger_path(out)
    legacy = out.with_name(f".{out.name}.spent.json")
    if legacy.exists() and not led.exists():
        try:
            spent = float(json.loads(legacy.read_text(encoding="utf-8"))["spent_usd"])
        except (OSError, ValueError, KeyError, TypeError):
            raise BatchError(f"{legacy} (the spend recorded for {out.name}) is unreadable; fix or delete it") from None
        if not spent >= 0:
            raise BatchError(f"{legacy}: spent_usd must be a non-negative number")
        led.write_text(json.dumps({"spent": "carried over", "usd": spent}) + "\n", encoding="utf-8")
        legacy.unlink()
    return led


def _item_key(client: LLMClient, item: BatchItem) -> str:
    from trek.llm.estimate import request_body

    return request_key(client.cache_request("chat", request_body(client, item.request), item.request.sample))


def _line(item: BatchItem, res: LLMResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": item.id,
        "status": res.status,
        "content": res.content if res.ok else None,
        "usage": res.usage.model_dump(),
        "cached": res.cached,
        "error": res.error,
        "model": res.model,
        "request_key": res.key,
    }
    if res.ok and res.tool_calls:
        out["tool_calls"] = res.tool_calls
    return out


async def run_batch(
    requests_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    client: LLMClient,
    *,
    checkpoint_seconds: float = 2.0,
    items: list[BatchItem] | None = None,
) -> BatchSummary:
    """Run every request not already answered in ``out_path`` and rewrite it atomically.

    ``items``: the requests file as :func:`load_requests` read it (a file is read once, so a
    pipe works); default: read it here. ``client.budget_usd`` (if set) caps the spend recorded
    for ``out_path`` over all runs. Raises :class:`BatchError` (before any call) when the run
    would put paid results at risk.
    """
    req_path, out = Path(requests_path), Path(out_path)
    cache = getattr(getattr(client, "cache", None), "path", None)
    check_output_path(out, req_path, reads=[cache])
    if items is None:
        items = load_requests(req_path, default_model=client.model)
    with _locked(out):
        prev = _Previous(out)
        try:
            return await _run(items, out, prev, client, checkpoint_seconds, req_path)
        finally:
            prev.close()


async def _run(
    items: list[BatchItem], out: Path, prev: _Previous, client: LLMClient, checkpoint_seconds: float,
    req_path: Path,
) -> BatchSummary:
    listed = {it.id for it in items}
    orphans = [rid for rid, (status, _, _) in prev.index.items() if status == "ok" and rid not in listed]
    if orphans:
        shown = ", ".join(orphans[:5]) + (", ..." if len(orphans) > 5 else "")
        raise BatchError(
            f"{out} holds {len(orphans)} answered ids that the requests file no longer lists ({shown}); "
            "put them back in the requests file, or write to a new --out"
        )
    kept_ids: set[str] = set()
    todo: list[BatchItem] = []
    for it in items:
        status, key, _ = prev.index.get(it.id, (None, None, 0))
        if status == "ok" and key == _item_key(client, it):
            kept_ids.add(it.id)
        else:
            todo.append(it)
    # what the new lines said (the lines themselves are only in the journal: memory stays small)
    new: dict[str, tuple[str, str | None]] = {}
    order = [it.id for it in items]
    last_write = time.monotonic()
    journal = Journal(out)

    def compact() -> None:
        """The output once more, one line per id in input order, read back from the journal."""
        journal.close()
        if not new and prev.canonical(order, kept_ids):
            return  # nothing made, and the file already is exactly the kept lines
        final = _Previous(out)
        try:
            write_jsonl(out, (final.line(rid) for rid in order if rid in new or rid in kept_ids))
        finally:
            final.close()

    def on_result(i: int, res: LLMResult) -> None:
        nonlocal last_write
        if res.status == "failed":  # rejected for itself alone: say which line of which file
            res.error = f"{req_path}, line {todo[i].line}, id '{todo[i].id}': {res.error}"
        line = _line(todo[i], res)
        new[todo[i].id] = (line["status"], line["error"])
        journal.add(line)
        if time.monotonic() - last_write >= checkpoint_seconds:
            journal.flush()
            last_write = time.monotonic()  # after the write: a slow checkpoint never triggers the next

    calls0, hits0 = client.http_calls, client.cache_hits
    with spending([client], _ledger(out)) as ledger:
        try:
            await client.amap([it.request for it in todo], desc="trek llm run", on_result=on_result, alone=True)
        finally:
            try:
                journal.flush()
                compact()
            finally:
                journal.close()
                await client.aclose()
    n_ok = len(kept_ids) + sum(1 for status, _ in new.values() if status == "ok")
    n_failed = sum(1 for status, _ in new.values() if status == "failed")
    return BatchSummary(
        total=len(items),
        ok=n_ok,
        pending=len(items) - n_ok - n_failed,
        kept=len(kept_ids),
        http_calls=client.http_calls - calls0,
        cache_hits=client.cache_hits - hits0,
        out=out,
        spent_usd=ledger.total_usd,
        failed=n_failed,
        errors=[error or "" for status, error in new.values() if status == "failed"],
    )
