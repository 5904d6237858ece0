"""The opt-in rule of the fast inner loop (tests/_durations.py), run on a small test file."""

import pytest

TESTS = """
import pytest

def test_unmarked():
    assert True

@pytest.mark.slow
def test_marked():
    assert True

def test_failing():
    assert False
"""


@pytest.fixture
def inner(pytester, monkeypatch):
    pytester.makepyfile(test_inner=TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    slow: long\n")
    monkeypatch.delenv("TREK_CHECK_DURATIONS", raising=False)
    monkeypatch.delenv("TREK_SLOW_SECONDS", raising=False)
    return lambda: pytester.runpytest_inprocess(
        "-p", "_durations", "-q", "-p", "no:cacheprovider", "-p", "no:phoenix", "-W", "ignore::pytest.PytestAssertRewriteWarning"
    )


def test_off_by_default_even_over_the_limit(inner, monkeypatch):
    monkeypatch.setenv("TREK_SLOW_SECONDS", "0")  # the limit alone does not switch it on
    inner().assert_outcomes(passed=2, failed=1)


def test_on_an_unmarked_test_over_the_limit_fails_and_says_why(inner, monkeypatch):
    monkeypatch.setenv("TREK_CHECK_DURATIONS", "1")
    monkeypatch.setenv("TREK_SLOW_SECONDS", "0")  # every test is over a limit of 0 s
    result = inner()
    result.assert_outcomes(passed=1, failed=2)  # the slow-marked test passes; a real failure stays one
    result.stdout.fnmatch_lines(["*test_unmarked took * s (setup + call), over the 0 s limit*mark it*slow*"])


def test_on_a_test_under_the_limit_passes(inner, monkeypatch):
    monkeypatch.setenv("TREK_CHECK_DURATIONS", "1")
    monkeypatch.setenv("TREK_SLOW_SECONDS", "600")
    inner().assert_outcomes(passed=2, failed=1)
