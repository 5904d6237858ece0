"""Small URL helpers every stage shares: the host of a URL and URL lists without repeats.

(URL *normalization* for the page store, which decides when two spellings are one page, lives
in :mod:`trek.pages`.)
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["host_of", "unique_urls"]


def host_of(url: str | None) -> str | None:
    """The lower-cased host of ``url`` without a leading ``www.`` (None for None or empty)."""
    if not url:
        return None
    host = (urlsplit(url).hostname or "").lower()
    return host[4:] if host.startswith("www.") else host


def unique_urls(urls: Iterable[str | None]) -> list[str]:
    """``urls`` in order with exact repeats and empty entries removed (the first one stays)."""
    return list(dict.fromkeys(u for u in urls if u))
