"""Fixtures shared by several test files."""

import pytest
from _durations import (  # noqa: F401 - TREK_CHECK_DURATIONS=1: a test over 3 s must be marked slow
    pytest_configure,
    pytest_runtest_call,  # TREK_TIMINGS=N: wall against CPU of the N longest tests (these six)
    pytest_runtest_logreport,
    pytest_runtest_makereport,
    pytest_runtest_setup,
    pytest_runtest_teardown,
    pytest_sessionstart,
    pytest_terminal_summary,
)

from trek.datasets.mini import load as load_mini
from trek.pages import PageStore

pytest_plugins = ("pytester",)


@pytest.fixture(scope="module")
def mini():
    """The bundled demo benchmark."""
    return load_mini()


@pytest.fixture
def store(mini):
    """An in-memory page store holding the demo benchmark's search corpus (its hand-written pages)."""
    s = PageStore()
    s.add_documents(mini.corpus)
    return s


@pytest.fixture(scope="session")
def demo_runs(tmp_path_factory):
    """The offline demo runs ({name: run directory}), built once per test session."""
    from _scripts import load_script

    return load_script("demo_runs").build_demo_runs(tmp_path_factory.mktemp("demo-runs"))


@pytest.fixture
def use_prompts():
    """``use_prompts(folder)``: template overrides from ``folder`` for the rest of the test."""
    import contextlib

    from trek import templates

    with contextlib.ExitStack() as stack:
        yield lambda path: stack.enter_context(templates.prompts_folder(path))
