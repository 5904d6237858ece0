"""Know the bill before spending: calls, tokens and dollars of a run, estimated offline.

Every command that spends builds the *first-step* requests it would send (one per item: a
``trek llm run`` line, a judge call, the first model turn of an agentic question) and hands them
to :func:`estimate_requests` with an :class:`Assumption` saying how one first-step request grows
into the item's whole cost (one call; or up to ``R`` rounds whose prompts grow by the tool
results; plus search calls). The estimate then

* drops items whose first request is already in the response cache (they cost nothing; for a
  multi-round item a cached first turn means the item ran before and replays from the cache);
* counts input tokens with ``o200k_base`` (the tokenizer of OpenAI's current models, offline via
  the ``bpe-openai`` package; :mod:`trek.tokens`) in OpenAI's chat format: 3 tokens per message plus its role and
  content, 3 to prime the reply, tool definitions as their JSON. For other models the same count
  is an approximation, widened to ``[0.8, 1.25]`` times it (:data:`OTHER_TOKENIZER_BAND`).
  The tokenizer is paid for only where a price needs it: requests of a model without a price
  (or with a free input price) get bounds from their length (:func:`trek.tokens.chat_token_bounds`;
  no tokenizer is loaded), and of a large run's priced requests only a sample is counted (the
  first :data:`EXACT_FIRST`, then every :data:`EXACT_EVERY`-th); the others get the sample's
  lowest and highest tokens per character (a sample's bounds, not a guarantee: the spend ledger
  still reserves each call's exact worst case before it is sent). Notes say which figures are which;
* bounds output tokens per call by the request's ``max_tokens`` / ``max_completion_tokens`` /
  ``max_output_tokens`` (reasoning tokens included, as OpenAI counts them), or by
  ``assume_output`` when no cap is sent; the low end is one token per call. When replies for the
  same prompt are already cached (another sample, other sampling parameters) their output lengths
  give the range instead (still capped);
* prices input and output with the price table (times ``price_factor``: 0.5 for the Batch API)
  and search calls with its per-backend ``search`` entry (dollars per call).

The result is an :class:`Estimate` (add two for a run with a judge or a search model) whose
``describe()`` is what ``--dry-run`` prints, and whose ``usd_high`` is what ``--confirm-above``
compares. TrekTrace and Ctrl plug in the same way: build their first-step requests with a
:class:`RecordingClient` (which records instead of sending) and pass an :class:`Assumption`.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from trek.llm.cache import _canonical, request_key
from trek.llm.client import ChatRequest, LLMClient, LLMResult
from trek.llm.usage import usage_from_raw
from trek.tokens import (
    MAX_TOKEN_BYTES,
    OTHER_TOKENIZER_BAND,
    chat_token_bounds,
    content_text,
    count_chat_tokens,
    is_openai_model,
)

__all__ = [
    "Assumption",
    "EXACT_EVERY",
    "EXACT_FIRST",
    "Estimate",
    "OTHER_TOKENIZER_BAND",
    "RecordingClient",
    "content_text",
    "count_chat_tokens",
    "estimate_requests",
    "is_openai_model",
    "request_body",
]

#: Of the priced requests an estimate needs tokens of, the first this many are counted exactly...
EXACT_FIRST = 1000
#: ...and after them every this-many-th; the others get the bounds of that sample (module doc).
EXACT_EVERY = 100


@dataclass(frozen=True)
class Assumption:
    """How one first-step request grows into the cost of its whole item.

    An item makes between ``calls_low`` and ``calls_high`` model calls; call ``j`` (0-based)
    sends the first prompt plus ``j * added_input`` tokens (tool results appended each round)
    plus ``extra_input`` (low, high) tokens of context the first request does not show yet
    (search-then-read's pages). It makes between ``search_low`` and ``search_high`` calls to
    ``search_backend``. ``description`` is printed with the estimate.
    """

    description: str = "one call per request"
    calls_low: int = 1
    calls_high: int = 1
    added_input: int = 0
    extra_input: tuple[int, int] = (0, 0)
    search_low: int = 0
    search_high: int = 0
    search_backend: str | None = None

    @classmethod
    def agentic(cls, rounds: int, added_input: int, search_backend: str | None, *, assumed: bool = False) -> Assumption:
        """An agent loop. ``assumed``: exactly ``rounds`` model calls per question (``--assume-rounds``);
        else anything from 1 (a direct answer) to ``rounds`` (every round used, then the forced answer)."""
        low = rounds if assumed else 1
        what = (f"assumed {rounds} model calls per question" if assumed
                else f"1 to {rounds} model calls per question (--max-rounds + the forced answer)")
        return cls(
            description=f"{what}, one web_search or open_url per round adding up to {added_input} "
                        "prompt tokens to every later call",
            calls_low=low, calls_high=rounds, added_input=added_input,
            search_low=max(0, low - 1), search_high=max(0, rounds - 1), search_backend=search_backend,
        )


@dataclass
class Estimate:
    """What a run would cost. Token and dollar figures are (low, high) over the calls it would make."""

    label: str
    model: str | None
    items: int = 0
    cached_items: int = 0
    calls: tuple[int, int] = (0, 0)
    input_tokens: tuple[int, int] = (0, 0)
    output_tokens: tuple[int, int] = (0, 0)
    token_usd: tuple[float, float] = (0.0, 0.0)
    search_calls: tuple[int, int] = (0, 0)
    search_usd: tuple[float, float] = (0.0, 0.0)
    notes: list[str] = field(default_factory=list)
    parts: list[Estimate] = field(default_factory=list)

    @property
    def usd_low(self) -> float:
        return self.token_usd[0] + self.search_usd[0]

    @property
    def usd_high(self) -> float:
        return self.token_usd[1] + self.search_usd[1]

    def __add__(self, other: Estimate) -> Estimate:
        add = lambda a, b: (a[0] + b[0], a[1] + b[1])  # noqa: E731
        return Estimate(
            label=f"{self.label} + {other.label}", model=None, items=self.items, cached_items=self.cached_items,
            calls=add(self.calls, other.calls), input_tokens=add(self.input_tokens, other.input_tokens),
            output_tokens=add(self.output_tokens, other.output_tokens), token_usd=add(self.token_usd, other.token_usd),
            search_calls=add(self.search_calls, other.search_calls), search_usd=add(self.search_usd, other.search_usd),
            parts=[*(self.parts or [self]), *(other.parts or [other])],
        )

    def describe(self) -> str:
        """The ``--dry-run`` report."""
        if self.parts:
            body = "\n".join(p.describe() for p in self.parts)
            return body + f"\ntotal: ${self.usd_low:.4f} - ${self.usd_high:.4f}"
        rng = lambda t: f"{t[0]:,}" if t[0] == t[1] else f"{t[0]:,} - {t[1]:,}"  # noqa: E731
        lines = [
            f"{self.label} ({self.model}): {self.items} items, {self.cached_items} already done or in the cache "
            f"-> {rng(self.calls)} calls",
            f"  input tokens:  {rng(self.input_tokens)}",
            f"  output tokens: {rng(self.output_tokens)}",
            f"  tokens cost:   ${self.token_usd[0]:.4f} - ${self.token_usd[1]:.4f}",
        ]
        if self.search_calls[1]:
            lines.append(f"  search calls:  {rng(self.search_calls)} (${self.search_usd[0]:.4f} - ${self.search_usd[1]:.4f})")
        lines.append(f"  estimate:      ${self.usd_low:.4f} - ${self.usd_high:.4f}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


class RecordingClient(LLMClient):
    """An :class:`LLMClient` that records the requests it is asked to send and sends none.

    Every call comes back ``pending`` (``error``), so a system or a grader stops after its first
    step; ``recorded`` holds ``(api, body, sample)`` of each call in order. Built from a real
    client (same endpoint, model and prices, so cache keys match). With ``use_cache=True`` it
    answers from the real client's cache and records only what is not there (replaying replies a
    batch loaded; a dry run uses ``False`` so that a cached first step does not run the tools).
    ``reasons`` maps a request's cache key to why it is not there (a Batch API item's reason from
    the batch's error file): its pending result says that instead of ``error``.
    """

    def __init__(self, like: LLMClient, *, use_cache: bool = False, error: str = "dry run: not sent",
                 reasons: dict[str, str] | None = None):
        super().__init__(like.model, base_url=like.base_url, api_key="sk-dry-run",
                         cache=like.cache if use_cache else None, prices=like.prices, progress=False,
                         max_connections=like.max_connections)
        self.recorded: list[tuple[str, dict[str, Any], int]] = []
        self._error = error
        self._reasons = dict(reasons or {})

    async def _call(self, api: str, model: str, body: dict[str, Any], sample: int) -> LLMResult:
        key = request_key(self.cache_request(api, body, sample))
        if self.cache is not None and self.cache.lookup(key) is not None:
            return await super()._call(api, model, body, sample)
        self.recorded.append((api, body, sample))
        reason = self._reasons.get(key)
        error = f"the Batch API did not answer it: {reason}; run again to re-submit" if reason else self._error
        return LLMResult(status="pending", model=model, api=api, error=error)


def request_body(client: LLMClient, r: ChatRequest) -> dict[str, Any]:
    """The chat body ``client`` sends for ``r`` (the body its cache key is made of)."""
    body: dict[str, Any] = {"model": r.model or client.model, "messages": list(r.messages), **r.params}
    if r.tools:
        body["tools"] = r.tools
    return body


# The cache holds canonical JSON (sorted keys, no spaces); SQLite's ``->`` gives back a part of it
# in the same text, so the prompt of every row can be read without parsing rows in Python.
_SCAN_SQL = (
    "SELECT request -> '$.api', request -> '$.body.model', "
    "coalesce(request -> '$.body.messages', request -> '$.body.input'), "
    "coalesce(response -> '$.usage.completion_tokens', response -> '$.usage.output_tokens') FROM responses"
)


def _observed_outputs(cache: Any, wanted: set[bytes]) -> dict[bytes, list[int]]:
    """Output tokens of the cached replies whose prompt id (:func:`_wanted_id`) is in ``wanted``."""
    out: dict[bytes, list[int]] = {}
    if cache is None or not wanted:
        return out
    try:
        with cache._lock:  # row by row: a large cache's prompts are never all in memory
            for api, model, prompt, completion in cache._conn.execute(_SCAN_SQL):
                pid = hashlib.sha256("\x1f".join(map(str, (api, model, prompt))).encode("utf-8")).digest()
                if pid in wanted and completion is not None:
                    out.setdefault(pid, []).append(int(completion))
        return out
    except sqlite3.OperationalError:  # an SQLite without ``->`` (before 3.38): parse in Python
        pass
    with cache._lock:
        rows = cache._conn.execute("SELECT request, response FROM responses").fetchall()
    for req_s, resp_s in rows:  # the fallback of an old SQLite (rare): whole
        try:
            req = json.loads(req_s)
            body = req.get("body") or {}
            pid = _wanted_id(req.get("api"), body)
            if pid in wanted:
                out.setdefault(pid, []).append(usage_from_raw(json.loads(resp_s)).completion_tokens)
        except (ValueError, AttributeError):
            continue
    return out


def _wanted_id(api: Any, body: dict[str, Any]) -> bytes:
    """The id :func:`_observed_outputs` gives the prompt of ``body`` (the SHA-256 digest of the
    canonical JSON of each part; bytes, half the memory of its hex text, an estimate keeping one
    per request)."""
    prompt = body.get("messages", body.get("input"))
    return hashlib.sha256("\x1f".join(_canonical(x) for x in (api, body.get("model"), prompt)).encode("utf-8")).digest()


def _cap(body: dict[str, Any]) -> int | None:
    v = body.get("max_completion_tokens") or body.get("max_tokens") or body.get("max_output_tokens")
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def estimate_requests(
    requests: Iterable[ChatRequest | tuple[str, dict[str, Any], int]],
    client: LLMClient,
    *,
    label: str = "run",
    assumption: Assumption = Assumption(),
    price_factor: float = 1.0,
    assume_output: int = 4096,
) -> Estimate:
    """Estimate the calls, tokens and dollars of sending ``requests`` (first steps) with ``client``.

    ``requests`` are :class:`ChatRequest` objects or ``(api, body, sample)`` triples as a
    :class:`RecordingClient` records them. ``client`` supplies the endpoint (for cache keys),
    the cache (hits are excluded), the default model and the price table. ``price_factor``
    scales token prices (0.5: Batch API). ``assume_output`` bounds a call's output when the
    request sends no cap. See the module doc for the rules.
    """
    # one pass over the requests (a generator is not held whole): of each request not in the
    # cache only what the estimate needs is kept, not its body
    est = Estimate(label=label, model=None, items=0)
    # per request not in the cache, in columns (memory: a few dozen bytes a request): api and
    # model (as numbers in ``names``), first tokens (low, high), counted exactly, cap (with
    # whether there is one), prompt id
    names: dict[str, int] = {}
    t_api, t_model, t_lo, t_hi, t_cap = array("I"), array("I"), array("q"), array("q"), array("q")
    t_exact, t_capped = bytearray(), bytearray()
    t_wid: list[bytes] = []
    models: set[str] = set()
    priced_seen = 0
    ratios: list[float] = []  # exact count / high bound of the counted sample
    for r in requests:
        api, body, sample = ("chat", request_body(client, r), r.sample) if isinstance(r, ChatRequest) else r
        est.items += 1
        model = str(body.get("model"))
        models.add(model)
        key = request_key(client.cache_request(api, body, sample))
        if client.cache is not None and client.cache.lookup(key) is not None:
            est.cached_items += 1
        else:
            msgs, tools = body.get("messages", body.get("input") or []), body.get("tools")
            price = client.prices.get(model)
            exact = False
            if price is not None and price.input > 0:  # dollars need its tokens: count, or sample
                exact = priced_seen < EXACT_FIRST or priced_seen % EXACT_EVERY == 0
                priced_seen += 1
            lo, hi = chat_token_bounds(msgs, tools)
            if exact:
                n = count_chat_tokens(msgs, tools)
                ratios.append(n / hi if hi else 1.0)
                lo = hi = n
            cap_ = _cap(body)
            t_api.append(names.setdefault(api, len(names)))
            t_model.append(names.setdefault(model, len(names)))
            t_lo.append(lo)
            t_hi.append(hi)
            t_exact.append(1 if exact else 0)
            t_capped.append(cap_ is not None)
            t_cap.append(cap_ or 0)
            t_wid.append(_wanted_id(api, body))
        del body
    est.model = ", ".join(sorted(models) or [str(client.model)])
    observed = _observed_outputs(client.cache, set(t_wid))
    by_number = list(names)
    todo = ((by_number[t_api[i]], by_number[t_model[i]], t_lo[i], t_hi[i], bool(t_exact[i]),
             t_cap[i] if t_capped[i] else None, t_wid[i]) for i in range(len(t_wid)))
    a = assumption
    k_lo, k_hi = a.calls_low, a.calls_high
    calls = [0, 0]
    inp = [0.0, 0.0]
    out = [0, 0]
    usd = [0.0, 0.0]
    unpriced: set[str] = set()
    uncapped = 0
    band = (1.0, 1.0)
    counted = sampled = bounded = 0
    r_lo, r_hi = (min(ratios), max(ratios)) if ratios else (0.0, 1.0)
    for _api, model, f_lo, f_hi, exact, cap, wid in todo:
        price = client.prices.get(model)
        if exact:
            counted += 1
        elif price is not None and price.input > 0:  # priced, outside the sample: the sample's bounds
            sampled += 1
            f_lo, f_hi = max(f_lo, int(r_lo * f_hi)), min(f_hi, math.ceil(r_hi * f_hi))
        else:
            bounded += 1
        lo_f, hi_f = (1.0, 1.0) if is_openai_model(model) else OTHER_TOKENIZER_BAND
        if (lo_f, hi_f) != (1.0, 1.0):
            band = OTHER_TOKENIZER_BAND
        obs = observed.get(wid)
        if obs:
            per_lo, per_hi = min(obs), max(obs)
            if cap is not None:
                per_lo, per_hi = min(per_lo, cap), min(per_hi, cap)
        else:
            per_lo, per_hi = 1, cap if cap is not None else assume_output
            uncapped += cap is None
        # k calls: k * (first + extra) + added * k (k - 1) / 2 input tokens
        in_lo = (k_lo * (f_lo + a.extra_input[0]) + a.added_input * k_lo * (k_lo - 1) / 2) * lo_f
        in_hi = (k_hi * (f_hi + a.extra_input[1]) + a.added_input * k_hi * (k_hi - 1) / 2) * hi_f
        calls[0] += k_lo
        calls[1] += k_hi
        inp[0] += in_lo
        inp[1] += in_hi
        out[0] += k_lo * per_lo
        out[1] += k_hi * per_hi
        if price is None:
            unpriced.add(model)
            continue
        usd[0] += (in_lo * price.input + k_lo * per_lo * price.output) / 1e6 * price_factor
        usd[1] += (in_hi * price.input + k_hi * per_hi * price.output) / 1e6 * price_factor
    est.calls = (calls[0], calls[1])
    est.input_tokens = (int(inp[0]), int(round(inp[1] + 0.4999)))
    est.output_tokens = (out[0], out[1])
    est.token_usd = (usd[0], usd[1])
    if a.search_high:
        fee = client.prices.search_fee(a.search_backend)
        est.search_calls = (a.search_low * len(t_wid), a.search_high * len(t_wid))
        if fee is None:
            est.notes.append(f"search backend '{a.search_backend}' has no price in the price table: fees not counted")
            fee = 0.0
        est.search_usd = (est.search_calls[0] * fee, est.search_calls[1] * fee)
    est.notes.append(a.description)
    if counted or not t_wid:
        est.notes.append("input tokens counted with o200k_base" + (
            "" if band == (1.0, 1.0) else
            f"; not the model's own tokenizer: an approximation, taken as {band[0]}-{band[1]} times that count"))
    if sampled:
        est.notes.append(f"input tokens counted for a sample of {counted:,} of the {counted + sampled:,} priced requests; "
                         f"the other {sampled:,} are the sample's bounds ({r_lo:.3f}-{r_hi:.3f} of their most "
                         "possible tokens), not a count")
    if bounded:
        est.notes.append(f"input tokens of {bounded:,} requests without an input price are bounds from their length "
                         f"(1 to {MAX_TOKEN_BYTES} bytes a token), not a count: no price needs the tokenizer")
    if uncapped:
        est.notes.append(f"{uncapped} requests send no output cap: assumed at most {assume_output} output tokens per call")
    if observed:
        est.notes.append(f"{len(observed)} prompts have cached replies: their output lengths give the range")
    if price_factor != 1.0:
        est.notes.append(f"token prices x {price_factor:g} (Batch API)")
    if unpriced:
        est.notes.append(f"no price for {', '.join(sorted(unpriced))}: tokens only, no dollars")
    return est

