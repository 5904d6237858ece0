"""The one retry policy (trek.retry): attempts, waits and errors, without sleeping for real."""

import asyncio

import pytest

from trek import retry


class Flaky(Exception):
    pass


def _run(fails, max_retries, monkeypatch, error=Flaky):
    calls, seen, slept = [], [], []

    async def fn():
        calls.append(1)
        if len(calls) <= fails:
            raise error(f"failure {len(calls)}")
        return "ok"

    def wait(state):
        seen.append((state.attempt_number, str(state.outcome.exception())))
        return 0.25 * state.attempt_number

    async def no_sleep(s):
        slept.append(s)

    monkeypatch.setattr(asyncio, "sleep", no_sleep)
    try:
        out = asyncio.run(retry.retrying(fn, retry_on=(Flaky,), max_retries=max_retries, wait=wait))
    except Exception as e:  # noqa: BLE001 - returned for the assertions
        out = e
    return out, len(calls), seen, [s for s in slept if s]


def test_a_call_that_succeeds_is_made_once(monkeypatch):
    assert _run(0, 3, monkeypatch) == ("ok", 1, [], [])


def test_waits_see_the_attempt_numbers_and_errors_in_order(monkeypatch):
    out, n, seen, slept = _run(3, 5, monkeypatch)
    assert out == "ok" and n == 4
    assert seen == [(1, "failure 1"), (2, "failure 2"), (3, "failure 3")]
    assert slept == [0.25, 0.5, 0.75]


def test_the_last_error_is_reraised_after_the_retries(monkeypatch):
    out, n, seen, slept = _run(10, 2, monkeypatch)
    assert isinstance(out, Flaky) and str(out) == "failure 3" and n == 3
    assert [a for a, _ in seen][:2] == [1, 2] and slept == [0.25, 0.5]  # no wait after the last attempt


def test_no_retries_and_other_errors_propagate_at_once(monkeypatch):
    out, n, _, _ = _run(1, 0, monkeypatch)
    assert isinstance(out, Flaky) and n == 1
    out, n, _, _ = _run(1, 3, monkeypatch, error=KeyError)
    assert isinstance(out, KeyError) and n == 1


def test_backoff_honours_retry_after_and_the_cap():
    import random

    from tenacity import RetryCallState

    class Slow(Exception):
        retry_after = 7.0

    w = retry.backoff(0.5, 5.0, random.Random(0))
    s = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})
    s.set_exception((Slow, Slow(), None))
    assert w(s) == 5.0  # Retry-After 7 s, capped at 5
    s.attempt_number = 3  # d = min(5, 0.5 * 4) = 2: drawn from [1, 2] unless Retry-After says more
    s.set_exception((Flaky, Flaky(), None))
    assert 1.0 <= w(s) <= 2.0
    assert pytest.approx(retry.retry_after({"retry-after-ms": "1500"})) == 1.5
