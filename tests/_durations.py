"""The fast inner loop's rule, checked on request: a test that takes longer than
``SLOW_SECONDS`` (setup + call) carries ``@pytest.mark.slow``, so ``make check`` skips it.

Off by default: a timed test must not decide pass or fail in an ordinary run on a shared
machine. ``TREK_CHECK_DURATIONS=1 make check`` turns it on: an unmarked test over the limit
then fails with a message saying how long it took. ``TREK_SLOW_SECONDS`` changes the limit.
"""

from __future__ import annotations

import os

import pytest

SLOW_SECONDS = 3.0
_limit = pytest.StashKey[float | None]()
_spent = pytest.StashKey[float]()


def pytest_configure(config: pytest.Config) -> None:
    """Read the switch once, when the session starts (a test that changes the environment
    does not turn the rule on or off for itself)."""
    on = os.environ.get("TREK_CHECK_DURATIONS", "").strip() not in ("", "0")
    config.stash[_limit] = float(os.environ.get("TREK_SLOW_SECONDS", SLOW_SECONDS)) if on else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    limit = item.config.stash.get(_limit, None)
    if limit is None or item.get_closest_marker("slow") is not None or call.when == "teardown":
        return
    spent = item.stash.get(_spent, 0.0) + call.duration
    item.stash[_spent] = spent
    report = outcome.get_result()
    if call.when == "call" and report.passed and spent > limit:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} took {spent:.2f} s (setup + call), over the {limit:g} s limit of "
            "`make check`: mark it @pytest.mark.slow or make it faster"
        )
