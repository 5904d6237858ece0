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
    spent_here = item.stash.get(_phases, None)
    if spent_here is not None and call.when == "teardown":  # TREK_TIMINGS: the test's figures go with its report
        outcome.get_result().user_properties.append(("trek_timing", tuple(spent_here)))
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


# ---------------------------------------------------------------------------------------------
# Where the suite waits: ``TREK_TIMINGS=N`` prints the N tests with the most wall time, each with
# the CPU seconds of its process and of the child processes it waited for (setup, call and
# teardown; a test whose wall time is far above its CPU is waiting: a sleep, a poll, a timeout,
# a start-up on a busy machine). ``TREK_TIMINGS_FILE=path`` also writes every test's figures as
# JSON lines. Under pytest-xdist each worker measures its tests and the figures travel with the
# reports, so the summary covers them all.
_phases = pytest.StashKey[list]()
_timings = pytest.StashKey[list]()


def _timings_on() -> bool:
    return bool(os.environ.get("TREK_TIMINGS") or os.environ.get("TREK_TIMINGS_FILE"))


def _cpu() -> tuple[float, float]:
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system


def _measured(item: pytest.Item):
    if not _timings_on():
        yield
        return
    import time

    w0, (c0, k0) = time.perf_counter(), _cpu()
    yield
    w1, (c1, k1) = time.perf_counter(), _cpu()
    acc = item.stash.setdefault(_phases, [0.0, 0.0, 0.0])
    acc[0] += w1 - w0
    acc[1] += c1 - c0
    acc[2] += k1 - k0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    yield from _measured(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    yield from _measured(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem):
    yield from _measured(item)


def pytest_runtest_logreport(report) -> None:
    for key, value in getattr(report, "user_properties", ()):
        if key == "trek_timing" and _config is not None:
            wall, cpu, child = value
            _config.stash.setdefault(_timings, []).append(
                {"test": report.nodeid, "wall": round(wall, 3), "cpu": round(cpu, 3), "child_cpu": round(child, 3)})


_config: pytest.Config | None = None


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session) -> None:
    global _config
    _config = session.config


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    rows = config.stash.get(_timings, None)
    if not rows:
        return
    path = os.environ.get("TREK_TIMINGS_FILE")
    if path:
        import json

        with open(path, "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")
    n = int(os.environ.get("TREK_TIMINGS") or 30)
    wall = sum(r["wall"] for r in rows)
    cpu = sum(r["cpu"] + r["child_cpu"] for r in rows)
    tr = terminalreporter
    tr.section(f"wall against CPU, the {min(n, len(rows))} longest of {len(rows)} tests")
    tr.write_line(f"all tests: {wall:.1f} s wall, {cpu:.1f} s CPU (their processes and children), "
                  f"load average {os.getloadavg()[0]:.1f} at the end")
    tr.write_line(f"{'wall':>7} {'cpu':>7} {'child':>7} {'wait':>7}  test")
    for r in sorted(rows, key=lambda r: -r["wall"])[:n]:
        wait = r["wall"] - r["cpu"] - r["child_cpu"]
        tr.write_line(f"{r['wall']:7.2f} {r['cpu']:7.2f} {r['child_cpu']:7.2f} {wait:7.2f}  {r['test']}")
