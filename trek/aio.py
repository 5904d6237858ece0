"""The one concurrency style of Trek: :func:`fan_out` over an :class:`asyncio.TaskGroup`.

Every stage that runs many independent jobs (model calls, grading, answering questions,
TrekTrace cases, Ctrl baselines) goes through :func:`fan_out`: it runs ``fn(item)`` for each
item with at most ``limit`` jobs in flight, shows one progress bar (done/total plus whatever
``postfix()`` says: cache hits, tokens, dollars), calls ``on_result`` as each job finishes (for
checkpointing) and returns the results in input order. If a job raises, the task group cancels
the others, waits for them, and the first error is re-raised as itself (not wrapped in an
``ExceptionGroup``), so callers catch the error types they know. Nothing is left running.

Synchronous code enters the event loop only at entry points (CLI commands, notebook-facing
functions) through :func:`run_sync`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

__all__ = ["fan_out", "run_sync", "closing", "closing_run", "aclose_all"]

T = TypeVar("T")
R = TypeVar("R")


async def fan_out(
    items: Iterable[T],
    fn: Callable[[T], Awaitable[R]],
    *,
    limit: int | None = None,
    desc: str = "",
    unit: str = "it",
    progress: bool = True,
    postfix: Callable[[], str] | None = None,
    on_result: Callable[[int, R], None] | None = None,
    keep_results: bool = True,
    total: int | None = None,
) -> list[R]:
    """Run ``fn`` on every item concurrently and return the results in input order.

    Args:
        items: the jobs' inputs.
        fn: an async function of one item.
        limit: at most this many jobs in flight (``None``: no limit beyond what ``fn`` itself
            bounds, e.g. the LLM client's per-endpoint connection limit).
        desc, unit: the progress bar's label and unit.
        progress: show the bar (tqdm, auto-detecting notebooks).
        postfix: its text is shown after the counts; called while the bar is shown, at most
            once per refresh interval of the bar and once at the end.
        on_result: ``on_result(index, result)`` as each job finishes (in completion order).
        keep_results: return the results; ``False``: each result is only handed to
            ``on_result`` and released (an empty list is returned), so memory does not grow
            with the number of jobs. With a ``limit``, at most ``limit`` jobs exist at a time
            (the next is started as one finishes), whatever ``keep_results``.
        total: how many items ``items`` yields, when it is an iterator read as the jobs start
            (with ``keep_results=False`` and a ``limit``, no item is held beyond the jobs in
            flight); ``None``: ``items`` is made a list first (unless it is a sequence).

    Raises:
        The first exception any job raised, after every other job was cancelled and awaited.
    """
    seq: Iterable[T] = items if isinstance(items, Sequence) or (total is not None and not keep_results) \
        else list(items)
    count = total if total is not None and not isinstance(seq, Sequence) else len(seq)  # type: ignore[arg-type]
    results: list[Any] = [None] * count if keep_results else []
    sem = asyncio.Semaphore(limit) if limit else None
    if progress:
        from tqdm.auto import tqdm  # here: a run without a bar does not import it

        bar: Any = tqdm(total=count, desc=desc or None, unit=unit, leave=True, **bar_settings(tqdm))
    else:
        bar = _NO_BAR
    show_postfix = postfix is not None and not bar.disable
    next_postfix = 0.0

    async def one(i: int, item: T) -> None:
        nonlocal next_postfix
        try:
            res = await fn(item)
        finally:
            if sem is not None:
                sem.release()
        if keep_results:
            results[i] = res
        if on_result is not None:
            on_result(i, res)
        del res
        bar.update(1)
        if show_postfix and (now := time.monotonic()) >= next_postfix:
            next_postfix = now + bar.mininterval
            bar.set_postfix_str(postfix(), refresh=False)

    try:
        async with asyncio.TaskGroup() as tg:
            for i, item in enumerate(seq):
                if sem is not None:
                    await sem.acquire()  # a job is created only when it may run: bounded tasks
                tg.create_task(one(i, item))
    except BaseExceptionGroup as eg:
        raise _first_leaf(eg) from None
    finally:
        if show_postfix:
            bar.set_postfix_str(postfix(), refresh=False)
        bar.close()
    return results


#: Seconds between progress lines when standard error is not a terminal (a log file, a pipe).
LOG_INTERVAL = 60.0


def bar_settings(bar_class: Any = None) -> dict[str, Any]:
    """Keywords of a tqdm bar: none in a terminal or a notebook; elsewhere (standard error a log
    file or a pipe) a line at the start, at most one every :data:`LOG_INTERVAL` seconds, and one
    at the end, not one per update."""
    if "notebook" in getattr(bar_class, "__module__", "") or sys.stderr.isatty():
        return {}
    return {"mininterval": LOG_INTERVAL, "maxinterval": LOG_INTERVAL}


class _NoBar:
    """What :func:`fan_out` calls on its bar, doing nothing (``progress=False``)."""

    disable = True
    mininterval = 0.1

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass


_NO_BAR = _NoBar()


def _first_leaf(eg: BaseExceptionGroup) -> BaseException:
    first = eg.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def run_sync(coro: Awaitable[T]) -> T:
    """Run a coroutine from synchronous code, also inside a running loop (e.g. Jupyter).

    Outside an event loop this is :func:`asyncio.run`; inside one (a notebook cell), the
    coroutine runs to completion in a fresh loop on a worker thread. Use it only at entry points.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)  # type: ignore[arg-type]
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    # the worker thread runs in a copy of the caller's context (e.g. its prompt folder)
    t = threading.Thread(target=contextvars.copy_context().run, args=(target,), daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


async def aclose_all(resources: Iterable[Any]) -> None:
    """``aclose()`` (or ``close()``) every resource that is not ``None``, each once."""
    for r in {id(r): r for r in resources if r is not None}.values():
        closer = getattr(r, "aclose", None)
        if closer is not None:
            await closer()
        else:
            r.close()


@contextlib.asynccontextmanager
async def closing(*resources: Any) -> AsyncIterator[None]:
    """Close ``resources`` (clients, backends, stores) when the block ends, however it ends."""
    try:
        yield
    finally:
        await aclose_all(resources)


def closing_run(coro: Awaitable[T], *resources: Any) -> T:
    """Run ``coro`` to completion from synchronous code, then close ``resources``."""

    async def go() -> T:
        async with closing(*resources):
            return await coro

    return run_sync(go())
