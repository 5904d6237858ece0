"""Rate-limit pacing: slow down before a provider's limit instead of after a 429.

OpenAI (and servers that copy it) send, with every reply, how much of the rate limit is left::

    x-ratelimit-limit-requests: 500        x-ratelimit-limit-tokens: 200000
    x-ratelimit-remaining-requests: 499    x-ratelimit-remaining-tokens: 199000
    x-ratelimit-reset-requests: 120ms      x-ratelimit-reset-tokens: 6m0s

"reset" is the time until the limit is back to full; the limit refills continuously, so the
refill rate is ``(limit - remaining) / reset`` (within one unit: a whole-number ``remaining``
hides the fraction that has refilled, so the bounds of successive replies are intersected).
:class:`RatePacer` keeps one bucket per kind (requests, tokens). Before each request
:meth:`RatePacer.reserve` takes what the request will use and returns how long to wait first:
zero while the bucket has room, then ``shortfall / rate``, so requests are spread at the rate the
limit refills instead of being sent in a burst that ends in 429s. Each reservation gets a ticket
(how much was reserved up to and including it); a reply's ``remaining`` counts its own request
and those before it, so the units reserved after its ticket are the ones still to subtract.
Replies that arrive out of order are therefore read correctly, and the refill between the
server's figure and its arrival is left out: the pacer errs on the slow side.

Without headers there is no pacing (a local server); ``max_connections`` stays the ceiling in
every case. Before the first reply nothing is known, so a first burst wider than the limit can
meet a few 429s, retried as usual. The pacer holds plain numbers and ``time.monotonic`` values
(no asyncio objects), so one pacer per endpoint is shared by every client and event loop that
share an :class:`~trek.llm.client.EndpointLimits`.
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
    """One limit as the client sees it.

    ``total`` counts every unit reserved so far, ``sent`` the units of requests sent. A reply
    tells what was ``remaining`` when the server took its request, counting the requests sent
    before it (its ticket: ``sent`` when it went out); the units reserved but not in that count
    (``total`` minus the ticket: waiting, or sent later) are still to subtract. What is left now
    is that ``remaining``, plus the refill since the reply came, minus those units.
    """

    def __init__(self, kind: str):
        self.kind = kind
        self.limit: float | None = None
        self.remaining: float | None = None
        self.rate: float | None = None  # refill per second (the middle of what the replies allow)
        self.rate_lo, self.rate_hi = 0.0, math.inf
        self.reset_at = 0.0
        self.t0 = 0.0
        self.total = 0.0  # units reserved, ever
        self.sent = 0.0  # units of the requests sent, ever
        self.seen = 0.0  # ``sent`` up to the request of the last reply read

    def observe(self, remaining: float | None, reset: float | None, limit: float | None,
                ticket: float, now: float) -> None:
        if remaining is None:
            return
        if limit is not None:
            if limit != self.limit:
                self.rate_lo, self.rate_hi = 0.0, math.inf  # a new limit: learn its rate afresh
            self.limit = limit
        if reset is not None and reset > 0 and self.limit is not None and self.limit > remaining:
            self._learn_rate(self.limit, remaining, reset)
        self.remaining = remaining
        self.reset_at = now + (reset or 0.0)
        self.t0 = now
        self.seen = ticket

    def _learn_rate(self, limit: float, remaining: float, reset: float) -> None:
        """Narrow the refill rate down. ``remaining`` is a whole number while the bucket refills
        continuously, so what is really left lies in [remaining, remaining + 1): one reply only
        bounds the rate to ``[(limit - remaining - 1) / reset, (limit - remaining) / reset]``. The
        rate is constant, so the bounds of successive replies are intersected; the estimate is
        the middle (the upper bound halved while nothing better is known). Bounds that no longer
        meet (a limit that changed) start over."""
        lo, hi = max(0.0, limit - remaining - 1) / reset, (limit - remaining) / reset
        nlo, nhi = max(self.rate_lo, lo), min(self.rate_hi, hi)
        if nlo > nhi * 1.02:  # 2 %: reset times are rounded to the millisecond
            nlo, nhi = lo, hi
        self.rate_lo, self.rate_hi = nlo, max(nhi, nlo)
        self.rate = (self.rate_lo + self.rate_hi) / 2

    def available(self, now: float) -> float | None:
        if self.remaining is None:
            return None
        refill = self.rate * (now - self.t0) if self.rate else 0.0
        left = self.remaining + refill
        if self.limit is not None:
            left = min(left, self.limit)
        return left - (self.total - self.seen)

    def reserve(self, cost: float, now: float) -> float:
        """Take ``cost`` units; the seconds until they are there (0 when they are)."""
        avail = self.available(now)
        self.total += cost
        if avail is None or avail >= cost:
            return 0.0
        if self.rate:
            return (cost - avail) / self.rate
        return max(0.0, self.reset_at - now)  # no refill rate known: wait for the reset


class RatePacer:
    """Paces the requests to one endpoint from its rate-limit headers (see the module doc).

    ``wait = reserve(tokens)`` (sleep ``wait`` seconds), ``ticket = send(tokens)`` right before
    sending, ``observe(headers, ticket)`` with every reply, 429s included. ``pace()`` describes
    the current pace for a progress bar.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self.requests = _Bucket("requests")
        self.tokens = _Bucket("tokens")
        self.waited_s = 0.0
        self.paced = 0  # requests that had to wait
        self.last_wait = 0.0

    def reserve(self, tokens: float = 0.0) -> float:
        """Reserve one request of ``tokens`` tokens; the seconds to wait before sending it."""
        with self._lock:
            now = self._clock()
            w = max(self.requests.reserve(1.0, now), self.tokens.reserve(tokens, now))
            if w > 0:
                self.paced += 1
                self.waited_s += w
            self.last_wait = w
            return w

    def send(self, tokens: float = 0.0) -> tuple[float, float, float]:
        """A reserved request goes out now: its ticket for :meth:`observe`. Requests reach the
        server in the order they are sent, not the order they were reserved (a request reserved
        later can get an earlier slot after new headers arrive)."""
        with self._lock:
            self.requests.sent += 1.0
            self.tokens.sent += tokens
            return self.requests.sent, self.tokens.sent, tokens

    def observe(
        self, headers: Mapping[str, Any] | None, ticket: tuple[float, float, float] | None = None,
        *, counted: bool = True,
    ) -> None:
        """Read the ``x-ratelimit-*`` headers of the reply to the request holding ``ticket`` (any
        case; missing ones are ignored). Without a ticket every reservation counts as seen.
        ``counted=False`` for a 429: the server did not count the rejected request itself."""
        if not headers:
            return
        try:
            h = {str(k).lower(): v for k, v in headers.items()}
        except AttributeError:
            return
        with self._lock:
            now = self._clock()
            req_t, tok_t, own = ticket if ticket is not None else (self.requests.sent, self.tokens.sent, 0.0)
            if not counted:
                req_t, tok_t = req_t - 1.0, tok_t - own
            self.requests.observe(
                _num(h, "x-ratelimit-remaining-requests"), parse_reset(h.get("x-ratelimit-reset-requests")),
                _num(h, "x-ratelimit-limit-requests"), req_t, now,
            )
            self.tokens.observe(
                _num(h, "x-ratelimit-remaining-tokens"), parse_reset(h.get("x-ratelimit-reset-tokens")),
                _num(h, "x-ratelimit-limit-tokens"), tok_t, now,
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
