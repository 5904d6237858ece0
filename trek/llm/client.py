"""One client for every model call in Trek.

``LLMClient`` talks to any OpenAI-compatible endpoint through the ``openai`` SDK
(``AsyncOpenAI``): Chat Completions everywhere, the Responses API where the provider has it.
On top of the SDK it adds what an evaluation needs:

* a persistent response cache (:mod:`trek.llm.cache`): a second identical run makes no
  HTTP request;
* bounded concurrency per endpoint (``max_connections``; clients given one
  :class:`~trek.limits.EndpointLimits` share the limit of an endpoint) and async fan-out with a progress
  bar showing done/total, cache hits, tokens and dollars;
* one retry policy (tenacity; the SDK's own retries are off so nothing retries twice):
  capped exponential backoff with jitter for 408/409/429 (honouring ``Retry-After``), 5xx,
  timeouts, connection errors, malformed bodies and replies without a choice. A call that
  still fails comes back with ``status="pending"`` and its error: it is never turned into
  answer text and never cached. A 4xx that a retry cannot fix (400/401/403/404/422) raises
  :class:`FatalLLMError` at once, carrying the status code and the API's own message;
* rate-limit pacing (:mod:`trek.limits`): the ``x-ratelimit-*`` headers of every reply
  say how much of the provider's limit is left; requests are spread at the rate the limit
  refills instead of running into 429s (``max_connections`` stays the ceiling; the progress
  bar shows the pace);
* endpoint pools: ``base_url`` may name several replicas of one model (a comma-separated
  string or a list). Each request goes to the least-loaded replica, each replica has its own
  connection limit and rate-limit pacing, and a replica that refuses connections or fails
  ``pool_failures`` times in a row is taken out for ``pool_cooldown`` seconds while the others
  carry its requests (:meth:`LLMClient.endpoint_report` says what each one served). Replicas
  share cache entries: a pool's cache key names the model, not the URLs;
* the HTTP transport is a parameter: ``transport="aiohttp"`` (the default: the SDK's
  ``DefaultAioHttpClient``, about half the CPU per request of httpx at wide fan-out) or
  ``"httpx"`` (the SDK's own default, the fallback); ``$TREK_HTTP_TRANSPORT`` sets the default;
* token usage on every result and dollars from the price table; spending recorded in a
  :class:`~trek.llm.ledger.SpendLedger` (durable when a command gives its clients one) whose
  budget is a ceiling: every fresh call reserves its worst-case price before it is sent and
  settles with the actual price, and a call whose worst case does not fit is not sent.

The API key is read from the environment (or passed in) and is never written to the cache,
a result, a log or an error message.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import re
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

from trek.aio import fan_out, run_sync
from trek.errors import FatalLLMError
from trek.limits import DEFAULT_START_LIMITS, EndpointLimits, StartLimits
from trek.llm.cache import LLMCache, keyed
from trek.llm.ledger import DEFAULT_ASSUME_OUTPUT, OverBudget, SpendLedger, check_budget
from trek.llm.usage import Price, PriceTable, price_factor, usage_dollars, usage_from_raw
from trek.local import LocalModelUnavailable
from trek.retry import backoff, retry_after, retrying
from trek.tokens import OTHER_TOKENIZER_BAND, count_chat_tokens, is_openai_model
from trek.types import Usage

if TYPE_CHECKING:
    import openai

__all__ = [
    "LLMClient",
    "LLMResult",
    "ChatRequest",
    "FatalLLMError",
    "TRANSPORTS",
    "DEFAULT_TRANSPORT",
    "run_sync",
    "scrub",
    "endpoint_identity",
    "url_secrets",
    "split_base_urls",
    "POOL_CACHE_ENDPOINT",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_API_PATHS = {"chat": "/chat/completions", "responses": "/responses"}
TRANSPORTS = ("aiohttp", "httpx")
#: Seconds a client retries an endpoint that has never answered before it gives up (``unreachable_after``).
DEFAULT_UNREACHABLE_AFTER = 8.0
#: The transport of a client that names none (and ``$TREK_HTTP_TRANSPORT`` is unset).
DEFAULT_TRANSPORT = "aiohttp"
T = TypeVar("T")


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """Replace every secret in ``text`` with a mask."""
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "***")
    return text


def endpoint_identity(base_url: str | None) -> str:
    """The part of the endpoint that can change an output: its normalized base URL, without the
    credentials a URL can carry (``user:token@`` is dropped, the value of a query parameter that
    holds a secret, such as ``?key=`` or ``?access_token=``, becomes ``***``). This is what run
    files, cache keys, logs and errors show; only the HTTP client sees the URL as given."""
    url = (base_url or DEFAULT_BASE_URL).rstrip("/")
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    query = parts.query
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(_secret_param(k) for k, _ in pairs):
        query = "&".join(f"{quote(k, safe='')}={'***' if _secret_param(k) else quote(v, safe='')}" for k, v in pairs)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)).rstrip("/")


#: Words that make a URL query parameter a secret (``key``, ``api_key``, ``access_token``, ``sig``...).
_SECRET_WORDS = {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "sig", "signature", "auth",
                 "authorization", "credential", "credentials", "code"}


def _secret_param(name: str) -> bool:
    words = [w for w in re.split(r"[-_.\s]+", name.lower()) if w]
    return bool(words) and (any(w in _SECRET_WORDS for w in words) or "".join(words) in _SECRET_WORDS)


def url_secrets(base_url: str | None) -> list[str]:
    """The secrets a URL carries (its ``user:password`` part, the password, the values of secret
    query parameters), longest first, to mask in messages."""
    if not base_url:
        return []
    parts = urlsplit(base_url)
    found = [s for s in (parts.password,) if s]
    if "@" in parts.netloc:
        found.append(parts.netloc.rpartition("@")[0])
    found += [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if _secret_param(k) and v]
    return sorted({*found, *(unquote(s) for s in found)}, key=len, reverse=True)


@dataclass
class ChatRequest:
    """One chat request for :meth:`LLMClient.amap`. ``params`` are sampling parameters."""

    messages: list[dict[str, Any]]
    model: str | None = None
    tools: list[dict[str, Any]] | None = None
    sample: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass
class LLMResult:
    """The outcome of one call.

    ``status`` is ``ok`` (``raw`` holds the provider's JSON), ``pending`` (the call failed
    after its retries or was not issued because of the budget; ``error`` says why) or, from
    :meth:`LLMClient.amap` with ``alone=True``, ``failed`` (the endpoint rejected this request
    alone, e.g. a message too long for the model; ``error`` holds its reason).
    """

    status: str
    model: str
    raw: dict[str, Any] | None = None
    cached: bool = False
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    key: str | None = None
    api: str = "chat"

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def content(self) -> str | None:
        """Assistant text (Chat Completions) or the concatenated output text (Responses)."""
        if not self.raw:
            return None
        if self.api == "responses":
            parts = []
            for item in self.raw.get("output") or []:
                if item.get("type") == "message":
                    for c in item.get("content") or []:
                        if c.get("type") == "output_text":
                            parts.append(c.get("text", ""))
            return "".join(parts) if parts else self.raw.get("output_text")
        choices = self.raw.get("choices") or []
        if not choices:
            return None
        return (choices[0].get("message") or {}).get("content")

    @property
    def message(self) -> dict[str, Any] | None:
        """The assistant message dict of a chat reply (with ``tool_calls`` when present)."""
        if not self.raw or self.api != "chat":
            return None
        choices = self.raw.get("choices") or []
        return (choices[0].get("message") or {}) if choices else None

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        msg = self.message or {}
        return list(msg.get("tool_calls") or [])


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None, *, connect: bool = False):
        super().__init__(message)
        self.retry_after = retry_after
        self.connect = connect  # no connection was made (refused, unknown host, connect timeout)


class _LoopState:
    def __init__(self, sdks: list[openai.AsyncOpenAI], sems: list[asyncio.Semaphore]):
        self.sdks = sdks
        self.sems = sems


#: The endpoint a pool's cache entries name (the model is in the request body): replicas of one
#: model give the same replies, so they share entries whatever their URLs.
POOL_CACHE_ENDPOINT = "pool"


@dataclass
class _Replica:
    """One URL of an endpoint pool and what it did."""

    url: str  # as given (the HTTP client's)
    identity: str  # as shown (no credentials)
    in_flight: int = 0  # attempts waiting for or holding one of its connections
    picks: int = 0
    served: int = 0
    errors: int = 0
    failures: int = 0  # in a row
    down_until: float = 0.0
    taken_out: int = 0


class LLMClient:
    """Cached, concurrent, retrying client for one OpenAI-compatible endpoint.

    Parameters
    ----------
    model:
        Default model for calls that do not name one.
    base_url, api_key:
        Endpoint and key; default to ``$OPENAI_BASE_URL`` / ``$OPENAI_API_KEY``. Local servers
        (vLLM, llama.cpp, Ollama) usually accept any key.
    max_connections:
        At most this many requests in flight to the endpoint, counted over every client that
        shares ``limits`` (the first one to call sets the limit); default 16, and 1 for the
        embedded model (its server answers one request at a time, and requests one after the
        other let it reuse the prompt prefix it has just read).
    limits:
        An :class:`~trek.limits.EndpointLimits` shared with other clients of the same endpoint;
        default: a limit of this client's own.
    start_limits:
        The rate limits assumed until the endpoint's first reply tells them
        (:class:`~trek.limits.StartLimits`; default :data:`~trek.limits.DEFAULT_START_LIMITS`,
        30,000 tokens a minute; ``None`` assumes nothing). The first client to call an endpoint
        of a shared ``limits`` sets them.
    timeout:
        Seconds before one HTTP attempt is abandoned (and retried).
    max_retries:
        Retries after the first attempt for transient failures (one policy; see module doc).
    backoff_base, backoff_cap:
        Seconds: the wait before retry *n* is drawn from ``[d/2, d]`` with
        ``d = min(backoff_cap, backoff_base * 2**n)``, and is at least a ``Retry-After`` the
        endpoint sent (itself capped at ``backoff_cap``).
    transport:
        ``"aiohttp"`` (the SDK's ``DefaultAioHttpClient``) or ``"httpx"`` (the SDK's own default
        transport, the fallback); default ``$TREK_HTTP_TRANSPORT`` or :data:`DEFAULT_TRANSPORT`.
    cache:
        An :class:`LLMCache`, a path to one, or ``None`` for no cache.
    prices:
        A :class:`PriceTable` (default: the bundled table plus ``$TREK_PRICES``).
    budget_usd:
        A ceiling in dollars on this client's fresh calls (this process only; a command makes
        it durable over invocations with :func:`trek.llm.ledger.spending`): a call is sent only
        when its worst-case price fits beside what is spent and reserved by calls in flight;
        one that can never fit comes back ``pending`` with the reason.
    ledger:
        The :class:`~trek.llm.ledger.SpendLedger` this client records its spend in (shared with
        other clients; its budget applies to all of them). Default: one of its own when
        ``budget_usd`` is set, else none.
    assume_output:
        Output tokens of a call's worst case when the request sends no output cap (default
        4,096, as ``--assume-output``).
    progress:
        Show a progress bar in :meth:`amap`.
    seed:
        Seed of the backoff jitter.
    local_server:
        For the embedded model: what starts (or finds) its server on the first request the cache
        cannot answer; default :func:`trek.local.shared_server`. A callable that raises
        :class:`~trek.local.LocalModelUnavailable` makes a replay-only client.
    unreachable_after:
        Seconds: while the endpoint has never answered (any HTTP reply counts), connection
        failures (refused, unknown host, connect timeout) are retried once a second for this
        long, then the call raises :class:`~trek.errors.FatalLLMError` naming the endpoint (and
        :attr:`role`), which stops a run instead of retrying for minutes. Default
        :data:`DEFAULT_UNREACHABLE_AFTER` (8).
    role:
        What this client is in a command (``judge``, ``evaluated``, ...): named in its errors.

    As a judge, a client is the *model judge* of :class:`trek.judges.Judge` (``makes_calls``,
    :meth:`agrade_with`, :meth:`grade_basis`, :meth:`decided_by`, :meth:`prepare`,
    :meth:`answer`...): it is asked the grader's or TrekTrace's prompts. Other judge kinds (the exact
    judge) answer the same protocol without being clients, so callers never ask which kind of judge
    they hold.
    """

    #: Whether the client sends model requests (the exact judge sends none: no cache, price or
    #: estimate is needed for it).
    makes_calls: ClassVar[bool] = True
    #: A model judge decides nothing without a model (trek.judges.Judge).
    answers_without_model: ClassVar[bool] = False

    def with_recorder(self, make: Any) -> Any:
        """This judge for an estimate: ``make(self)``, a client that records what it would send."""
        return make(self)

    # -- the judge interface ---------------------------------------------------------------------
    async def agrade_with(self, question: Any, response: str | None, grader: Any, *, protocol: str | None = None,
                          **settings: Any) -> Any:
        """The grade of ``response``: this model asked through ``grader``'s protocol (``protocol``,
        a forced grader's name, is the grader's business here)."""
        return await grader.agrade(question, response, self, **settings)

    def grade_basis(self, question: Any) -> dict[str, Any] | None:
        """What decides this judge's grade of ``question`` besides the response, when it is not
        the grader's prompt (``None``: the prompt, which the grade's input key digests)."""
        return None

    def decided_by(self) -> tuple[str, str] | None:
        """``(grader, version)`` this judge records on every grade, or ``None`` (the question's own grader)."""
        return None

    def prepare(self, run_dir: Any, questions: Iterable[Any]) -> None:
        """Check, before any grade of ``run_dir``, that this judge can judge ``questions`` (an LLM can)."""

    # TrekTrace's judge questions (trek.judges.Judge): a model is asked each question's prompt
    def begin_trace(self, run_dir: Any, store: Any, cases: Any, roles: Any, *, check_stale: bool) -> None:
        """Nothing to prepare: a model reads what each prompt shows."""

    def trace_basis(self, question: Any) -> Any:
        """``None``: a model's trace answers depend on the prompt alone (which the key digests)."""
        return None

    def trace_settings(self) -> dict[str, Any]:
        return {}

    def trace_versions(self) -> dict[str, str]:
        """``{}``: a model's prompts carry their own versions."""
        return {}

    async def answer(self, who: Any, request: Any) -> Any:
        """The step of ``request`` (:class:`trek.judges.JudgeRequest`): this model asked its prompt."""
        return await request.by_prompt(who)

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_connections: int | None = None,
        timeout: float = 120.0,
        max_retries: int = 6,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        cache: LLMCache | str | os.PathLike[str] | None = None,
        prices: PriceTable | None = None,
        budget_usd: float | None = None,
        ledger: SpendLedger | None = None,
        assume_output: int = DEFAULT_ASSUME_OUTPUT,
        progress: bool = True,
        seed: int | None = None,
        limits: EndpointLimits | None = None,
        start_limits: StartLimits | None = DEFAULT_START_LIMITS,
        transport: str | None = None,
        local_server: Callable[[], Any] | None = None,
        unreachable_after: float | None = None,
        role: str | None = None,
        pool_failures: int = 3,
        pool_cooldown: float = 30.0,
    ):
        if max_connections is not None and max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        if max_retries < 0:
            raise ValueError("max_retries must be at least 0")
        if not timeout > 0 or timeout == float("inf"):  # also rejects NaN: every call would time out
            raise ValueError(f"timeout must be a finite number of seconds above 0, not {timeout}")
        check_budget(budget_usd)
        if assume_output < 1:
            raise ValueError("assume_output must be at least 1 token")
        self.transport = transport or os.environ.get("TREK_HTTP_TRANSPORT") or DEFAULT_TRANSPORT
        if self.transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {', '.join(TRANSPORTS)}, not {self.transport!r}")
        self.model = model
        urls = split_base_urls(base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL)
        given = urls[0]
        if pool_failures < 1:
            raise ValueError("pool_failures must be at least 1")
        if not pool_cooldown >= 0 or pool_cooldown == float("inf"):
            raise ValueError(f"pool_cooldown must be a finite number of seconds, not {pool_cooldown}")
        self.pool_failures = pool_failures
        self.pool_cooldown = pool_cooldown
        self._replicas = [_Replica(u, endpoint_identity(u)) for u in urls]
        #: The endpoint as recorded and shown (no credentials; a pool's URLs joined by commas);
        #: the HTTP client gets the URLs as given.
        self.base_url = ",".join(r.identity for r in self._replicas)
        self.request_base_url = given
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or "sk-no-key"
        self._secrets = [self._api_key, *(s for u in urls for s in url_secrets(u))]
        self._local = None
        #: The endpoint constrains replies to a JSON schema given as ``response_format`` (the
        #: embedded llama.cpp model does; judges then ask it for ``{"verdict": ...}``).
        self.json_schema_replies = False
        if model == "local" or self.base_url == "local://llama.cpp":
            # the embedded model, started on the first request the cache cannot answer
            from trek.local import LOCAL_ENDPOINT, MODEL_NAME, shared_server

            self.model, self.base_url, self._api_key = MODEL_NAME, LOCAL_ENDPOINT, "local"
            self.request_base_url = LOCAL_ENDPOINT
            self._replicas = [_Replica(LOCAL_ENDPOINT, LOCAL_ENDPOINT)]
            self._local = local_server or shared_server
            self.json_schema_replies = True
        self.max_connections = max_connections or (1 if self._local else 16)
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.cache = LLMCache(cache) if isinstance(cache, str | os.PathLike) else cache
        self.prices = prices or PriceTable.load()
        self.budget_usd = budget_usd
        self.assume_output = int(assume_output)
        self.ledger = ledger if ledger is not None else (
            SpendLedger(None, budget_usd) if budget_usd is not None else None)
        self.progress = progress
        self._rng = random.Random(seed)
        self.limits = limits or EndpointLimits()
        self.start_limits = start_limits
        self._states: dict[int, _LoopState] = {}
        # Running totals for this client (fresh calls only for ``spent_usd``).
        self.spent_usd = 0.0
        self.unpriced_calls = 0  # fresh calls to a model without a price (tokens only)
        self.usage = Usage()
        self.http_calls = 0
        self.cache_hits = 0
        self.unreachable_after = DEFAULT_UNREACHABLE_AFTER if unreachable_after is None else unreachable_after
        self.role = role
        self._answered = False  # any HTTP reply from the endpoint yet (then connection errors are transient)
        self._unreachable_since: float | None = None

    def spent_text(self, since_usd: float = 0.0, unpriced_before: int = 0) -> str:
        """Dollars spent on fresh calls since a point, or ``$-`` when no call had a price."""
        spent = self.spent_usd - since_usd
        unpriced = self.unpriced_calls - unpriced_before
        if unpriced and spent == 0:
            return "$- (model not in the price table)"
        return f"${spent:.4f}" + (" + calls without a price" if unpriced else "")

    @property
    def connections(self) -> int:
        """The most requests this client has in flight at once: ``max_connections`` for each
        replica of its endpoint."""
        return self.max_connections * len(self._replicas)

    @property
    def pooled(self) -> bool:
        """The endpoint is a pool of several replicas."""
        return len(self._replicas) > 1

    @property
    def cache_endpoint(self) -> str:
        """The endpoint as cache keys name it: the base URL, or :data:`POOL_CACHE_ENDPOINT` for a pool."""
        return POOL_CACHE_ENDPOINT if self.pooled else self.base_url

    def endpoint_report(self) -> list[dict[str, Any]]:
        """Per replica: its URL (no credentials), replies served, failed attempts, times taken out."""
        return [{"url": r.identity, "served": r.served, "errors": r.errors, "taken_out": r.taken_out}
                for r in self._replicas]

    def endpoint_summary(self) -> str:
        """One line on how a pool's requests were spread ("" for a single endpoint)."""
        if not self.pooled:
            return ""
        parts = []
        for r in self._replicas:
            extra = f", {r.errors} failed attempt(s), taken out {r.taken_out} time(s)" if r.errors else ""
            parts.append(f"{r.identity}: {r.served} served{extra}")
        return "endpoint pool: " + "; ".join(parts)

    def _pick(self) -> int:
        """The replica for the next attempt: the least loaded of those in service (relative to the
        limit), else the one that comes back first."""
        if len(self._replicas) == 1:
            return 0
        now = time.monotonic()
        up = [i for i, r in enumerate(self._replicas) if r.down_until <= now]
        if not up:
            return min(range(len(self._replicas)), key=lambda i: self._replicas[i].down_until)
        return min(up, key=lambda i: (self._replicas[i].in_flight, self._replicas[i].picks))

    def _available_other(self, i: int) -> bool:
        now = time.monotonic()
        return any(j != i and r.down_until <= now for j, r in enumerate(self._replicas))

    def __repr__(self) -> str:  # never show the key
        return f"LLMClient(model={self.model!r}, base_url={self.base_url!r}, max_connections={self.max_connections})"

    # -- plumbing ----------------------------------------------------------------------------
    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        st = self._states.get(id(loop))
        if st is None:
            import openai  # here, not at import time: analysis code imports this module without calling

            sdks, sems = [], []
            for rep in self._replicas:
                # a query in the base URL (?api-version=..., ?key=...) goes with every request
                url = urlsplit(self._local().base_url if self._local else rep.url)
                query = dict(parse_qsl(url.query, keep_blank_values=True))
                # credentials in the URL (user:token@host) go as HTTP Basic auth in place of the key,
                # the way httpx sends them; aiohttp refuses a URL with credentials beside a header
                userinfo, at, host = url.netloc.rpartition("@")
                basic = None
                if at:
                    user, _, pw = userinfo.partition(":")
                    basic = {"Authorization": "Basic " + base64.b64encode(
                        f"{unquote(user)}:{unquote(pw)}".encode()).decode("ascii")}
                sdks.append(openai.AsyncOpenAI(
                    base_url=urlunsplit((url.scheme, host, url.path, "", "")),
                    default_query=query or None,
                    default_headers=basic,
                    api_key=self._api_key,
                    max_retries=0,  # the one retry policy is ours (_send_with_retries)
                    timeout=self.timeout,
                    http_client=_http_client(self.transport),
                ))
                # each replica has its own connection limit (a single endpoint: keyed as before)
                sems.append(self.limits.semaphore(rep.identity if self.pooled else self.base_url,
                                                  self.max_connections))
            st = _LoopState(sdks, sems)
            self._states = {id(loop): st}  # drop clients bound to finished loops
        return st

    def _scrub(self, text: str) -> str:
        return scrub(text, self._secrets)

    def _resolve_model(self, model: str | None) -> str:
        m = model or self.model
        if not m:
            raise ValueError("no model given: pass model= to LLMClient or to the call")
        return m

    #: The epoch this client answers in (``trek wild run --epochs``): a later epoch's calls are
    #: cache entries of their own, so a shared cache ($TREK_CACHE) does not replay epoch 1.
    epoch: int = 1

    def cache_request(self, api: str, body: dict[str, Any], sample: int) -> dict[str, Any]:
        """The dict that identifies a call in the cache (no key, timeout or retry settings)."""
        request = {"endpoint": self.cache_endpoint, "api": api, "body": body, "sample": int(sample)}
        if self.epoch != 1:
            request["epoch"] = int(self.epoch)
        return request

    def worst_cost(self, model: str, body: dict[str, Any], price: Price) -> float:
        """The most a call can cost: its prompt tokens (o200k_base in OpenAI's chat format; times
        1.25 for a model with another tokenizer) at the input price plus its output cap (else
        :attr:`assume_output`) at the output price. A free input price counts no tokens."""
        prompt = 0.0
        if price.input > 0:
            prompt = count_chat_tokens(body.get("messages", body.get("input") or []), body.get("tools"))
            if body.get("instructions"):
                prompt += count_chat_tokens([{"role": "system", "content": str(body["instructions"])}])
            if not is_openai_model(model):
                prompt *= OTHER_TOKENIZER_BAND[1]
        _, cap = _prompt_guess(body)
        out = cap if cap is not None else self.assume_output
        return (prompt * price.input + out * price.output) / 1e6

    def _output_guess(self, max_out: float | None, default_out: float) -> float:
        if max_out is not None:
            return max_out
        done = self.usage.calls - self.usage.cached_calls
        return (self.usage.completion_tokens / done) if done else default_out

    # -- single calls -----------------------------------------------------------------------
    async def achat(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        model: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        sample: int = 0,
        **params: Any,
    ) -> LLMResult:
        """One Chat Completions call. ``params`` are sent as-is (temperature, seed, ...)."""
        m = self._resolve_model(model)
        body: dict[str, Any] = {"model": m, "messages": list(messages), **params}
        if tools:
            body["tools"] = tools
        if self._local and "max_tokens" not in body and "max_completion_tokens" not in body:
            from trek.local import DEFAULT_MAX_TOKENS

            body["max_tokens"] = DEFAULT_MAX_TOKENS  # a small CPU model must not write until its context ends
        return await self._call("chat", m, body, sample)

    async def aresponses(
        self,
        input: str | list[dict[str, Any]],
        *,
        model: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        reasoning_effort: str | None = None,
        sample: int = 0,
        **params: Any,
    ) -> LLMResult:
        """One Responses API call (reasoning effort, native web search where offered)."""
        m = self._resolve_model(model)
        body: dict[str, Any] = {"model": m, "input": input, **params}
        if tools:
            body["tools"] = tools
        if reasoning_effort:
            body["reasoning"] = {"effort": reasoning_effort}
        return await self._call("responses", m, body, sample)

    def chat(self, messages: Sequence[dict[str, Any]], **kw: Any) -> LLMResult:
        """Synchronous :meth:`achat` (works in notebooks too)."""
        return run_sync(self._closing(self.achat(messages, **kw)))

    async def _closing(self, coro: Awaitable[T]) -> T:
        """Await ``coro``, then close the HTTP clients bound to this (short-lived) loop."""
        try:
            return await coro
        finally:
            await self.aclose()

    async def _call(self, api: str, model: str, body: dict[str, Any], sample: int) -> LLMResult:
        key, request_text = keyed(self.cache_request(api, body, sample))
        if self.cache is not None:
            hit = self.cache.lookup(key)
            if hit is not None:
                self.cache.hits += 1
                return self._finish(api, model, key, hit, cached=True)
        ledger = self.ledger
        price = self.prices.get(model) if ledger is not None else None
        if ledger is not None and ledger.budget_usd is not None and price is None:
            raise FatalLLMError(
                f"a budget is set but model '{model}' has no price in the price table; "
                "add it (TREK_PRICES or --prices; a model on your own server can be priced at 0) or drop the budget"
            )

        async def send() -> dict[str, Any]:
            if ledger is None or price is None:  # nothing to record: no ledger, or no price
                return await self._send_with_retries(api, body)
            hold = await ledger.reserve(self.worst_cost(model, body, price), model)
            try:
                raw = await self._send_with_retries(api, body)
            except asyncio.CancelledError:
                ledger.settle(hold, hold.usd)  # cut off in flight: it may have been billed
                raise
            except BaseException:
                ledger.settle(hold, 0.0)  # an error reply is not billed
                raise
            ledger.settle(hold, usage_dollars(self.prices, model, usage_from_raw(raw), price_factor(raw)) or 0.0)
            return raw

        try:
            if self.cache is not None:
                raw, cached = await self.cache.fill(key, request_text, send)
            else:
                raw, cached = await send(), False
        except _Retryable as e:
            return LLMResult(status="pending", model=model, key=key, api=api, error=self._scrub(str(e)))
        except OverBudget as e:
            return LLMResult(status="pending", model=model, key=key, api=api, error=str(e))
        return self._finish(api, model, key, raw, cached=cached)

    def _finish(self, api: str, model: str, key: str, raw: dict[str, Any], *, cached: bool) -> LLMResult:
        usage = usage_from_raw(raw)
        cost = usage_dollars(self.prices, model, usage, price_factor(raw))
        usage = usage.model_copy(update={"cost_usd": cost, "cached_calls": int(cached)})
        if cached:
            self.cache_hits += 1
        else:
            self.spent_usd += cost or 0.0
            if cost is None:
                self.unpriced_calls += 1
        self.usage = self.usage + (usage if cost is not None else usage.model_copy(update={"cost_usd": 0.0}))
        return LLMResult(status="ok", model=model, raw=raw, cached=cached, usage=usage, key=key, api=api)

    async def _send_with_retries(self, api: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            st = self._state()
        except LocalModelUnavailable as e:  # the embedded model cannot be started: no call can succeed
            raise FatalLLMError(f"the local model is needed for a call that is not cached: {e}") from None
        guess: tuple[float, float | None] | None = None
        last_replica = 0

        async def attempt() -> dict[str, Any]:
            nonlocal guess, last_replica
            while True:
                i = last_replica = self._pick()
                rep = self._replicas[i]
                rep.picks += 1
                rep.in_flight += 1
                try:
                    await st.sems[i].acquire()
                except BaseException:
                    rep.in_flight -= 1
                    raise
                if self.pooled and rep.down_until > time.monotonic() and self._available_other(i):
                    # taken out while this attempt waited for its connection: go elsewhere
                    st.sems[i].release()
                    rep.in_flight -= 1
                    continue
                break
            pacer = self.limits.pacer(rep.identity if self.pooled else self.base_url, self.start_limits)
            try:
                try:
                    # each attempt reserves what it will count against a token limit when it is about
                    # to be sent: prompt (chars / 4) plus the output cap, else the mean output so far
                    # (nothing while the endpoint has no token limit, known or assumed)
                    tokens = 0.0
                    if pacer.tokens.remaining is not None:
                        guess = guess or _prompt_guess(body)
                        tokens = guess[0] + self._output_guess(guess[1], 0.0)
                    ticket = await pacer.acquire(tokens)
                    self.http_calls += 1
                    seen: dict[str, Any] = {}
                    try:
                        raw = await self._send_once(st.sdks[i], api, body, seen)
                    finally:
                        pacer.observe(seen.get("headers"), ticket, counted=seen.get("status") != 429)
                finally:
                    st.sems[i].release()
            except _Retryable as e:
                rep.errors += 1
                rep.failures += 1
                out = rep.down_until > time.monotonic()
                if self.pooled and not out and (e.connect or rep.failures >= self.pool_failures):
                    rep.down_until = time.monotonic() + self.pool_cooldown  # its requests go to the others
                    rep.taken_out += 1
                    rep.failures = 0
                raise
            finally:
                rep.in_flight -= 1
            rep.served += 1
            rep.failures = 0
            return raw

        async def once() -> dict[str, Any]:
            failovers = 0
            while True:
                try:
                    return await attempt()
                except _Retryable as e:
                    if self.pooled and failovers < len(self._replicas) and self._available_other(last_replica):
                        failovers += 1  # another replica is in service: try it at once, no backoff
                        continue
                    if self._answered or not e.connect:
                        raise
                    # the endpoint never answered: try once a second for a few seconds, then stop
                    # the run with its address instead of retrying with backoff for minutes
                    now = time.monotonic()
                    self._unreachable_since = self._unreachable_since or now
                    waited = now - self._unreachable_since
                    if waited >= self.unreachable_after or self.max_retries == 0:
                        role = "evaluated model" if self.role == "evaluated" else (self.role or "").replace("-", " ")
                        who = f"the {role}'s endpoint" if role else "the endpoint"
                        raise FatalLLMError(
                            f"cannot reach {who} {self.base_url} (model '{body.get('model')}'): no reply "
                            f"for {waited:.0f} s ({e}); check its base URL (--base-url for the evaluated model, "
                            "--judge-base-url for the judges) and that the server runs"
                        ) from None
                    await asyncio.sleep(min(1.0, self.unreachable_after - waited))

        try:
            return await retrying(
                once, retry_on=(_Retryable,), max_retries=self.max_retries,
                wait=backoff(self.backoff_base, self.backoff_cap, self._rng),
            )
        except _Retryable as e:
            raise _Retryable(f"gave up after {self.max_retries + 1} attempts: {e}") from None

    def pace(self) -> str:
        """The current rate-limit pace of this client's endpoint, for a progress bar."""
        if self.pooled:
            return ""
        return self.limits.pacer(self.base_url, self.start_limits).pace()

    def _status_error(self, e: openai.APIStatusError, body: dict[str, Any]) -> Exception:
        """The retryable or fatal error for an HTTP error status."""
        status = e.status_code
        if status == 429:
            return _Retryable(
                f"429 rate limited by {self.base_url}", retry_after(getattr(e.response, "headers", None))
            )
        if status in (408, 409):
            return _Retryable(f"{status} from {self.base_url}")
        if status >= 500:
            return _Retryable(f"{status} server error from {self.base_url}")
        detail, param = _error_detail(e)
        detail = self._scrub(detail)
        if status == 400 and "unsupported" in detail.lower():
            hint = "the model does not accept this parameter or value; leave it out or change it"
        else:
            hint = {
                401: "check the API key (OPENAI_API_KEY) for this endpoint",
                403: "the key is not allowed to use this model or endpoint",
                404: "check the model name and the base URL (it usually ends in /v1)",
            }.get(status, "the request itself was rejected; fix it and run again")
        return FatalLLMError(
            f"{status} from {self.base_url} for model '{body.get('model')}': {detail} ({hint})",
            status_code=status, api_message=detail, param=param,
        )

    async def _send_once(
        self, sdk: openai.AsyncOpenAI, api: str, body: dict[str, Any], seen: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        import openai

        seen = {} if seen is None else seen
        path = _API_PATHS.get(api)
        if path is None:  # pragma: no cover - internal misuse
            raise ValueError(f"unknown api {api!r}")
        try:
            # The body goes out as the JSON it already is: the SDK's typed create() would walk
            # every message through its parameter transform first (about a quarter of the
            # client's CPU per request at wide fan-out) to produce the same JSON. Errors,
            # authentication and timeouts are the SDK's as before.
            resp = await sdk.post(path, body=body, cast_to=_response_class(sdk))
            self._answered = True
            seen["headers"] = getattr(resp, "headers", None)
            text = resp.text
        except openai.APIStatusError as e:
            self._answered = True
            seen["headers"] = getattr(getattr(e, "response", None), "headers", None)
            seen["status"] = e.status_code
            raise self._status_error(e, body) from None
        except openai.APIConnectionError as e:  # APITimeoutError included
            if _refused(e):  # some transports report a refused connection as a connect timeout
                raise _Retryable(f"connection refused by {self.base_url} (is the server running?)",
                                 connect=True) from None
            if isinstance(e, openai.APITimeoutError):
                raise _Retryable(f"timed out after {self.timeout:g}s waiting for {self.base_url}",
                                 connect=_connect_failure(e)) from None
            raise _Retryable(f"connection error to {self.base_url}: {self._scrub(_causes(e))}",
                             connect=_connect_failure(e)) from None
        try:
            raw = json.loads(text)
        except (json.JSONDecodeError, TypeError):
            raise _Retryable(f"malformed JSON body from {self.base_url}") from None
        problem = _shape_problem(api, raw)
        if problem:
            raise _Retryable(f"unusable reply from {self.base_url}: {problem}")
        return raw

    # -- fan-out ----------------------------------------------------------------------------
    async def amap(
        self,
        requests: Sequence[ChatRequest],
        *,
        desc: str = "llm",
        on_result: Callable[[int, LLMResult], None] | None = None,
        alone: bool = False,
    ) -> list[LLMResult]:
        """Run chat requests concurrently (bounded by ``max_connections``), in input order.

        ``on_result(index, result)`` is called as each one finishes (for checkpointing). With
        ``alone``, a request the endpoint rejects for itself alone (a :class:`FatalLLMError`
        that :func:`trek.errors.is_run_fatal` does not call fatal: a 400 for an over-long
        message, a 413) comes back ``failed`` and the others go on; otherwise it stops them all.
        """
        from trek.errors import is_run_fatal

        hits = 0

        async def one(r: ChatRequest) -> LLMResult:
            nonlocal hits
            try:
                res = await self.achat(r.messages, model=r.model, tools=r.tools, sample=r.sample, **r.params)
            except FatalLLMError as e:
                if not alone or is_run_fatal(e):
                    raise
                return LLMResult(status="failed", model=r.model or self.model or "", error=str(e))
            hits += res.cached
            return res

        return await fan_out(
            requests,
            one,
            desc=desc,
            unit="req",
            progress=self.progress,
            postfix=lambda: f"hits={hits} tok={self.usage.total_tokens} {self.spent_text()} {self.pace()}".rstrip(),
            on_result=on_result,
        )

    def map(self, requests: Sequence[ChatRequest], **kw: Any) -> list[LLMResult]:
        """Synchronous :meth:`amap`."""
        return run_sync(self._closing(self.amap(requests, **kw)))

    async def aclose(self) -> None:
        for st in self._states.values():
            for sdk in st.sdks:
                await sdk.close()
        self._states = {}


def split_base_urls(base_url: str | Sequence[str]) -> list[str]:
    """The URLs of an endpoint: one, or a pool given as a comma-separated string or a list
    (surrounding spaces and trailing slashes dropped; a repeated URL is an error)."""
    items = base_url.split(",") if isinstance(base_url, str) else list(base_url)
    urls = [str(u).strip().rstrip("/") for u in items]
    if not urls or any(not u for u in urls):
        raise ValueError("the base URL has an empty entry: give one URL, or several separated by commas")
    seen = [endpoint_identity(u) for u in urls]
    dup = next((u for i, u in enumerate(seen) if u in seen[:i]), None)
    if dup:
        raise ValueError(f"base URL {dup} is given twice in one endpoint pool")
    return urls


def _prompt_guess(body: dict[str, Any]) -> tuple[float, float | None]:
    """(prompt tokens as characters / 4, the output cap the request sends or ``None``)."""
    prompt_chars = len(json.dumps(body.get("messages") or body.get("input") or "", ensure_ascii=False))
    max_out = body.get("max_completion_tokens") or body.get("max_tokens") or body.get("max_output_tokens")
    return prompt_chars / 4, None if max_out is None else float(max_out)


def _response_class(sdk: Any) -> type:
    """The response class of the HTTP library the SDK is built on (``httpx2`` in newer SDKs, ``httpx``
    before): what ``cast_to`` takes for the raw reply, without importing a second HTTP library."""
    cls = type(sdk._client)
    found = _RESPONSE_CLASSES.get(cls)
    if found is None:
        import sys

        # the library is imported already: the SDK's client object is an instance of its class
        lib = next((c.__module__.split(".")[0] for c in cls.__mro__ if c.__name__ == "AsyncClient"), "httpx")
        found = _RESPONSE_CLASSES[cls] = sys.modules[lib].Response
    return found


_RESPONSE_CLASSES: dict[type, type] = {}


def _http_client(transport: str) -> Any:
    """The SDK's HTTP client for ``transport`` (``None``: the SDK's default httpx client)."""
    if transport == "httpx":
        return None
    import openai

    try:
        return openai.DefaultAioHttpClient()
    except (RuntimeError, ImportError, AttributeError):  # extra missing, or an SDK without it
        raise ValueError("transport 'aiohttp' needs aiohttp (a dependency of trek: reinstall it, or set "
                         "TREK_HTTP_TRANSPORT=httpx)") from None


def _shape_problem(api: str, raw: Any) -> str | None:
    """Why a 200 reply cannot be used as an answer (``None`` when it can)."""
    if not isinstance(raw, dict):
        return "the body is not a JSON object"
    if api == "responses":
        out = raw.get("output")
        return None if isinstance(out, list) and out else "no output items"
    choices = raw.get("choices")
    if not isinstance(choices, list) or not choices:
        return "no choices"
    if not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
        return "the first choice has no message"
    msg = choices[0]["message"]
    if msg.get("content") is None and not msg.get("tool_calls") and not msg.get("function_call") \
            and not msg.get("refusal"):
        return "the message has no text (content is null) and no tool call"
    return None


def _causes(e: BaseException) -> str:
    """The error and its causes, innermost last (the SDK's own text is only "Connection error.")."""
    parts, seen = [], set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        text = str(cur).strip()
        if text and text not in parts:
            parts.append(text)
        cur = cur.__cause__ or cur.__context__
    return ": ".join(parts) or type(e).__name__


def _connect_failure(e: BaseException) -> bool:
    """True when no connection to the endpoint was made (refused, unknown host, connect timeout),
    as opposed to a connection that broke or a reply that took too long."""
    cur: BaseException | None = e
    for _ in range(10):
        if cur is None:
            return False
        if isinstance(cur, ConnectionRefusedError | socket.gaierror):
            return True
        # httpx's or httpx2's (the SDK's HTTP library) ConnectError / ConnectTimeout, named so that
        # neither library is imported for the test
        if type(cur).__name__ in ("ConnectError", "ConnectTimeout") and \
                type(cur).__module__.split(".")[0] in ("httpx", "httpx2"):
            return True
        if type(cur).__name__ in ("ClientConnectorError", "ClientConnectorDNSError"):  # aiohttp transport
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _refused(e: BaseException) -> bool:
    cur: BaseException | None = e
    for _ in range(10):
        if cur is None:
            return False
        if isinstance(cur, ConnectionRefusedError) or "connection refused" in str(cur).lower():
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _error_detail(e: openai.APIStatusError) -> tuple[str, str | None]:
    """The API's own error message and the parameter it names."""
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            param = err.get("param")
            return str(err["message"]), str(param) if param else None
    return str(getattr(e, "message", "") or e), None
