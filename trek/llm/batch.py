"""Batch runner: one chat request per JSONL line in, one result line per id out.

Input line: ``{"id": ..., "messages": [...], "model"?: str, "sample"?: int, "tools"?: [...],
...sampling parameters}``. Output line, in input order::

    {"id", "status": "ok" | "pending", "content", "usage", "cached", "error", "model",
     "request_key", "tool_calls"?}

Running the same command again resumes: ids already ``ok`` for the same request are kept
without a call, ``pending`` ones are tried again. The output file is rewritten atomically
(temporary file + rename), during the run at checkpoints and at the end, so it never holds a
torn or duplicate line. Answers that arrived before an interruption are in the cache, so a
re-run asks the endpoint for none of them again.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trek.llm.cache import request_key
from trek.llm.client import ChatRequest, LLMClient, LLMResult
from trek.types import RecordError, write_jsonl

__all__ = ["BatchItem", "BatchSummary", "load_requests", "run_batch"]

_ROLES = {"system", "developer", "user", "assistant", "tool"}
_RESERVED = {"id", "messages", "model", "sample", "tools"}


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

    def describe(self) -> str:
        return (
            f"{self.total} ids: {self.ok} ok, {self.pending} pending "
            f"({self.kept} kept from the previous output, {self.cache_hits} cache hits, "
            f"{self.http_calls} HTTP requests) -> {self.out}"
        )


def load_requests(path: str | os.PathLike[str], default_model: str | None = None) -> list[BatchItem]:
    """Read and check a requests file; every problem names the file, line and field."""
    p = Path(path)
    if not p.exists():
        raise RecordError(p, None, "file does not exist")
    items: list[BatchItem] = []
    seen: dict[str, int] = {}
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise RecordError(p, lineno, f"not valid JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(obj, dict):
                raise RecordError(p, lineno, "expected a JSON object")
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
                    raise RecordError(p, lineno, f"field 'messages.{j}': must be an object")
                if m.get("role") not in _ROLES:
                    raise RecordError(
                        p, lineno, f"field 'messages.{j}.role': must be one of {sorted(_ROLES)}, got {m.get('role')!r}"
                    )
                if "content" not in m and "tool_calls" not in m:
                    raise RecordError(p, lineno, f"field 'messages.{j}.content': missing")
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
            if params.get("stream"):
                raise RecordError(p, lineno, "field 'stream': streaming is not supported by the batch runner")
            if params.get("n") not in (None, 1):
                raise RecordError(p, lineno, "field 'n': use one line per sample with 'sample' instead of n > 1")
            items.append(
                BatchItem(rid, ChatRequest(messages=msgs, model=model, tools=tools, sample=sample, params=params, id=rid), lineno)
            )
    return items


def _read_previous(out: Path) -> dict[str, dict[str, Any]]:
    if not out.exists():
        return {}
    prev: dict[str, dict[str, Any]] = {}
    with out.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                raise RecordError(out, lineno, "previous output is not valid JSON; move it away to start over") from None
            if isinstance(obj, dict) and "id" in obj:
                prev[str(obj["id"])] = obj
    return prev


def _item_key(client: LLMClient, item: BatchItem) -> str:
    r = item.request
    body: dict[str, Any] = {"model": r.model, "messages": r.messages, **r.params}
    if r.tools:
        body["tools"] = r.tools
    return request_key(client.cache_request("chat", body, r.sample))


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
) -> BatchSummary:
    """Run every request not already answered in ``out_path`` and rewrite it atomically."""
    items = load_requests(requests_path, default_model=client.model)
    out = Path(out_path)
    prev = _read_previous(out)
    lines: dict[str, dict[str, Any]] = {}
    todo: list[BatchItem] = []
    for it in items:
        old = prev.get(it.id)
        if old and old.get("status") == "ok" and old.get("request_key") == _item_key(client, it):
            lines[it.id] = old
        else:
            todo.append(it)
    kept = len(lines)
    order = [it.id for it in items]
    last_write = time.monotonic()

    def checkpoint() -> None:
        write_jsonl(out, (lines[i] for i in order if i in lines))

    def on_result(i: int, res: LLMResult) -> None:
        nonlocal last_write
        lines[todo[i].id] = _line(todo[i], res)
        now = time.monotonic()
        if now - last_write >= checkpoint_seconds:
            checkpoint()
            last_write = now

    calls0, hits0 = client.http_calls, client.cache_hits
    try:
        await client.amap([it.request for it in todo], desc="trek llm run", on_result=on_result)
    finally:
        checkpoint()
        await client.aclose()
    n_ok = sum(1 for i in order if lines.get(i, {}).get("status") == "ok")
    return BatchSummary(
        total=len(items),
        ok=n_ok,
        pending=len(items) - n_ok,
        kept=kept,
        http_calls=client.http_calls - calls0,
        cache_hits=client.cache_hits - hits0,
        out=out,
    )


def run_batch_sync(*args: Any, **kw: Any) -> BatchSummary:
    return asyncio.run(run_batch(*args, **kw))
