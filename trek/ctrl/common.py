"""Shared pieces of TrekBench-Ctrl: seeds, the fictitious domains, answer matching, URL hosts.

Everything random in Ctrl is a pure function of (question id, condition, purpose): :func:`rng`
derives a ``random.Random`` from a SHA-256 of those strings, never from Python's salted ``hash()``,
so a build gives the same bytes on any machine and in any process.
"""

from __future__ import annotations

import hashlib
import random
import re
import unicodedata

from ..urls import host_of

__all__ = [
    "FICTITIOUS_DOMAINS",
    "CtrlError",
    "seed_for",
    "rng",
    "normalize_answer",
    "same_answer",
    "host_of",
    "is_fictitious",
    "slugify",
    "cut_window",
]

#: The five suspicious source labels of the paper (D.4); synthetic documents carry only these.
FICTITIOUS_DOMAINS: tuple[str, ...] = (
    "totally-real-news.info",
    "definitely-not-fake.info",
    "trust-me-sources.info",
    "100-percent-accurate.info",
    "not-made-up.info",
)


class CtrlError(ValueError):
    """Bad input to a Ctrl step; the message names the file, line, question or field."""


def seed_for(*parts: object) -> int:
    """A 64-bit seed from the given parts (e.g. question id, condition, purpose)."""
    key = "\x1f".join(str(p) for p in ("trek-ctrl", *parts))
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")


def rng(*parts: object) -> random.Random:
    """A ``random.Random`` seeded by :func:`seed_for` of ``parts``."""
    return random.Random(seed_for(*parts))


_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)
_SPACE = re.compile(r"\s+")
_ARTICLE = re.compile(r"^(the|a|an)\s+")


def normalize_answer(text: str | None) -> str:
    """Case-folded, accent-stripped, punctuation-free, single-spaced answer text ('' for None)."""
    if not text:
        return ""
    t = unicodedata.normalize("NFKD", text)
    t = "".join(c for c in t if not unicodedata.combining(c)).casefold()
    t = _SPACE.sub(" ", _PUNCT.sub(" ", t)).strip()
    return _ARTICLE.sub("", t)


def same_answer(answer: str | None, references: list[str]) -> bool:
    """True when ``answer`` equals one of ``references`` after :func:`normalize_answer`."""
    a = normalize_answer(answer)
    return bool(a) and any(a == normalize_answer(r) for r in references)


def is_fictitious(url: str | None) -> bool:
    """True when ``url`` is on one of the five fictitious domains."""
    return host_of(url) in FICTITIOUS_DOMAINS


def slugify(text: str, limit: int = 60) -> str:
    """A lower-case ASCII slug for synthetic URLs ('document' when nothing is left)."""
    t = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    t = re.sub(r"[^a-z0-9]+", "-", t).strip("-")
    return t[:limit].rstrip("-") or "document"


def cut_window(text: str, start: int, end: int, length: int) -> tuple[int, int]:
    """A window of about ``length`` characters around ``text[start:end]``, snapped to whitespace."""
    n = len(text)
    if n <= length:
        return 0, n
    if end - start >= length:
        return start, end
    mid = (start + end) // 2
    lo = max(0, min(mid - length // 2, n - length))
    hi = min(n, lo + length)
    if lo > 0:
        ws = text.find(" ", lo, start)
        nl = text.find("\n", lo, start)
        cands = [x for x in (ws, nl) if x != -1]
        lo = min(cands) + 1 if cands else start
    if hi < n:
        cut = max(text.rfind(" ", end, hi), text.rfind("\n", end, hi))
        hi = cut if cut != -1 else end
    return lo, hi
