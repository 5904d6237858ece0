"""Rate-limit pacing: slow down before a provider's limit instead of after a 429.

OpenAI (and servers that copy it) send, with every reply, how much of the rate limit is left::

    x-ratelimit-limit-requests: 500        x-ratelimit-limit-tokens: 200000
    x-ratelimit-remaining-requests: 499    x-ratelimit-remaining-tokens: 199000
    x-ratelimit-reset-requests: 120ms      x-ratelimit-reset-tokens: 6m0s

"reset" is the time until the limit is back to full; the limit refills continuously, so the
refill rate is ``(limit - remaining) / reset`` (with half a unit taken off ``limit - remaining``,
since a whole-number ``remaining`` hides the fraction that has refilled). :class:`RatePacer` keeps one bucket per kind
(requests, tokens) from those headers. Before each request :meth:`RatePacer.reserve` takes what
the request will use and returns how long to wait first: zero while the bucket has room, then
``shortfall / rate`` — requests are spread at the rate the limit refills instead of being sent
in a burst that ends in 429s. The bookkeeping is conservative: a reply's ``remaining`` is taken
as not counting any request still in flight or waiting, so the client can only under-use the
limit, by at most its in-flight requests.

Without headers there is no pacing (a local server); ``max_connections`` stays the ceiling in
every case. Before the first reply nothing is known, so a first burst wider than the limit can
meet a few 429s, retried as usual. The pacer holds plain numbers and ``time.monotonic`` values (no asyncio objects), so
one pacer per endpoint is shared by every client and event loop that share an
:class:`~trek.llm.client.EndpointLimits`.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["RatePacer", "parse_reset", "format_reset"]

_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|us|µs|ns|h|m|s)")


def parse_reset(text: str | None) -> float | None:
    """Seconds in an OpenAI reset header: ``1s``, ``6m0s``, ``20ms``, ``1h2m3.5s``, ``0.5`` (bare
    seconds). ``None`` for a missing or unreadable value."""
    if text is None:
        return None
    s = str(text).strip().lower()
    if not s:
        return None
    try:
        v = float(s)
        return v if math.isfinite(v) and v >= 0 else None
    except ValueError:
        pass
    pos, total = 0, 0.0
    for m in _PART.finditer(s):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    return total if pos == len(s) and pos > 0 else None


def format_reset(seconds: float) -> str:
    """The OpenAI style of a reset duration: ``20ms`` below a second, else ``6m0.5s`` / ``1.25s``."""
    seconds = max(0.0, seconds)
    if seconds < 1.0:
        return f"{seconds * 1000:.1f}".rstrip("0").rstrip(".") + "ms"
    m, s = divmod(seconds, 60.0)
    sec = f"{s:.3f}".rstrip("0").rstrip(".")
    return f"{int(m)}m{sec}s" if m else f"{sec}s"


def _num(headers: Mapping[str, Any], name: str) -> float | None:
    v = headers.get(name)
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) and f >= 0 else None


class _Bucket:
    """What is left of one limit: ``remaining`` at ``t0`` plus refill, minus what was taken since."""

    def __init__(self, kind: str):
        self.kind = kind
        self.limit: float | None = None
        self.remaining: float | None = None
        self.rate: float | None = None  # refill per second
        self.reset_at = 0.0
        self.t0 = 0.0
        self.taken = 0.0  # reserved since t0 (not counted by the server's figure, we assume)

    def observe(self, remaining: float | None, reset: float | None, limit: float | None,
                outstanding: float, now: float) -> None:
        if remaining is None:
            return
        before = self.available(now)
        if limit is not None:
            self.limit = limit
        if reset is not None and reset > 0 and self.limit is not None and self.limit > remaining + 0.5:
            # ``remaining`` is a whole number while the bucket refills continuously: what is
            # really left lies in [remaining, remaining + 1); take the middle.
            self.rate = (self.limit - remaining - 0.5) / reset
        self.remaining = remaining
        self.reset_at = now + (reset or 0.0)
        self.t0 = now
        self.taken = outstanding
        # Replies can arrive out of order: a late one carries an older, higher figure. Both
        # views err low, so the lower one is kept.
        if before is not None and before < remaining - outstanding:
            self.taken = remaining - before

    def available(self, now: float) -> float | None:
        if self.remaining is None:
            return None
        refill = self.rate * (now - self.t0) if self.rate else 0.0
        left = self.remaining + refill
        if self.limit is not None:
            left = min(left, self.limit)
        return left - self.taken

    def wait_for(self, cost: float, now: float) -> float:
        """Seconds until ``cost`` fits (0 when it does); ``cost`` is taken either way."""
        avail = self.available(now)
        self.taken += cost
        if avail is None or avail >= cost:
            return 0.0
        if self.rate:
            return (cost - avail) / self.rate
        return max(0.0, self.reset_at - now)  # no refill rate known: wait for the reset

    def release(self, cost: float) -> None:
        self.taken = max(0.0, self.taken - cost)


class RatePacer:
    """Paces the requests to one endpoint from its rate-limit headers (see the module doc).

    ``reserve(tokens)`` before sending returns the seconds to wait; ``done(tokens)`` when a reply
    (or failure) arrives, then ``observe(headers)`` (429s included) updates the buckets. ``pace()`` describes the current pace for a progress bar.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self.requests = _Bucket("requests")
        self.tokens = _Bucket("tokens")
        self._outstanding_req = 0.0
        self._outstanding_tok = 0.0
        self.waited_s = 0.0
        self.paced = 0  # requests that had to wait
        self.last_wait = 0.0

    def reserve(self, tokens: float = 0.0) -> float:
        with self._lock:
            now = self._clock()
            w = max(self.requests.wait_for(1.0, now), self.tokens.wait_for(tokens, now))
            self._outstanding_req += 1.0
            self._outstanding_tok += tokens
            if w > 0:
                self.paced += 1
                self.waited_s += w
            self.last_wait = w
            return w

    def done(self, tokens: float = 0.0) -> None:
        with self._lock:
            self._outstanding_req = max(0.0, self._outstanding_req - 1.0)
            self._outstanding_tok = max(0.0, self._outstanding_tok - tokens)

    def observe(self, headers: Mapping[str, Any] | None) -> None:
        """Read the ``x-ratelimit-*`` headers of a reply (any case; missing ones are ignored)."""
        if not headers:
            return
        try:
            h = {str(k).lower(): v for k, v in headers.items()}
        except AttributeError:
            return
        with self._lock:
            now = self._clock()
            # Call done() for the reply first; counting every other outstanding request as
            # unseen by the server keeps the estimate on the safe side.
            self.requests.observe(
                _num(h, "x-ratelimit-remaining-requests"), parse_reset(h.get("x-ratelimit-reset-requests")),
                _num(h, "x-ratelimit-limit-requests"), self._outstanding_req, now,
            )
            self.tokens.observe(
                _num(h, "x-ratelimit-remaining-tokens"), parse_reset(h.get("x-ratelimit-reset-tokens")),
                _num(h, "x-ratelimit-limit-tokens"), self._outstanding_tok, now,
            )

    @property
    def limited(self) -> bool:
        return self.requests.remaining is not None or self.tokens.remaining is not None

    def pace(self) -> str:
        """``pace=12.5/s`` (the refill rate being followed, requests or token-limited) when
        requests are waiting for the limit, ``pace=free`` when not, ``""`` without headers."""
        if not self.limited:
            return ""
        if self.last_wait <= 0:
            return "pace=free"
        rates = []
        if self.requests.rate:
            rates.append(f"{self.requests.rate:.3g} req/s")
        if self.tokens.rate:
            rates.append(f"{self.tokens.rate:.3g} tok/s")
        return "pace=" + (", ".join(rates) if rates else f"wait {self.last_wait:.2g}s")
