"""Test helpers for Trek.

``FakeOpenAIServer`` and ``request_key`` live in :mod:`trek.testing.fake_openai`.
They are loaded lazily so that ``python -m trek.testing.fake_openai`` does not
import the module twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["FakeOpenAIServer", "request_key"]

if TYPE_CHECKING:
    from trek.testing.fake_openai import FakeOpenAIServer, request_key


def __getattr__(name: str) -> Any:
    if name in __all__:
        from trek.testing import fake_openai

        return getattr(fake_openai, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
