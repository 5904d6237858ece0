"""What an endpoint allows: connections in flight and rate limits, shared by its clients.

:class:`EndpointLimits` is the object clients of one server share (LLM clients, search
backends, the page fetcher): one ``max_connections`` semaphore per endpoint and event loop, and
one :class:`RatePacer` per endpoint. It depends on nothing else in Trek, so every module that
talks to a server can use it.

Rate-limit pacing: slow down before a provider's limit instead of after a 429. OpenAI (and
servers that copy it) send, with every reply, how much of the rate limit is left::

    x-ratelimit-limit-requests: 500        x-ratelimit-limit-tokens: 200000
    x-ratelimit-remaining-requests: 499    x-ratelimit-remaining-tokens: 199000
    x-ratelimit-reset-requests: 120ms      x-ratelimit-reset-tokens: 6m0s

"reset" is the time until the limit is back to full; the limit refills continuously, so the
refill rate is ``(limit - remaining) / reset`` (within one unit: a whole-number ``remaining``
hides the fraction that has refilled, so the bounds of successive replies are intersected).
:class:`RatePacer` keeps one bucket per kind (requests, tokens). Right before each attempt is
sent, :meth:`RatePacer.reserve` takes what that attempt will use (one request and its
estimated tokens) and returns how long to wait first: zero while the bucket has room, then
``shortfall / rate``, so requests are spread at the rate the limit refills instead of being
sent in a burst that ends in 429s. Each reservation gets a ticket (how much was reserved up to
and including it); a reply's ``remaining`` counts its own request and those before it, so the
units reserved after its ticket are the ones still to subtract. Replies that arrive out of
order are therefore read correctly, and the refill between the server's figure and its arrival
is left out: the pacer errs on the slow side.

Before the first reply nothing is known. A pacer given :class:`StartLimits` assumes them until
then: a full bucket of that many units refilling over the window, as a provider's per-minute
limit does, so a first burst wider than a small limit waits instead of meeting 429s. The first
reply's headers replace the assumption; a reply without rate-limit headers ends it (a server
that does not say its limits, e.g. a local one, is not paced). ``max_connections`` stays the
ceiling in every case. The pacer holds plain numbers and ``time.monotonic`` values (no asyncio
objects), so one pacer per endpoint is shared by every client and event loop that share an
:class:`EndpointLimits`.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_START_LIMITS", "EndpointLimits", "RatePacer", "StartLimits", "format_reset", "parse_reset"]

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


@dataclass(frozen=True)
class StartLimits:
    """The rate limits a pacer assumes for an endpoint until its first reply says what they are.

    ``requests`` and ``tokens`` are bucket sizes refilling over ``window_s`` seconds (a
    provider's per-minute limits with the default window); ``None`` assumes nothing for that
    kind. Pick them at or below the smallest limit the endpoint may have: a first burst larger
    than the real limit meets 429s (retried as usual)."""

    requests: float | None = None
    tokens: float | None = None
    window_s: float = 60.0

    def __post_init__(self) -> None:
        for name in ("requests", "tokens"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v > 0):
                raise ValueError(f"start limit '{name}' must be a positive number, not {v}")
        if not (math.isfinite(self.window_s) and self.window_s > 0):
            raise ValueError(f"start limit window must be a positive number of seconds, not {self.window_s}")


#: What Trek assumes before an endpoint's first reply: 30,000 tokens a minute (the first usage
#: tier's token limit on OpenAI's GPT-5.4 pro model page; other models' first tiers are higher),
#: no request limit (the connection limit bounds a first burst of requests already).
DEFAULT_START_LIMITS = StartLimits(tokens=30_000)


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
        self.assumed = False  # limit, remaining and rate are the start limits, not a reply's

    def assume(self, capacity: float, window: float, now: float) -> None:
        """Start from a full bucket of ``capacity`` refilling over ``window`` seconds."""
        self.limit = self.remaining = capacity
        self.rate = capacity / window
        self.reset_at = self.t0 = now
        self.seen = self.sent
        self.assumed = True

    def forget(self) -> None:
        """A reply without this limit's headers: the endpoint does not say it, so no pacing."""
        self.limit = self.remaining = self.rate = None
        self.assumed = False

    def observe(self, remaining: float | None, reset: float | None, limit: float | None,
                ticket: float, now: float) -> None:
        if remaining is None:
            return
        self.assumed = False
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
        """Take ``cost`` units; the seconds until they are there (0 when they are). A request
        larger than the whole bucket waits for a full bucket, not forever."""
        avail = self.available(now)
        self.total += cost
        need = cost if self.limit is None else min(cost, self.limit)
        if avail is None or avail >= need:
            return 0.0
        if self.rate:
            return (need - avail) / self.rate
        return max(0.0, self.reset_at - now)  # no refill rate known: wait for the reset


class RatePacer:
    """Paces the requests to one endpoint from its rate-limit headers (see the module doc).

    ``ticket = await acquire(tokens)`` right before each attempt is sent (it reserves, waits and
    sends: ``reserve``, a sleep, ``send``), ``observe(headers, ticket)`` with every reply, 429s
    included. ``pace()`` describes the current pace for a progress bar.
    """

    #: While a limit is only assumed, a waiting request looks again this often (seconds), so the
    #: first reply's real limits release it at once instead of after the assumed wait.
    RECHECK_S = 0.05

    def __init__(self, clock: Callable[[], float] = time.monotonic, start: StartLimits | None = None):
        self._clock = clock
        self._lock = threading.Lock()
        self.requests = _Bucket("requests")
        self.tokens = _Bucket("tokens")
        self.waited_s = 0.0
        self.paced = 0  # requests that had to wait
        self.last_wait = 0.0
        self.longest_wait = 0.0  # the longest wait planned for one request
        self.basis = 0  # bumped when an assumed limit gives way to a reply's (or to none)
        if start is not None:
            now = clock()
            if start.requests is not None:
                self.requests.assume(start.requests, start.window_s, now)
            if start.tokens is not None:
                self.tokens.assume(start.tokens, start.window_s, now)

    def reserve(self, tokens: float = 0.0) -> float:
        """Reserve one request of ``tokens`` tokens; the seconds to wait before sending it."""
        with self._lock:
            now = self._clock()
            w = max(self.requests.reserve(1.0, now), self.tokens.reserve(tokens, now))
            if w > 0:
                self.paced += 1
                self.waited_s += w
            self.last_wait = w
            self.longest_wait = max(self.longest_wait, w)
            return w

    @property
    def assuming(self) -> bool:
        """Some limit is still the assumed start limit."""
        return self.requests.assumed or self.tokens.assumed

    async def acquire(self, tokens: float = 0.0) -> tuple[float, float, float]:
        """Reserve one request of ``tokens`` tokens, wait until the limits have room for it, and
        mark it sent: its ticket for :meth:`observe`. A wait planned on an assumed limit is
        planned again as soon as a reply has told the real one."""
        wait = self.reserve(tokens)
        while wait > 0:
            basis = self.basis
            step = min(wait, self.RECHECK_S) if self.assuming else wait
            await asyncio.sleep(step)
            wait -= step
            if wait > 0 and self.basis != basis:
                wait = self._replan(tokens)
        return self.send(tokens)

    def _replan(self, tokens: float) -> float:
        """Give back a reservation and take it again under what is known now."""
        with self._lock:
            now = self._clock()
            self.requests.total -= 1.0
            self.tokens.total -= tokens
            w = max(self.requests.reserve(1.0, now), self.tokens.reserve(tokens, now))
            self.last_wait = w
            self.longest_wait = max(self.longest_wait, w)
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
        case; missing ones are ignored, and end an assumed start limit of their kind). Without a
        ticket every reservation counts as seen. ``counted=False`` for a 429: the server did not
        count the rejected request itself."""
        if not headers:
            return
        try:
            h = {str(k).lower(): v for k, v in headers.items()}
        except AttributeError:
            return
        with self._lock:
            now = self._clock()
            assumed = self.assuming
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
            if assumed:  # the first reply: what it says (or does not say) replaces the start limits
                for bucket in (self.requests, self.tokens):
                    if bucket.assumed:  # it did not say this limit
                        bucket.forget()
                self.basis += 1

    @property
    def limited(self) -> bool:
        """A limit is known (from a reply) or assumed (start limits)."""
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


class EndpointLimits:
    """Connection limits and rate-limit pacers per endpoint, shared by every client given the
    same object.

    ``LLMClient(..., limits=shared)`` for an answering model and its judge (or a search proxy)
    on one server keeps their requests together under one ``max_connections``: the first
    client to call an endpoint sets its limit (and its pacer's start limits). A client without
    ``limits=`` has its own. The object is owned by the caller (no module-level state); asyncio
    semaphores belong to one event loop, so it keeps one per loop and forgets loops that are gone.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
            weakref.WeakKeyDictionary()
        )
        self._pacers: dict[str, RatePacer] = {}

    def pacer(self, endpoint: str, start: StartLimits | None = None) -> RatePacer:
        """The rate-limit pacer of ``endpoint`` (plain state, shared across event loops), created
        with ``start`` limits by the first caller."""
        pacer = self._pacers.get(endpoint)
        if pacer is None:
            with self._lock:
                pacer = self._pacers.get(endpoint)
                if pacer is None:
                    pacer = self._pacers[endpoint] = RatePacer(start=start)
        return pacer

    def semaphore(self, endpoint: str, size: int) -> asyncio.Semaphore:
        """The limit of ``endpoint`` in the running event loop (created with ``size`` slots)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            sems = self._by_loop.setdefault(loop, {})
            if endpoint not in sems:
                sems[endpoint] = asyncio.Semaphore(size)
            return sems[endpoint]
