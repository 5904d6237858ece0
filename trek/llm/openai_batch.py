"""OpenAI's Batch API: half the price, results within 24 hours, loaded into the response cache.

:func:`submit_and_collect` takes first-step requests (``(api, body, sample)``, as a
:class:`~trek.llm.estimate.RecordingClient` records them), and

1. leaves out those already in the response cache and those already in a batch still running;
2. writes the rest as a batch input file, one line per request in the wire format
   ``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}`` (``custom_id`` is the
   request's cache key), uploads it (``files.create(purpose="batch")``) and creates the batch
   (``batches.create(endpoint=..., completion_window="24h")``), at most 50,000 lines a batch;
3. records every step in ``openai-batches.json`` in the state folder (the run directory, or next
   to ``--out``) *before* going on: the uploaded file id, then the batch id, so a killed process
   resumes polling the batches it created and never submits a request twice;
4. polls until every batch is done (a progress bar of completed/failed items), downloads the
   output file and stores each ``200`` reply in the same :class:`~trek.llm.cache.LLMCache`, keyed
   exactly as :class:`~trek.llm.client.LLMClient` keys the live request. Items in the error file,
   or missing from an expired / failed / cancelled batch, are not stored: they stay pending and
   go into a new batch on the next run. Their reason is read from the batch's error file (the
   provider's status and message, e.g. ``500: The server had an error processing your request``
   or ``batch_expired: ...``), recorded with the batch in the state file and handed to the items'
   pending records (:attr:`BatchRun.failures`).

Every later step then reads the replies as cache hits (for the commands: a
:class:`~trek.llm.estimate.RecordingClient` with ``use_cache=True`` replays the cache and leaves
anything else pending instead of calling the endpoint). A stored reply carries
``"_trek": {"batch_id": ..., "price_factor": 0.5}`` beside the provider's fields, so its cost is
recorded at the batch price wherever it is read.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import openai

from trek.aio import bar_settings
from trek.llm.cache import request_key
from trek.llm.client import LLMClient, _http_client
from trek.llm.usage import BATCH_PRICE_FACTOR, usage_from_raw
from trek.retry import backoff, retry_after, retrying

__all__ = ["BatchRun", "MAX_BATCH_LINES", "submit_and_collect"]

MAX_BATCH_LINES = 50_000
TERMINAL = ("completed", "failed", "expired", "cancelled")
_URL = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}
_API = {v: k for k, v in _URL.items()}


@dataclass
class BatchRun:
    """What one :func:`submit_and_collect` did."""

    submitted: int = 0  # requests put in new batches now
    already_cached: int = 0
    in_running_batches: int = 0  # requests left out because a running batch holds them
    loaded: int = 0  # replies stored in the cache now
    failed: int = 0  # items failed or expired now: pending, re-submitted next run
    waiting: int = 0  # items of batches still running (wait=False or max_wait passed)
    cost_usd: float = 0.0  # batch-priced dollars of the replies loaded now
    batch_ids: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)  # batches created by an earlier process
    errors: list[str] = field(default_factory=list)
    #: custom_id (the request's cache key) -> why the batch did not answer it, from the provider
    failures: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [
            f"openai batch: {self.submitted} submitted, {self.already_cached} already cached, "
            f"{self.loaded} replies loaded into the cache (${self.cost_usd:.4f} at the batch price), "
            f"{self.failed} failed or expired (pending: run again to re-submit them)"
        ]
        if self.resumed:
            parts.append(f"resumed polling {', '.join(self.resumed)}")
        if self.waiting:
            parts.append(f"{self.waiting} items still in running batches ({', '.join(self.batch_ids)}): run again later")
        parts += self.errors[:5]
        reasons: dict[str, int] = {}
        for reason in self.failures.values():
            reasons[reason] = reasons.get(reason, 0) + 1
        parts += [f"{n} item(s) not answered: {reason}" for reason, n in list(reasons.items())[:5]]
        return "\n".join(parts)


class _State:
    """The state file (``trek.runs.BATCH_STATE`` in a run): every batch this folder submitted,
    written atomically at each step."""

    def __init__(self, folder: Path, endpoint: str, state_file: str):
        self.folder = folder
        self.path = folder / state_file
        self.endpoint = endpoint
        self.batches: list[dict[str, Any]] = []
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                self.batches = list(data["batches"])
                recorded = data.get("endpoint")
            except (OSError, ValueError, KeyError, TypeError):
                raise ValueError(f"{self.path} (the record of submitted batches) is unreadable; fix it before "
                                 "running again, or batches may be paid twice") from None
            if recorded and recorded != endpoint:
                raise ValueError(f"{self.path} records batches on {recorded}, not {endpoint}; use the same "
                                 "--base-url or another run folder")

    def save(self) -> None:
        from trek.outputs import atomic_write

        atomic_write(self.path, json.dumps({"endpoint": self.endpoint, "batches": self.batches}, indent=1) + "\n")

    def active(self) -> list[dict[str, Any]]:
        return [b for b in self.batches if not b.get("loaded")]

    def index(self, b: dict[str, Any]) -> dict[str, tuple[int, int]]:
        """Where each request of ``b`` is in its request file: custom id -> (byte offset, length).
        The bodies stay on disk (a batch holds up to 50,000 of them); :meth:`body` reads one."""
        from trek.jsonio import iter_jsonl_spans

        return {str(obj["custom_id"]): (offset, length)
                for _, offset, length, obj in iter_jsonl_spans(self.folder / b["request_file"])}

    def body(self, fh: IO[bytes], span: tuple[int, int]) -> dict[str, Any]:
        """The request body at ``span`` (from :meth:`index`) of the open request file ``fh``."""
        fh.seek(span[0])
        body: dict[str, Any] = json.loads(fh.read(span[1]))["body"]
        return body


def _failure_reason(item: dict[str, Any]) -> str:
    """The provider's reason for one line of a batch error (or output) file."""
    resp = item.get("response") if isinstance(item.get("response"), dict) else {}
    body = resp.get("body") if isinstance(resp.get("body"), dict) else {}
    err = body.get("error") if isinstance(body.get("error"), dict) else None
    err = err or (item.get("error") if isinstance(item.get("error"), dict) else {})
    head = resp.get("status_code") or err.get("code") or "error"
    message = err.get("message") or "no message"
    return f"{head}: {message}"


def _stamp(raw: dict[str, Any], batch_id: str) -> dict[str, Any]:
    return {**raw, "_trek": {"batch_id": batch_id, "price_factor": BATCH_PRICE_FACTOR}}


def _json_lines(fh: IO[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a downloaded result file, one line at a time."""
    from trek.jsonio import MAX_LINE

    for raw in iter(lambda: fh.readline(MAX_LINE + 1), b""):
        if raw.strip():
            x = json.loads(raw)
            if isinstance(x, dict):
                yield x


async def _download(sdk: openai.AsyncOpenAI, file_id: str, folder: Path) -> IO[bytes]:
    """The content of the provider's file ``file_id``, written to an unnamed temporary file in
    ``folder`` as it arrives (a result file is never held in memory), open at its start."""

    async def fetch() -> IO[bytes]:
        fh = tempfile.TemporaryFile(dir=folder)  # noqa: SIM115 - handed to the caller, who closes it
        try:
            async with sdk.files.with_streaming_response.content(file_id) as resp:
                async for chunk in resp.iter_bytes():
                    fh.write(chunk)
        except BaseException:
            fh.close()
            raise
        fh.seek(0)
        return fh

    return await _retrying(fetch)


#: Failures of a Batch API step worth retrying (a blip while polling must not end the run).
_TRANSIENT = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)
#: Retries of one step (upload, create, poll, download) and the backoff's base and cap, in seconds.
STEP_RETRIES, BACKOFF_BASE, BACKOFF_CAP = 3, 0.5, 30.0
_rng = random.Random()


async def _retrying(fn: Any) -> Any:
    """One SDK call under Trek's retry policy (:func:`trek.retry.retrying`): jittered, capped
    exponential backoff that waits at least the ``Retry-After`` the service sent."""

    async def attempt() -> Any:
        try:
            return await fn()
        except _TRANSIENT as e:
            e.retry_after = retry_after(getattr(getattr(e, "response", None), "headers", None))  # type: ignore[attr-defined]
            raise

    return await retrying(attempt, retry_on=_TRANSIENT, max_retries=STEP_RETRIES,
                          wait=backoff(BACKOFF_BASE, BACKOFF_CAP, _rng))


async def _submit(sdk: openai.AsyncOpenAI, state: _State, b: dict[str, Any]) -> None:
    """Upload ``b``'s request file (unless uploaded) and create its batch (unless created)."""
    if not b.get("input_file_id"):
        # the open file, not its bytes: the upload is read in chunks as it is sent
        with (state.folder / b["request_file"]).open("rb") as data:
            f = await _retrying(lambda: sdk.files.create(file=(b["request_file"], data, "application/jsonl"),
                                                         purpose="batch"))
        b["input_file_id"] = f.id
        state.save()
    if not b.get("id"):  # a process killed between create and save: adopt the batch it made
        page = await _retrying(lambda: sdk.batches.list(limit=100))
        made = next((x for x in page.data if x.input_file_id == b["input_file_id"]), None)
        if made is not None:
            b["id"], b["status"] = made.id, made.status
            state.save()
    if not b.get("id"):
        batch = await _retrying(lambda: sdk.batches.create(
            input_file_id=b["input_file_id"], endpoint=b["endpoint"], completion_window="24h",
            metadata={"created_by": "trek", "request_file": b["request_file"]},
        ))
        b["id"], b["status"] = batch.id, batch.status
        state.save()


async def _load(sdk: openai.AsyncOpenAI, client: LLMClient, state: _State, b: dict[str, Any], run: BatchRun) -> None:
    """Store a finished batch's replies in the cache; count the rest as failed (pending)."""
    assert client.cache is not None
    lines = state.index(b)
    answered: set[str] = set()
    reasons: dict[str, str] = {}
    if b.get("error_file_id"):
        with await _download(sdk, b["error_file_id"], state.folder) as errors:
            for item in _json_lines(errors):
                if item.get("custom_id") in lines:
                    reasons[item["custom_id"]] = client._scrub(_failure_reason(item))[:500]
    if b.get("output_file_id"):
        with await _download(sdk, b["output_file_id"], state.folder) as results, \
                (state.folder / b["request_file"]).open("rb") as request_file:
            _store_replies(client, state, b, run, _json_lines(results), request_file, lines, answered, reasons)
    _settle(state, b, run, lines, answered, reasons)


def _store_replies(client: LLMClient, state: _State, b: dict[str, Any], run: BatchRun, items: Iterator[dict[str, Any]],
                   request_file: IO[bytes], lines: dict[str, tuple[int, int]], answered: set[str],
                   reasons: dict[str, str]) -> None:
    """Put each answered line of a batch's output file in the cache (checked against its request)."""
    assert client.cache is not None
    samples = b.get("samples") or {}
    api = _API[b["endpoint"]]
    for item in items:
        cid, resp = item.get("custom_id"), item.get("response") or {}
        if cid not in lines:
            continue
        if resp.get("status_code") != 200 or not isinstance(resp.get("body"), dict):
            reasons.setdefault(cid, client._scrub(_failure_reason(item))[:500])
            continue
        body = state.body(request_file, lines[cid])
        creq = client.cache_request(api, body, int(samples.get(cid, 0)))
        if request_key(creq) != cid:  # pragma: no cover - the file was edited
            run.errors.append(f"{b['id']}: custom_id {cid[:12]} does not match its request; not loaded")
            continue
        client.cache.store(cid, creq, _stamp(resp["body"], b["id"]))
        usage = usage_from_raw(resp["body"])
        run.cost_usd += (client.prices.cost(body.get("model"), usage) or 0.0) * BATCH_PRICE_FACTOR
        answered.add(cid)


def _settle(state: _State, b: dict[str, Any], run: BatchRun, lines: dict[str, tuple[int, int]], answered: set[str],
            reasons: dict[str, str]) -> None:
    """Count a loaded batch's answers and failures and record it as loaded."""
    run.loaded += len(answered)
    run.failed += len(lines) - len(answered)
    if b.get("status") == "failed":
        run.errors.append(f"{b['id']} failed validation: {json.dumps(b.get('errors'))[:300]}")
    for cid in lines:
        if cid not in answered and cid not in reasons:  # in neither file: the batch itself ended
            reasons[cid] = f"the batch ended {b.get('status')} before answering it"
    b["failures"] = {cid: r for cid, r in reasons.items() if cid not in answered}
    run.failures.update({cid: f"{r} (batch {b['id']})" for cid, r in b["failures"].items()})
    b["loaded"] = True
    b["answered"] = len(answered)
    state.save()


async def submit_and_collect(
    requests: Sequence[tuple[str, dict[str, Any], int]],
    client: LLMClient,
    state_dir: str | os.PathLike[str],
    *,
    wait: bool = True,
    poll_seconds: float = 30.0,
    max_wait: float | None = None,
    progress: bool = True,
    max_lines: int = MAX_BATCH_LINES,
    state_file: str,
) -> BatchRun:
    """Send ``requests`` through the Batch API and load the replies into ``client.cache``.

    Resumes the batches recorded in ``state_dir`` (its file ``state_file``, the caller's
    :data:`trek.runs.BATCH_STATE`) first; submits only requests neither cached nor
    in a running batch. With ``wait`` it polls every ``poll_seconds`` until every batch is done
    (or ``max_wait`` seconds pass); without, it looks once (loading the batches already done) and
    returns.
    """
    if client.cache is None:
        raise ValueError("the Batch API path loads replies into the response cache: the client needs one")
    folder = Path(state_dir)
    state = _State(folder, client.base_url, state_file)
    run = BatchRun()
    running: set[str] = set()
    for b in state.active():
        running.update(state.index(b))
        if b.get("id"):
            run.resumed.append(b["id"])
    new: dict[str, tuple[str, dict[str, Any], int]] = {}
    for api, body, sample in requests:
        if api not in _URL:
            raise ValueError(f"the Batch API path takes chat or responses requests, not {api!r}")
        key = request_key(client.cache_request(api, body, sample))
        if client.cache.lookup(key) is not None:
            run.already_cached += 1
        elif key in running:
            run.in_running_batches += 1
        else:
            new.setdefault(key, (api, body, sample))
    by_api: dict[str, list[tuple[str, dict[str, Any], int]]] = {}
    for key, (api, body, sample) in new.items():
        by_api.setdefault(api, []).append((key, body, sample))
    for api, todo in by_api.items():
        for start in range(0, len(todo), max_lines):
            chunk = todo[start:start + max_lines]
            name = f"batch-{len(state.batches) + 1:04d}.jsonl"
            folder.mkdir(parents=True, exist_ok=True)
            with (folder / name).open("w", encoding="utf-8") as fh:
                for key, body, _ in chunk:
                    fh.write(json.dumps({"custom_id": key, "method": "POST", "url": _URL[api], "body": body},
                                        ensure_ascii=False) + "\n")
            state.batches.append({
                "request_file": name, "endpoint": _URL[api], "requests": len(chunk), "id": None,
                "input_file_id": None, "status": "local", "loaded": False, "created_at": time.time(),
                "samples": {key: s for key, _, s in chunk if s},
            })
            state.save()  # recorded before the upload: a crash after it resumes, never re-sends
            run.submitted += len(chunk)
    sdk = openai.AsyncOpenAI(base_url=client.request_base_url, api_key=client._api_key, max_retries=0, timeout=client.timeout,
                             http_client=_http_client(client.transport))
    try:
        for b in state.active():
            await _submit(sdk, state, b)
        run.batch_ids = [b["id"] for b in state.active()]
        # without waiting: one look, loading whatever has finished already
        await _poll(sdk, client, state, run, poll_seconds, max_wait if wait else 0.0, progress and wait)
        run.waiting = sum(b["requests"] for b in state.active())
    except openai.APIStatusError as e:
        raise ValueError(client._scrub(f"the Batch API refused a step ({e.status_code}): {e.message}")) from None
    finally:
        await sdk.close()
    return run


async def _poll(
    sdk: openai.AsyncOpenAI, client: LLMClient, state: _State, run: BatchRun,
    poll_seconds: float, max_wait: float | None, progress: bool,
) -> None:
    from tqdm.auto import tqdm

    active = state.active()
    total = sum(b["requests"] for b in active)
    bar = tqdm(total=total, desc="openai batch", unit="req", disable=not progress or not active, leave=True,
               **bar_settings(tqdm))
    t0 = time.monotonic()
    try:
        while True:
            done = 0
            for b in state.active():
                batch = await _retrying(lambda b=b: sdk.batches.retrieve(b["id"]))
                obj = batch.model_dump()
                counts = obj.get("request_counts") or {}
                b.update(status=obj["status"], output_file_id=obj.get("output_file_id"),
                         error_file_id=obj.get("error_file_id"), request_counts=counts, errors=obj.get("errors"))
                if obj["status"] in TERMINAL:
                    state.save()
                    await _load(sdk, client, state, b, run)
            for b in state.batches:
                if b.get("id") in run.batch_ids:
                    c = b.get("request_counts") or {}
                    done += b["requests"] if b.get("loaded") else int(c.get("completed", 0)) + int(c.get("failed", 0))
            bar.n = min(done, total)
            bar.set_postfix_str(", ".join(sorted({str(b.get("status")) for b in state.active()})) or "done", refresh=True)
            if not state.active():
                return
            if max_wait is not None and time.monotonic() - t0 >= max_wait:
                return
            await asyncio.sleep(poll_seconds)
    finally:
        bar.close()
