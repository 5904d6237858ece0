"""The one retry policy of Trek (tenacity): capped, jittered exponential backoff that waits at
least as long as a ``Retry-After`` the service sent.

The LLM client and the search backends both retry through :func:`retrying`; what counts as
retryable is decided by the caller (the exception types it raises for transient failures), and
:func:`retry_after` reads how long a service asked to wait.
A call that still fails after the last attempt raises its last error: callers turn that into
a *pending* outcome, never into an answer.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as _dt
import random
from collections.abc import Awaitable, Callable
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # tenacity is imported on the first retry (most runs never need it)
    from tenacity import RetryCallState

__all__ = ["backoff", "retry_after", "retrying"]

T = TypeVar("T")


def retry_after(headers: Any) -> float | None:
    """Seconds a reply's headers ask to wait: ``retry-after-ms``, else ``Retry-After`` in seconds
    or as an HTTP date; ``None`` when they say nothing readable."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        ra = headers.get("retry-after")
        if ra is None:
            return None
        try:
            return max(0.0, float(ra))
        except ValueError:
            when = parsedate_to_datetime(ra)
            return max(0.0, (when - _dt.datetime.now(when.tzinfo)).total_seconds())
    except (TypeError, ValueError):
        return None


def backoff(base: float, cap: float, rng: random.Random) -> Callable[[RetryCallState], float]:
    """Seconds before attempt n+1: uniform in ``[d/2, d]`` with ``d = min(cap, base * 2**(n-1))``,
    and at least the error's ``retry_after`` attribute (itself capped at ``cap``)."""

    def wait(state: RetryCallState) -> float:
        d = min(cap, base * (2 ** (state.attempt_number - 1)))
        delay = rng.uniform(d / 2, d)
        err = state.outcome.exception() if state.outcome else None
        retry_after = getattr(err, "retry_after", None)
        return max(delay, min(float(retry_after), cap)) if retry_after is not None else delay

    return wait


async def retrying(
    fn: Callable[[], Awaitable[T]],
    *,
    retry_on: tuple[type[BaseException], ...],
    max_retries: int,
    wait: Callable[[RetryCallState], float],
) -> T:
    """``await fn()``, retried up to ``max_retries`` times while it raises one of ``retry_on``;
    any other exception propagates at once; the last retryable error is re-raised as itself.

    The first attempt runs bare (most calls succeed at once, and building tenacity's machinery
    costs a fan-out of thousands of calls measurable time); after a retryable failure tenacity
    takes over with the same policy: ``wait`` sees the attempt numbers it would have seen."""
    try:
        return await fn()
    except retry_on as e:
        if max_retries < 1:
            raise
        from tenacity import RetryCallState

        first = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
        first.set_exception((type(e), e, e.__traceback__))
    await asyncio.sleep(wait(first))

    def later(state: RetryCallState) -> float:  # attempt n of tenacity's loop is attempt n + 1
        shifted = copy.copy(state)
        shifted.attempt_number = state.attempt_number + 1
        return wait(shifted)

    from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

    async for attempt in AsyncRetrying(
        retry=retry_if_exception_type(retry_on), stop=stop_after_attempt(max_retries), wait=later, reraise=True
    ):
        with attempt:
            return await fn()
    raise AssertionError("unreachable")  # pragma: no cover
