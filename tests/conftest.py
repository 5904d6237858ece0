"""Fixtures shared by the search and agent tests."""

import pytest

from trek.datasets.mini import load as load_mini
from trek.pages import PageStore


@pytest.fixture(scope="module")
def mini():
    """The bundled demo benchmark."""
    return load_mini()


@pytest.fixture
def store(mini):
    """An in-memory page store holding the demo benchmark's documents."""
    s = PageStore()
    s.add_documents(mini.documents)
    return s
