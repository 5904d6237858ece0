"""A fake OpenAI-compatible HTTP server for tests and benchmarks.

The server speaks the real OpenAI wire format, so the official ``openai`` SDK,
raw ``httpx`` calls or any other compatible client can talk to it without
knowing it is fake.  Replies are deterministic functions of the request, and
faults (rate limits, server errors, stalls, truncated bodies) can be injected
reproducibly, which makes it suitable both for unit tests and for throughput or
robustness benchmarks.

Endpoints (each is also reachable without the ``/v1`` prefix)
-------------------------------------------------------------
``POST /v1/chat/completions``
    Non-streaming Chat Completions.  ``"stream": true`` is rejected with 400.
``POST /v1/responses``
    A minimal, non-streaming Responses API.
``GET /v1/models``
    A fixed list of model objects.
``GET /_stats``
    Counters, see :meth:`FakeOpenAIServer.stats` (tests wait for a state of the server with
    :meth:`FakeOpenAIServer.wait_for` instead of sleeping).
``POST /_reset``
    Clears the counters and the per-key arrival history.

Default replies
---------------
Without a matching script rule, the assistant answers
``"fake answer " + request_key(messages)[:12]``.  Usage numbers are whitespace
token counts (at least 1) of the prompt text and the reply (with ``tokenizer="o200k_base"``:
o200k_base tokens in OpenAI's chat format, as :mod:`trek.llm.estimate` counts them), so the same request
always yields the same reply, in any process.  The reply's ``model`` echoes the
request's ``model``.

The request key
---------------
:func:`request_key` is the SHA-256 hex digest of the request's ``messages``
(``input`` for ``/v1/responses``) serialised with
``json.dumps(..., sort_keys=True, separators=(",", ":"), ensure_ascii=False)``.
Statistics and fault decisions are grouped by this key.

Script format
-------------
A script is a JSON file (or a Python list handed to ``script=``) holding a list
of rules.  Rules are tried in order and the first one whose matchers all hold
wins; if none matches, the default reply is used.  A rule without matchers
matches every request.

Matchers (all optional):

``"pattern"``
    Regular expression searched (``re.search``) in the text of the *last*
    message, whatever its role.
``"any_pattern"``
    Regular expression searched in the texts of all messages joined by
    newlines.
``"tool_results"``
    Integer; the request must contain exactly this many messages whose role is
    ``"tool"`` (for ``/v1/responses``: ``function_call_output`` items).
``"model"``
    Exact model name.
``"tool_choice"``
    The request's ``tool_choice`` must equal this JSON value (``null``: the request sends none).
``"json_schema"``
    Boolean; ``true`` matches a request whose ``response_format`` carries a JSON schema (llama.cpp's
    ``{"type": "json_object", "schema": ...}`` or OpenAI's ``{"type": "json_schema", ...}``), so a
    script can play an endpoint that constrains replies to a schema; ``false`` one without.

Exactly one action:

``"reply"``
    Assistant text.  Every ``{last}`` in it is replaced by the text of the last
    message, and every ``{NAME}`` by what the named group ``(?P<NAME>...)`` of the rule's
    ``pattern`` or ``any_pattern`` matched.  The reply may also be a JSON object (or array):
    the placeholders are then filled inside its strings and the whole is sent as JSON text, so a
    captured quote or newline cannot break the document.
``"tool_calls"``
    A list of ``{"name": ..., "arguments": {...}}``.  They are returned as real
    tool calls (ids ``call_<hash>`` derived from the request, ``arguments``
    serialised to a JSON string, ``content`` null and ``finish_reason``
    ``"tool_calls"``); placeholders in the arguments' strings are filled as in ``reply``.  On ``/v1/responses`` they become ``function_call``
    output items.
``"error"``
    ``{"status": 400, "message": "..."}``, optionally with ``"type"``,
    ``"code"`` and ``"param"``; answered in the OpenAI error shape.

Optional extra:

``"usage"``
    Overrides token counts, e.g. ``{"prompt_tokens": 100,
    "completion_tokens": 7}`` (``input_tokens``/``output_tokens`` are accepted
    as synonyms); missing values keep their defaults and the total is
    recomputed unless given.

Example::

    [
      {"pattern": "weather", "tool_results": 0,
       "tool_calls": [{"name": "search", "arguments": {"q": "weather"}}]},
      {"tool_results": 1, "reply": "Based on the search: {last}"},
      {"model": "broken-model", "error": {"status": 400, "message": "nope"}}
    ]

Faults
------
With ``fault_rate`` F, every request on the completion endpoints is assigned a
fault with probability F.  The decision is a pure function of ``seed``, the
request key and how many times that key has already arrived, so a client that
retries the same request eventually gets through, and two servers started with
the same seed misbehave identically.  The kind is chosen uniformly among the
enabled ``fault_types`` (all four by default):

``"429"``
    Rate-limit error with ``Retry-After`` (seconds) and ``retry-after-ms``
    headers.
``"500"``
    Server error.
``"stall"``
    The reply is held for ``stall_seconds``; clients are expected to time
    out.  If the client is still connected afterwards it gets the normal reply.
``"malformed"``
    Status 200 whose body is the first half of a genuine reply, i.e. invalid
    JSON.

Rate limits
-----------
With ``rate_limit=(N, window_s)`` the server keeps OpenAI's request limit: a bucket of ``N``
requests that refills continuously at ``N / window_s`` per second. Every completion reply carries
``x-ratelimit-limit-requests``, ``x-ratelimit-remaining-requests`` and
``x-ratelimit-reset-requests`` (time until the bucket is full, e.g. ``120ms``, ``1.5s``,
``6m0s``); a request that finds the bucket empty is answered 429 with ``Retry-After`` and the same
headers, and counted in ``/_stats`` as ``rate_limited``. ``token_limit=(T, window_s)`` does the
same for tokens (``x-ratelimit-*-tokens``; a request counts its prompt tokens plus its
``max_tokens``/``max_completion_tokens``). ``/_stats`` also reports the units the limits let
through (``admitted``, per kind) and the seconds between the first and the last request let
through (``admitted_span_s``, on the server's clock), so a test can compute the rate a client
reached without timing anything itself.

Batch API
---------
``POST /v1/files`` (multipart, ``purpose=batch``), ``GET /v1/files/{id}``,
``GET /v1/files/{id}/content``, ``POST /v1/batches``, ``GET /v1/batches`` (newest first),
``GET /v1/batches/{id}`` and ``POST /v1/batches/{id}/cancel`` follow OpenAI's wire format.
A batch is ``validating`` then ``in_progress`` for ``batch_delay`` seconds after creation, then
``completed`` with an output file
(one line per answered request: ``{"id", "custom_id", "response": {"status_code", "request_id",
"body"}, "error"}``) and, when some items failed, an error file. ``batch_fail`` names
``custom_id`` values (or, as a float in [0, 1], a seeded fraction) answered as failed items;
``batch_expire=True`` ends batches as ``expired`` with the unanswered items in the error file.

Command line
------------
``python -m trek.testing.fake_openai --port 0`` prints exactly one line,
``fake-openai listening on http://127.0.0.1:PORT/v1``, then serves until
SIGTERM or SIGINT.  See ``--help`` for the other options.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from trek.limits import format_reset
from trek.tokens import content_text

try:
    from aiohttp import web
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError("the fake OpenAI server needs aiohttp: pip install 'trek[fake]'") from _e

__all__ = ["FAULT_TYPES", "FakeOpenAIServer", "SCRIPT_SCHEMA", "load_script", "request_key"]

FAULT_TYPES: tuple[str, ...] = ("429", "500", "stall", "malformed")

DEFAULT_MODELS: tuple[str, ...] = ("gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "fake-model")

_MATCHER_KEYS = frozenset({"pattern", "any_pattern", "tool_results", "model", "tool_choice", "json_schema"})
_UNSET = object()
_ACTION_KEYS = frozenset({"reply", "tool_calls", "error"})
_EXTRA_KEYS = frozenset({"usage"})

#: The JSON Schema of a ``--script`` file (``trek schema fake-script``): what the module docstring's
#: "Script format" says, one property per key a rule may hold.
SCRIPT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Trek fake OpenAI server script",
    "description": "A list of rules, tried in order; the first whose matchers all hold answers the request "
                   "(no matcher: every request). Without a match the reply is 'fake answer <key>'.",
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression searched in the last message's text."},
            "any_pattern": {"type": "string", "description": "Regular expression searched in all messages' texts."},
            "tool_results": {"type": "integer", "description": "Exactly this many tool-result messages."},
            "model": {"type": "string", "description": "Exact model name."},
            "tool_choice": {"description": "The request's tool_choice equals this JSON value (null: none sent)."},
            "json_schema": {"type": "boolean", "description": "The request constrains replies to a JSON schema."},
            "reply": {"type": ["string", "object", "array"],
                      "description": "Assistant text ({last}: the last message's text; {NAME}: the named group NAME "
                                     "of the pattern); an object or array is sent as JSON with its strings filled."},
            "tool_calls": {"type": "array", "minItems": 1, "description": "Tool calls to return.",
                           "items": {"type": "object", "required": ["name"],
                                     "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}}}},
            "error": {"type": "object", "required": ["status"], "description": "An error in the OpenAI shape.",
                      "properties": {"status": {"type": "integer"}, "message": {"type": "string"},
                                     "type": {"type": "string"}, "code": {}, "param": {}}},
            "usage": {"type": "object", "description": "Token counts replacing the computed ones.",
                      "properties": {k: {"type": "integer"} for k in ("prompt_tokens", "completion_tokens",
                                                                          "input_tokens", "output_tokens", "total_tokens")}},
        },
        "oneOf": [{"required": [k]} for k in ("reply", "tool_calls", "error")],
    },
}
_JSON_HEADERS = {"Content-Type": "application/json"}
#: The request parameters the server counts by value in ``stats()["sampling"]`` (what a client sent).
SAMPLING_PARAMS = ("temperature", "top_p", "seed", "max_tokens", "max_completion_tokens", "max_output_tokens")

#: The largest JSON request body answered (aiohttp's default; a longer one gets 413, as an endpoint
#: refuses an over-long prompt) and the largest upload (the Batch API's file limit, 200 MB).
JSON_BODY_LIMIT, FILE_LIMIT = 1024 * 1024, 200 * 1024 * 1024


def request_key(messages: Any) -> str:
    """Return the SHA-256 hex digest identifying a request's messages (or Responses ``input``)."""
    blob = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _short_hash(*parts: Any, n: int = 24) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).hexdigest()[:n]


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _count_tokens(text: str) -> int:
    return max(1, len(text.split()))


# --------------------------------------------------------------------------- script rules


class _Rule:
    __slots__ = ("pattern", "any_pattern", "tool_results", "model", "tool_choice", "json_schema", "action", "payload",
                 "usage")

    def __init__(self, raw: dict[str, Any], index: int) -> None:
        if not isinstance(raw, dict):
            raise ValueError(f"script rule #{index} must be an object, got {type(raw).__name__}")
        unknown = set(raw) - _MATCHER_KEYS - _ACTION_KEYS - _EXTRA_KEYS
        if unknown:
            raise ValueError(f"script rule #{index} has unknown keys: {sorted(unknown)}")
        actions = [k for k in _ACTION_KEYS if k in raw]
        if len(actions) != 1:
            raise ValueError(
                f"script rule #{index} needs exactly one of 'reply', 'tool_calls', 'error' (got {actions})"
            )
        self.pattern = re.compile(raw["pattern"]) if "pattern" in raw else None
        self.any_pattern = re.compile(raw["any_pattern"]) if "any_pattern" in raw else None
        tool_results = raw.get("tool_results")
        if tool_results is not None and (isinstance(tool_results, bool) or not isinstance(tool_results, int)):
            raise ValueError(f"script rule #{index}: 'tool_results' must be an integer")
        self.tool_results: int | None = tool_results
        self.model: str | None = raw.get("model")
        self.tool_choice: Any = raw.get("tool_choice", _UNSET)
        json_schema = raw.get("json_schema")
        if json_schema is not None and not isinstance(json_schema, bool):
            raise ValueError(f"script rule #{index}: 'json_schema' must be true or false")
        self.json_schema: bool | None = json_schema
        self.action = actions[0]
        payload = raw[self.action]
        if self.action == "reply" and not isinstance(payload, str | dict | list):
            raise ValueError(f"script rule #{index}: 'reply' must be a string, an object or an array")
        if self.action == "tool_calls":
            if not isinstance(payload, list) or not payload:
                raise ValueError(f"script rule #{index}: 'tool_calls' must be a non-empty list")
            for call in payload:
                if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                    raise ValueError(f"script rule #{index}: every tool call needs a string 'name'")
        if self.action == "error":
            if not isinstance(payload, dict):
                raise ValueError(f"script rule #{index}: 'error' must be an object")
            payload = {
                "status": int(payload.get("status", 400)),
                **{k: v for k, v in payload.items() if k != "status"},
            }
        self.payload = payload
        usage = raw.get("usage")
        if usage is not None and not isinstance(usage, dict):
            raise ValueError(f"script rule #{index}: 'usage' must be an object")
        self.usage: dict[str, Any] | None = usage

    def matches(self, model: str, texts: Sequence[str], tool_results: int, body: dict[str, Any] | None = None) -> bool:
        return self.groups(model, texts, tool_results, body) is not None

    def groups(self, model: str, texts: Sequence[str], tool_results: int,
               body: dict[str, Any] | None = None) -> dict[str, str] | None:
        """The named groups the rule's patterns captured when it matches the request, else ``None``."""
        if self.model is not None and model != self.model:
            return None
        body = body or {}
        if self.tool_choice is not _UNSET and body.get("tool_choice") != self.tool_choice:
            return None
        if self.json_schema is not None and _has_schema(body.get("response_format")) != self.json_schema:
            return None
        if self.tool_results is not None and tool_results != self.tool_results:
            return None
        found: dict[str, str] = {}
        for regex, text in ((self.pattern, texts[-1] if texts else ""), (self.any_pattern, "\n".join(texts))):
            if regex is None:
                continue
            m = regex.search(text)
            if m is None:
                return None
            found.update({k: v for k, v in m.groupdict().items() if v is not None})
        return found

    def text(self, texts: Sequence[str], groups: dict[str, str]) -> str:
        """The reply of a ``reply`` rule with its placeholders filled."""
        if isinstance(self.payload, str):
            return _fill(self.payload, texts, groups)
        return json.dumps(_fill(self.payload, texts, groups), ensure_ascii=False)


def _fill(value: Any, texts: Sequence[str], groups: dict[str, str]) -> Any:
    """``value`` with ``{last}`` and ``{NAME}`` (a captured group) filled in every string it holds."""
    if isinstance(value, str):
        value = value.replace("{last}", texts[-1] if texts else "")
        for name, got in groups.items():
            value = value.replace("{" + name + "}", got)
        return value
    if isinstance(value, dict):
        return {k: _fill(v, texts, groups) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, texts, groups) for v in value]
    return value


def _has_schema(fmt: Any) -> bool:
    """True when a ``response_format`` constrains the reply to a JSON schema."""
    if not isinstance(fmt, dict):
        return False
    if fmt.get("type") == "json_schema":
        return isinstance(fmt.get("json_schema"), dict)
    return fmt.get("type") == "json_object" and isinstance(fmt.get("schema"), dict)


def load_script(script: str | Path | Iterable[dict[str, Any]] | None) -> list[_Rule]:
    """Parse and validate a script given as a JSON file path or a list of rule dicts; the name
    ``demo`` (when no such file exists) is the shipped :mod:`trek.testing.demo` script."""
    if script is None:
        return []
    if isinstance(script, str) and script == "demo" and not Path(script).exists():
        from trek.testing.demo import demo_script

        script = demo_script()
    if isinstance(script, str | Path):
        raw = json.loads(Path(script).read_text(encoding="utf-8"))
    else:
        raw = list(script)
    if not isinstance(raw, list):
        raise ValueError("a script must be a JSON list of rules")
    return [_Rule(rule, i) for i, rule in enumerate(raw)]


# --------------------------------------------------------------------------- error bodies


def _error_response(
    status: int,
    message: str,
    err_type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    body = {"error": {"message": message, "type": err_type, "param": param, "code": code}}
    return web.Response(status=status, body=_dumps(body), headers={**_JSON_HEADERS, **(headers or {})})


def _default_error_type(status: int) -> str:
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    if status == 401:
        return "authentication_error"
    return "invalid_request_error"


class _Reject(Exception):
    """Raised while parsing a request to short-circuit with an error reply."""

    def __init__(self, response: web.Response) -> None:
        super().__init__()
        self.response = response


# --------------------------------------------------------------------------- rate limits


class _LimitBucket:
    """OpenAI-style limit: ``capacity`` units refilling continuously over ``window`` seconds."""

    def __init__(self, capacity: int, window: float) -> None:
        if capacity < 1 or window <= 0:
            raise ValueError("a rate limit needs a capacity >= 1 and a window > 0 seconds")
        self.capacity = float(capacity)
        self.rate = float(capacity) / float(window)
        self._level = float(capacity)
        self._t = time.monotonic()

    def level(self, now: float) -> float:
        self._level = min(self.capacity, self._level + (now - self._t) * self.rate)
        self._t = now
        return self._level

    def take(self, n: float) -> None:
        self._level -= n

    def wait(self, n: float, now: float) -> float:
        return max(0.0, (min(n, self.capacity) - self.level(now)) / self.rate)

    def headers(self, kind: str, now: float) -> dict[str, str]:
        level = self.level(now)
        return {
            f"x-ratelimit-limit-{kind}": str(int(self.capacity)),
            f"x-ratelimit-remaining-{kind}": str(max(0, math.floor(level))),
            f"x-ratelimit-reset-{kind}": format_reset((self.capacity - level) / self.rate),
        }


# --------------------------------------------------------------------------- the server


class _Endpoint(NamedTuple):
    """One completion endpoint of the fake: ``required`` names the model field and the field the
    request key is computed from; ``validate(body)`` raises :class:`_Reject` for bad input;
    ``build(body, key)`` returns the JSON payload of a successful reply or a ready error
    response (scripted errors)."""

    required: tuple[str, str]
    validate: Callable[[dict[str, Any]], None]
    build: Callable[[dict[str, Any], str], dict[str, Any] | web.Response]


class FakeOpenAIServer:
    """Deterministic fake of the OpenAI HTTP API, run on its own loop in a background thread.

    Use it as a context manager (``with FakeOpenAIServer() as srv: ...``) or call
    :meth:`start` / :meth:`stop`.  ``port=0`` asks the OS for a free port; the
    chosen one is available as :attr:`port` once started, and :attr:`base_url`
    is ready to be handed to ``openai.OpenAI(base_url=...)``.
    """

    def __init__(
        self,
        latency: float = 0.0,
        fault_rate: float = 0.0,
        seed: int = 0,
        script: str | Path | Iterable[dict[str, Any]] | None = None,
        stall_seconds: float = 30.0,
        retry_after: float = 0.1,
        host: str = "127.0.0.1",
        port: int = 0,
        require_key: str | None = None,
        fault_types: Sequence[str] | None = None,
        models: Sequence[str] = DEFAULT_MODELS,
        rate_limit: tuple[int, float] | None = None,
        token_limit: tuple[int, float] | None = None,
        batch_delay: float = 0.0,
        batch_fail: Sequence[str] | float | None = None,
        batch_expire: bool = False,
        tokenizer: str | None = None,
    ) -> None:
        if not 0.0 <= fault_rate <= 1.0:
            raise ValueError("fault_rate must be within [0, 1]")
        for name, v in (("latency", latency), ("stall_seconds", stall_seconds), ("retry_after", retry_after)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a non-negative number of seconds, got {v!r}")
        kinds = tuple(fault_types) if fault_types is not None else FAULT_TYPES
        bad = [k for k in kinds if k not in FAULT_TYPES]
        if bad or not kinds:
            raise ValueError(f"fault_types must be a non-empty subset of {FAULT_TYPES}, got {list(kinds)}")
        self.latency = float(latency)
        self.fault_rate = float(fault_rate)
        self.seed = int(seed)
        self.rules = load_script(script)
        self.stall_seconds = float(stall_seconds)
        self.retry_after = float(retry_after)
        self.host = host
        self.port = int(port)
        self.require_key = require_key
        self.fault_types = kinds
        self.models = tuple(models)
        if tokenizer not in (None, "o200k_base"):
            raise ValueError("tokenizer must be None (whitespace counts) or 'o200k_base'")
        self.tokenizer = tokenizer
        self._limits = {
            kind: _LimitBucket(*spec) for kind, spec in (("requests", rate_limit), ("tokens", token_limit)) if spec
        }
        self._rate_limited = 0
        self._admitted: dict[str, float] = dict.fromkeys(self._limits, 0.0)
        self._admit_span: list[float] = []  # server clock of the first and the last admitted request
        self.batch_delay = float(batch_delay)
        self.batch_fail = batch_fail
        self.batch_expire = bool(batch_expire)
        self._files: dict[str, dict[str, Any]] = {}
        self._batches: dict[str, dict[str, Any]] = {}

        self._lock = threading.Condition()  # guards the counters; notified whenever they change
        self._requests = 0
        self._sampling: dict[str, dict[str, int]] = {}  # sampling parameter -> its JSON value -> requests
        self._ok_by_key: dict[str, int] = {}
        self._faults: dict[str, int] = dict.fromkeys(FAULT_TYPES, 0)
        self._arrivals: dict[str, int] = {}
        self._stalled: dict[str, int] = {}  # requests held in a stall right now, by key
        self._holding = False  # hold(): every new completion request waits for release()
        self._hold_after: int | None = None  # hold_after(n): requests after the n-th wait
        self._held = 0  # requests waiting for release() right now
        self._active = 0  # completion requests being handled right now (held ones included)

        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._stop_event: asyncio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None

    # ------------------------------------------------------------------ public API

    @property
    def base_url(self) -> str:
        host = self.host
        if host in ("", "0.0.0.0"):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/v1"

    def stats(self) -> dict[str, Any]:
        """The counters (the same payload as ``GET /_stats``): ``requests``, ``ok_by_key``,
        ``faults`` (by kind), ``rate_limited``, ``admitted`` and ``admitted_span_s`` (what the limits
        let through), ``batches``, ``files``, and ``stalled_by_key``, the requests held in a stall
        right now (not a counter: :meth:`reset_stats` keeps it)."""
        with self._lock:
            return {
                "requests": self._requests,
                "ok_by_key": dict(self._ok_by_key),
                "faults": dict(self._faults),
                "rate_limited": self._rate_limited,
                "admitted": dict(self._admitted),
                "admitted_span_s": (self._admit_span[-1] - self._admit_span[0]) if self._admit_span else 0.0,
                "batches": len(self._batches),
                "files": len(self._files),
                "stalled_by_key": dict(self._stalled),
                "held": self._held,
                "active": self._active,
                "sampling": {k: dict(v) for k, v in self._sampling.items()},
            }

    def hold(self) -> None:
        """From now on every completion request waits, unanswered, until :meth:`release` (for tests
        that need a call in flight for as long as they choose, with no timing); ``stats()["held"]``
        counts the waiting ones."""
        with self._update():
            self._holding = True

    def hold_after(self, n: int) -> None:
        """Answer the first ``n`` completion requests (counted since :meth:`reset_stats`) and hold
        every later one until :meth:`release`."""
        with self._update():
            self._hold_after = n

    def release(self) -> None:
        """Let every held request (and every later one) through."""
        with self._update():
            self._holding = False
            self._hold_after = None

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30.0) -> dict[str, Any]:
        """Block until ``predicate(stats)`` holds for the :meth:`stats` payload and return it.

        For tests that must wait for something the server thread does (a request arriving, a
        stall beginning, N answers served): the server wakes the waiter whenever a counter
        changes, so no test needs to sleep and hope. Raises ``TimeoutError`` (with the last
        stats) when ``timeout`` seconds pass first.
        """
        with self._lock:
            if not self._lock.wait_for(lambda: predicate(self.stats()), timeout):
                raise TimeoutError(f"fake OpenAI server: condition not met within {timeout:g} s; stats {self.stats()}")
            return self.stats()

    @contextlib.contextmanager
    def _update(self) -> Iterator[None]:
        """Hold the counters' lock to change them, then wake every :meth:`wait_for`."""
        with self._lock:
            yield
            self._lock.notify_all()

    def reset_stats(self) -> None:
        """Zero all counters and forget how often each key has arrived (restarts fault sequences)."""
        with self._update():
            self._requests = 0
            self._ok_by_key.clear()
            self._faults = dict.fromkeys(FAULT_TYPES, 0)
            self._arrivals.clear()
            self._rate_limited = 0
            self._admitted = dict.fromkeys(self._limits, 0.0)
            self._admit_span = []
            self._sampling.clear()

    def decide_fault(self, key: str, arrival: int) -> str | None:
        """Return the fault kind for the ``arrival``-th (0-based) request with ``key``, or None."""
        if self.fault_rate <= 0.0:
            return None
        digest = hashlib.sha256(f"{self.seed}|{key}|{arrival}".encode()).digest()
        draw = int.from_bytes(digest[:8], "big") / 2.0**64
        if draw >= self.fault_rate:
            return None
        return self.fault_types[int.from_bytes(digest[8:16], "big") % len(self.fault_types)]

    def start(self) -> FakeOpenAIServer:
        """Start serving in a daemon thread; returns once the socket is listening."""
        if self._thread is not None:
            raise RuntimeError("server already started")
        self._ready.clear()
        self._startup_error = None
        self._thread = threading.Thread(target=self._thread_main, name="fake-openai", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            self._thread = None
            raise self._startup_error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server; in-flight stalls are cut short. Safe to call more than once."""
        thread, loop, event = self._thread, self._loop, self._stop_event
        if thread is None:
            return
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(event.set)
        thread.join(timeout)
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"FakeOpenAIServer(base_url={self.base_url!r}, fault_rate={self.fault_rate}, seed={self.seed})"

    # ------------------------------------------------------------------ lifecycle

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve_in_thread())
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self._loop = None

    async def _serve_in_thread(self) -> None:
        try:
            await self.start_async()
        except BaseException as exc:  # surfaced to the caller of start()
            self._startup_error = exc
            self._ready.set()
            return
        self._ready.set()
        assert self._stop_event is not None
        await self._stop_event.wait()
        await self.stop_async()

    async def start_async(self) -> None:
        """Bind and start serving on the running event loop (used by the thread and the CLI)."""
        self._stop_event = asyncio.Event()
        # uploads up to the Batch API's file limit; a JSON body is held to JSON_BODY_LIMIT
        app = web.Application(client_max_size=FILE_LIMIT)
        self._add_routes(app)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            if sys.platform != "win32":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.setblocking(False)
            site = web.SockSite(runner, sock, backlog=1024)
            await site.start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self.port = sock.getsockname()[1]
        self._runner = runner

    async def stop_async(self) -> None:
        if self._stop_event is not None:
            self._stop_event.set()  # wakes stalled handlers
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    def _add_routes(self, app: web.Application) -> None:
        for prefix in ("/v1", ""):
            app.router.add_post(prefix + "/chat/completions", self._handle_chat)
            app.router.add_post(prefix + "/responses", self._handle_responses)
            app.router.add_get(prefix + "/models", self._handle_models)
            app.router.add_post(prefix + "/files", self._handle_file_upload)
            app.router.add_get(prefix + "/files/{file_id}", self._handle_file_get)
            app.router.add_get(prefix + "/files/{file_id}/content", self._handle_file_content)
            app.router.add_post(prefix + "/batches", self._handle_batch_create)
            app.router.add_get(prefix + "/batches", self._handle_batch_list)
            app.router.add_get(prefix + "/batches/{batch_id}", self._handle_batch_get)
            app.router.add_post(prefix + "/batches/{batch_id}/cancel", partial(self._handle_batch_get, cancel=True))
        app.router.add_get("/_stats", self._handle_stats)
        app.router.add_post("/_reset", self._handle_reset)
        app.router.add_route("*", "/{tail:.*}", self._handle_unknown)

    # ------------------------------------------------------------------ helpers used by handlers

    def _check_auth(self, request: web.Request) -> None:
        if self.require_key is None:
            return
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if not header:
            raise _Reject(
                _error_response(
                    401,
                    "No API key was supplied. Send it as an 'Authorization: Bearer <key>' header.",
                    code="invalid_api_key",
                )
            )
        if scheme.lower() != "bearer" or token.strip() != self.require_key:
            raise _Reject(
                _error_response(
                    401,
                    "The API key provided is not valid for this server.",
                    code="invalid_api_key",
                )
            )

    async def _read_body(self, request: web.Request, required: Sequence[str]) -> dict[str, Any]:
        if (request.content_length or 0) > JSON_BODY_LIMIT:
            raise _Reject(_error_response(413, f"The request body is larger than {JSON_BODY_LIMIT} bytes."))
        raw = await request.read()
        if len(raw) > JSON_BODY_LIMIT:  # sent without a length
            raise _Reject(_error_response(413, f"The request body is larger than {JSON_BODY_LIMIT} bytes."))
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise _Reject(
                _error_response(
                    400,
                    "The request body could not be parsed as JSON. Check that it is valid JSON "
                    "and that the Content-Type header is 'application/json'.",
                )
            ) from None
        if not isinstance(body, dict):
            raise _Reject(_error_response(400, "The request body must be a JSON object."))
        for name in required:
            if name not in body or body[name] is None:
                raise _Reject(
                    _error_response(
                        400,
                        f"Missing required parameter: '{name}'.",
                        param=name,
                        code="missing_required_parameter",
                    )
                )
        if not isinstance(body["model"], str) or not body["model"]:
            raise _Reject(_error_response(400, "'model' must be a non-empty string.", param="model"))
        if body.get("stream"):
            raise _Reject(
                _error_response(
                    400,
                    "Streaming is not supported by the fake OpenAI server; send 'stream': false.",
                    param="stream",
                    code="unsupported_parameter",
                )
            )
        return body

    def _register_arrival(self, key: str) -> str | None:
        with self._update():
            arrival = self._arrivals.get(key, 0)
            self._arrivals[key] = arrival + 1
        kind = self.decide_fault(key, arrival)
        if kind is not None:
            with self._update():
                self._faults[kind] += 1
        return kind

    def _take_limits(self, body: dict[str, Any]) -> tuple[dict[str, str], web.Response | None]:
        """Take this request from the rate-limit buckets: (headers, a 429 reply when over a limit)."""
        if not self._limits:
            return {}, None
        texts = [content_text(m.get("content")) for m in self._input_as_messages(body.get("messages") or body.get("input"))]
        cost = {
            "requests": 1.0,
            "tokens": float(_count_tokens(" ".join(texts))
                            + int(body.get("max_completion_tokens") or body.get("max_tokens") or 0)),
        }
        now = time.monotonic()
        headers: dict[str, str] = {}
        over: list[tuple[str, float]] = []
        with self._update():
            fits = all(b.level(now) >= cost[k] for k, b in self._limits.items())
            for kind, b in self._limits.items():
                if fits:
                    b.take(cost[kind])
                    self._admitted[kind] += cost[kind]
                else:
                    over.append((kind, b.wait(cost[kind], now)))
                headers.update(b.headers(kind, now))
            if not fits:
                self._rate_limited += 1
            elif self._admit_span:
                self._admit_span[1] = now
            else:
                self._admit_span = [now, now]
        if fits:
            return headers, None
        kind, wait = max(over, key=lambda kv: kv[1])
        wait_ms = max(1, math.ceil(wait * 1000))
        headers.update({"Retry-After": f"{max(1, math.ceil(wait))}", "retry-after-ms": str(wait_ms)})
        limit = int(self._limits[kind].capacity)
        return headers, _error_response(
            429,
            f"Rate limit reached for {body.get('model')} on {kind}: Limit {limit}. Please try again in {wait_ms}ms.",
            err_type=kind,
            code="rate_limit_exceeded",
            headers=headers,
        )

    def _count_ok(self, key: str) -> None:
        with self._update():
            self._ok_by_key[key] = self._ok_by_key.get(key, 0) + 1

    def _pick_rule(self, model: str, texts: Sequence[str], tool_results: int,
                   body: dict[str, Any] | None = None) -> tuple[_Rule | None, dict[str, str]]:
        """The first rule that matches and the named groups its patterns captured."""
        for rule in self.rules:
            groups = rule.groups(model, texts, tool_results, body)
            if groups is not None:
                return rule, groups
        return None, {}

    def _fault_response(self, kind: str, model: str) -> web.Response:
        if kind == "429":
            wait_ms = max(0, round(self.retry_after * 1000))
            headers = {
                "Retry-After": f"{self.retry_after:g}",
                "retry-after-ms": str(wait_ms),
                "x-ratelimit-limit-requests": "500",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": f"{wait_ms}ms",
            }
            return _error_response(
                429,
                f"Rate limit reached for {model} on requests per min (RPM): Limit 500, Used 500, "
                f"Requested 1. Please try again in {wait_ms}ms.",
                err_type="requests",
                code="rate_limit_exceeded",
                headers=headers,
            )
        return _error_response(
            500,
            "The server had an error while processing your request. Retry the request or contact "
            "support if the error persists.",
            err_type="server_error",
        )

    async def _stall(self, key: str) -> bool:
        """Hold the request for ``stall_seconds``; returns False if the server is shutting down."""
        assert self._stop_event is not None
        with self._update():
            self._stalled[key] = self._stalled.get(key, 0) + 1
        try:
            await asyncio.wait_for(self._stop_event.wait(), timeout=self.stall_seconds)
        except TimeoutError:
            return True
        finally:
            with self._update():
                self._stalled[key] -= 1
                if not self._stalled[key]:
                    del self._stalled[key]
        return False

    async def _run(self, request: web.Request, endpoint: _Endpoint) -> web.StreamResponse:
        """Shared pipeline of the completion endpoints (see :class:`_Endpoint`)."""
        with self._update():
            self._requests += 1
            self._active += 1
            index = self._requests
        try:
            await self._wait_if_held(index)
            return await self._answer(request, endpoint)
        finally:
            with self._update():
                self._active -= 1

    async def _wait_if_held(self, index: int) -> None:
        def held() -> bool:
            return self._holding or (self._hold_after is not None and index > self._hold_after)

        if not held():
            return
        with self._update():
            self._held += 1
        try:
            while held() and not (self._stop_event is not None and self._stop_event.is_set()):
                await asyncio.sleep(0.005)  # the server's own loop; the test waits on stats()
        finally:
            with self._update():
                self._held -= 1

    def _note_sampling(self, body: dict[str, Any]) -> None:
        """Count the sampling parameters a request carried (``stats()["sampling"]``)."""
        with self._update():
            for name in SAMPLING_PARAMS:
                if name in body:
                    seen = self._sampling.setdefault(name, {})
                    value = json.dumps(body[name])
                    seen[value] = seen.get(value, 0) + 1

    async def _answer(self, request: web.Request, endpoint: _Endpoint) -> web.StreamResponse:
        required, validate, build = endpoint
        try:
            self._check_auth(request)
            body = await self._read_body(request, required)
            validate(body)
        except _Reject as rej:
            if self.latency:
                await asyncio.sleep(self.latency)
            return rej.response
        key = request_key(body[required[1]])
        self._note_sampling(body)
        limit_headers, limited = self._take_limits(body)
        if limited:
            if self.latency:
                await asyncio.sleep(self.latency)
            return limited
        fault = self._register_arrival(key)
        if fault == "stall":
            if not await self._stall(key):
                return _error_response(503, "The server is shutting down.", err_type="server_error")
            transport = request.transport
            if transport is None or transport.is_closing():
                return web.Response(status=499)  # client gave up; nothing useful to send
        elif self.latency:
            await asyncio.sleep(self.latency)
        if fault in ("429", "500"):
            return self._fault_response(fault, body["model"])
        try:
            payload = build(body, key)
        except Exception as e:  # a bug in a script or a subclass: a 400 fails the call at once (a 500 is retried)
            return _error_response(400, f"fake OpenAI server: building the reply raised {type(e).__name__}: {e}",
                                   err_type="fake_server_error")
        if isinstance(payload, web.Response):
            return payload
        data = _dumps(payload)
        if fault == "malformed":
            return web.Response(status=200, body=data[: len(data) // 2], headers=_JSON_HEADERS)
        self._count_ok(key)
        return web.Response(status=200, body=data, headers={**_JSON_HEADERS, **limit_headers})

    def _script_error(self, rule: _Rule) -> web.Response:
        err = rule.payload
        status = err["status"]
        return _error_response(
            status,
            str(err.get("message", "Scripted error.")),
            err_type=err.get("type") or _default_error_type(status),
            param=err.get("param"),
            code=err.get("code"),
        )

    def _counts(self, messages: Any, tools: Any, texts: Sequence[str], completion_text: str) -> tuple[int, int]:
        """(prompt, completion) tokens: whitespace words, or o200k_base in OpenAI's chat format."""
        if self.tokenizer == "o200k_base":
            from trek.llm.estimate import count_chat_tokens
            from trek.tokens import count_tokens

            return count_chat_tokens(messages, tools), max(1, count_tokens(completion_text))
        return _count_tokens(" ".join(texts)), _count_tokens(completion_text)

    @staticmethod
    def _usage_numbers(prompt: int, completion: int, override: dict[str, Any] | None) -> tuple[int, int, int]:
        total = None
        if override:
            prompt = int(override.get("prompt_tokens", override.get("input_tokens", prompt)))
            completion = int(override.get("completion_tokens", override.get("output_tokens", completion)))
            total = override.get("total_tokens")
        return prompt, completion, int(total) if total is not None else prompt + completion

    def _tool_calls(self, rule: _Rule, key: str, texts: Sequence[str] = (),
                    groups: dict[str, str] | None = None) -> list[tuple[str, str, str]]:
        """(call id, name, JSON arguments) for every scripted call, ids derived from the request."""
        out = []
        for i, call in enumerate(rule.payload):
            args = _fill(call.get("arguments", {}), texts, groups or {})
            args_json = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            out.append((f"call_{_short_hash(key, i, call['name'])}", call["name"], args_json))
        return out

    # ------------------------------------------------------------------ chat completions

    def _build_chat(self, body: dict[str, Any], key: str) -> dict[str, Any] | web.Response:
        messages = body["messages"]
        model = body["model"]
        texts = [content_text(m.get("content")) for m in messages]
        tool_results = sum(1 for m in messages if m.get("role") == "tool")
        rule, groups = self._pick_rule(model, texts, tool_results, body)
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None, "annotations": []}
        finish_reason = "stop"
        if rule is not None and rule.action == "error":
            return self._script_error(rule)
        if rule is not None and rule.action == "tool_calls":
            calls = self._tool_calls(rule, key, texts, groups)
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, name, args in calls
            ]
            completion_text = " ".join(args for _, _, args in calls)
            finish_reason = "tool_calls"
        else:
            if rule is not None:
                text = rule.text(texts, groups)
            else:
                text = "fake answer " + key[:12]
            message["content"] = text
            completion_text = text
        prompt, completion, total = self._usage_numbers(
            *self._counts(messages, body.get("tools"), texts, completion_text), rule.usage if rule else None
        )
        return {
            "id": "chatcmpl-" + key[:29],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": total,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 0,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
        }

    @staticmethod
    def _validate_chat(body: dict[str, Any]) -> None:
        messages = body["messages"]
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise _Reject(
                _error_response(
                    400, "'messages' must be a non-empty array of message objects.", param="messages"
                )
            )

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        return await self._run(request, _Endpoint(("model", "messages"), self._validate_chat, self._build_chat))

    # ------------------------------------------------------------------ responses

    @staticmethod
    def _input_as_messages(inp: Any) -> list[dict[str, Any]]:
        if isinstance(inp, str):
            return [{"role": "user", "content": inp}]
        out = []
        for item in inp if isinstance(inp, list) else []:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call_output":
                out.append({"role": "tool", "content": content_text(item.get("output"))})
            elif item.get("type") == "function_call":
                out.append({"role": "assistant", "content": content_text(item.get("arguments"))})
            else:
                out.append({"role": item.get("role", "user"), "content": content_text(item.get("content"))})
        return out

    @staticmethod
    def _validate_responses(body: dict[str, Any]) -> None:
        if not isinstance(body["input"], str | list):
            raise _Reject(_error_response(400, "'input' must be a string or an array.", param="input"))

    def _build_responses(self, body: dict[str, Any], key: str) -> dict[str, Any] | web.Response:
        inp = body["input"]
        model = body["model"]
        messages = self._input_as_messages(inp)
        texts = [m["content"] for m in messages]
        tool_results = sum(1 for m in messages if m["role"] == "tool")
        rule, groups = self._pick_rule(model, texts, tool_results, body)
        if rule is not None and rule.action == "error":
            return self._script_error(rule)
        output: list[dict[str, Any]] = []
        if rule is not None and rule.action == "tool_calls":
            calls = self._tool_calls(rule, key, texts, groups)
            for cid, name, args in calls:
                output.append(
                    {
                        "type": "function_call",
                        "id": "fc_" + cid[len("call_") :],
                        "call_id": cid,
                        "name": name,
                        "arguments": args,
                        "status": "completed",
                    }
                )
            completion_text = " ".join(args for _, _, args in calls)
        else:
            if rule is not None:
                text = rule.text(texts, groups)
            else:
                text = "fake answer " + key[:12]
            output.append(
                {
                    "type": "message",
                    "id": "msg_" + _short_hash(key, "msg", n=32),
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
                }
            )
            completion_text = text
        prompt, completion, total = self._usage_numbers(
            *self._counts(inp, body.get("tools"), texts, completion_text), rule.usage if rule else None
        )
        return {
            "id": "resp_" + _short_hash(key, "resp", n=40),
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": model,
            "output": output,
            "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": None, "summary": None},
            "store": bool(body.get("store", True)),
            "temperature": body.get("temperature", 1.0),
            "text": {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools", []),
            "top_p": body.get("top_p", 1.0),
            "truncation": "disabled",
            "usage": {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": completion,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": total,
            },
            "user": None,
            "metadata": body.get("metadata") or {},
        }

    async def _handle_responses(self, request: web.Request) -> web.StreamResponse:
        return await self._run(request, _Endpoint(("model", "input"), self._validate_responses, self._build_responses))

    # ------------------------------------------------------------------ misc endpoints

    async def _handle_models(self, request: web.Request) -> web.StreamResponse:
        try:
            self._check_auth(request)
        except _Reject as rej:
            return rej.response
        if self.latency:
            await asyncio.sleep(self.latency)
        data = [
            {"id": m, "object": "model", "created": 1700000000, "owned_by": "system"} for m in self.models
        ]
        return web.Response(body=_dumps({"object": "list", "data": data}), headers=_JSON_HEADERS)

    async def _handle_stats(self, request: web.Request) -> web.StreamResponse:
        return web.Response(body=_dumps(self.stats()), headers=_JSON_HEADERS)

    async def _handle_reset(self, request: web.Request) -> web.StreamResponse:
        self.reset_stats()
        return web.Response(body=_dumps({"ok": True}), headers=_JSON_HEADERS)

    # ------------------------------------------------------------------ files and batches

    def _new_file(self, data: bytes, filename: str, purpose: str) -> dict[str, Any]:
        with self._update():
            fid = f"file-{_short_hash('file', len(self._files), filename, time.time())}"
            obj = {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                   "filename": filename, "purpose": purpose, "status": "processed", "status_details": None}
            self._files[fid] = {"object": obj, "data": data}
        return obj

    async def _handle_file_upload(self, request: web.Request) -> web.StreamResponse:
        try:
            self._check_auth(request)
        except _Reject as rej:
            return rej.response
        form = await request.post()
        purpose, upload = form.get("purpose"), form.get("file")
        if purpose != "batch" or upload is None or not hasattr(upload, "file"):
            return _error_response(400, "Send a multipart 'file' with purpose 'batch'.", param="purpose")
        obj = self._new_file(upload.file.read(), getattr(upload, "filename", None) or "upload.jsonl", "batch")
        return web.Response(body=_dumps(obj), headers=_JSON_HEADERS)

    @staticmethod
    def _get_or_404(store: dict[str, dict[str, Any]], request: web.Request, kind: str) -> dict[str, Any] | web.Response:
        """The ``File``/``Batch`` record named in the URL, else OpenAI's 404 reply."""
        key = request.match_info[f"{kind.lower()}_id"]
        found = store.get(key)
        return found if found is not None else _error_response(404, f"No such {kind} object: {key}", param="id")

    async def _handle_file_get(self, request: web.Request) -> web.StreamResponse:
        f = self._get_or_404(self._files, request, "File")
        return f if isinstance(f, web.Response) else web.Response(body=_dumps(f["object"]), headers=_JSON_HEADERS)

    async def _handle_file_content(self, request: web.Request) -> web.StreamResponse:
        f = self._get_or_404(self._files, request, "File")
        if isinstance(f, web.Response):
            return f
        return web.Response(body=f["data"], headers={"Content-Type": "application/octet-stream"})

    async def _handle_batch_create(self, request: web.Request) -> web.StreamResponse:
        try:
            self._check_auth(request)
            body = json.loads(await request.read())
        except _Reject as rej:
            return rej.response
        except ValueError:
            return _error_response(400, "The request body could not be parsed as JSON.")
        fid, endpoint = body.get("input_file_id"), body.get("endpoint")
        if fid not in self._files:
            return _error_response(400, f"No such File object: {fid}", param="input_file_id")
        if endpoint not in ("/v1/chat/completions", "/v1/responses"):
            return _error_response(400, f"Unsupported endpoint {endpoint!r}.", param="endpoint")
        if body.get("completion_window") != "24h":
            return _error_response(400, "completion_window must be '24h'.", param="completion_window")
        lines = [ln for ln in self._files[fid]["data"].decode("utf-8").splitlines() if ln.strip()]
        now = int(time.time())
        with self._update():
            bid = f"batch_{_short_hash('batch', len(self._batches), fid, time.time())}"
            obj = {
                "id": bid, "object": "batch", "endpoint": endpoint, "errors": None, "input_file_id": fid,
                "completion_window": "24h", "status": "validating", "output_file_id": None, "error_file_id": None,
                "created_at": now, "in_progress_at": None, "expires_at": now + 86400, "finalizing_at": None,
                "completed_at": None, "failed_at": None, "expired_at": None, "cancelling_at": None,
                "cancelled_at": None, "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                "metadata": body.get("metadata") or None,
            }
            self._batches[bid] = {"object": obj, "lines": lines, "t0": time.monotonic()}
        return web.Response(body=_dumps(obj), headers=_JSON_HEADERS)

    def _batch_item_fails(self, custom_id: str) -> bool:
        spec = self.batch_fail
        if spec is None:
            return False
        if isinstance(spec, float | int) and not isinstance(spec, bool):
            draw = int.from_bytes(hashlib.sha256(f"{self.seed}|batch|{custom_id}".encode()).digest()[:8], "big") / 2.0**64
            return draw < float(spec)
        return custom_id in set(spec)

    def _finish_batch(self, b: dict[str, Any]) -> None:
        """Answer every line of a batch (once) and write its output and error files."""
        obj = b["object"]
        out_lines, err_lines = [], []
        n = len(b["lines"])
        for i, line in enumerate(b["lines"]):
            item = json.loads(line)
            cid = str(item.get("custom_id"))
            rid = f"batch_req_{_short_hash(obj['id'], cid)}"
            req_id = f"req_{_short_hash('req', obj['id'], cid, n=32)}"
            if self.batch_expire and i >= n // 2:
                err_lines.append({"id": rid, "custom_id": cid, "response": None,
                                  "error": {"code": "batch_expired",
                                            "message": "This request could not be executed before the completion window expired."}})
                continue
            if self._batch_item_fails(cid):
                err_lines.append({"id": rid, "custom_id": cid, "response": {
                    "status_code": 500, "request_id": req_id,
                    "body": {"error": {"message": "The server had an error processing your request.",
                                       "type": "server_error", "param": None, "code": None}}}, "error": None})
                continue
            body = item.get("body") or {}
            api_field = "messages" if obj["endpoint"] == "/v1/chat/completions" else "input"
            key = request_key(body.get(api_field))
            build = self._build_chat if api_field == "messages" else self._build_responses
            payload = build(body, key)
            if isinstance(payload, web.Response):  # a scripted error
                status = payload.status
                out_body = json.loads(payload.body)  # type: ignore[arg-type]
                err_lines.append({"id": rid, "custom_id": cid, "response": {
                    "status_code": status, "request_id": req_id, "body": out_body}, "error": None})
                continue
            self._count_ok(key)
            out_lines.append({"id": rid, "custom_id": cid, "response": {
                "status_code": 200, "request_id": req_id, "body": payload}, "error": None})
        now = int(time.time())
        if out_lines:
            obj["output_file_id"] = self._new_file(
                b"".join(_dumps(x) + b"\n" for x in out_lines), f"{obj['id']}_output.jsonl", "batch_output")["id"]
        if err_lines:
            obj["error_file_id"] = self._new_file(
                b"".join(_dumps(x) + b"\n" for x in err_lines), f"{obj['id']}_error.jsonl", "batch_output")["id"]
        obj["request_counts"] = {"total": n, "completed": len(out_lines), "failed": len(err_lines)}
        obj["finalizing_at"] = now
        if self.batch_expire:
            obj.update(status="expired", expired_at=now)
        else:
            obj.update(status="completed", completed_at=now)

    async def _handle_batch_list(self, request: web.Request) -> web.StreamResponse:
        data = [b["object"] for b in reversed(list(self._batches.values()))]
        limit = int(request.query.get("limit", 20))
        body = {"object": "list", "data": data[:limit], "first_id": data[0]["id"] if data else None,
                "last_id": data[:limit][-1]["id"] if data else None, "has_more": len(data) > limit}
        return web.Response(body=_dumps(body), headers=_JSON_HEADERS)

    async def _handle_batch_get(self, request: web.Request, cancel: bool = False) -> web.StreamResponse:
        """GET a batch (advancing it on the simulated clock), or with ``cancel`` POST its cancel."""
        b = self._get_or_404(self._batches, request, "Batch")
        if isinstance(b, web.Response):
            return b
        obj = b["object"]
        # Handlers run on the server's one event loop, without awaiting in between: no lock needed.
        if obj["status"] in ("validating", "in_progress"):
            elapsed = time.monotonic() - b["t0"]
            if cancel:
                obj.update(status="cancelled", cancelled_at=int(time.time()), cancelling_at=int(time.time()))
            elif elapsed >= self.batch_delay:
                self._finish_batch(b)
            else:
                obj["status"] = "in_progress"
                obj["in_progress_at"] = obj["in_progress_at"] or int(time.time())
                done = int(len(b["lines"]) * elapsed / self.batch_delay)
                obj["request_counts"] = {"total": len(b["lines"]), "completed": done, "failed": 0}
        return web.Response(body=_dumps(obj), headers=_JSON_HEADERS)

    async def _handle_unknown(self, request: web.Request) -> web.StreamResponse:
        return _error_response(404, f"Invalid URL ({request.method} {request.path})")


# --------------------------------------------------------------------------- command line


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m trek.testing.fake_openai",
        description="Run a deterministic fake OpenAI-compatible server.",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="TCP port (default 0: a free one, printed on start)")
    p.add_argument("--latency", type=float, default=0.0, help="seconds to wait before every reply")
    p.add_argument("--fault-rate", type=float, default=0.0, help="probability of injecting a fault")
    p.add_argument("--seed", type=int, default=0, help="seed for the fault decisions")
    p.add_argument("--script", default=None,
                   help="JSON file with scripted replies, or 'demo': toy model and judges that answer Trek's "
                        "own prompts (trek.testing.demo)")
    p.add_argument("--stall-seconds", type=float, default=30.0, help="how long a stall fault lasts")
    p.add_argument("--retry-after", type=float, default=0.1, help="seconds advertised by 429 faults")
    p.add_argument("--require-key", default=None, help="only accept this bearer token")
    p.add_argument(
        "--fault-types",
        default=",".join(FAULT_TYPES),
        help=f"comma-separated subset of {','.join(FAULT_TYPES)}",
    )
    p.add_argument("--rate-limit", default=None, metavar="N/SECONDS",
                   help="request limit, e.g. 600/60: N requests per window, refilling continuously")
    p.add_argument("--token-limit", default=None, metavar="N/SECONDS", help="token limit, e.g. 200000/60")
    p.add_argument("--batch-delay", type=float, default=0.0, help="seconds a batch stays in progress")
    p.add_argument("--batch-fail", default=None,
                   help="comma-separated custom_ids (or a fraction in [0, 1]) answered as failed batch items")
    p.add_argument("--batch-expire", action="store_true", help="end batches as expired, half their items unanswered")
    p.add_argument("--tokenizer", default=None, choices=["o200k_base"],
                   help="count usage in o200k_base tokens (default: whitespace words)")
    return p


def _limit_arg(text: str | None) -> tuple[int, float] | None:
    if not text:
        return None
    n, _, w = text.partition("/")
    return int(n), float(w or 60)


def _fail_arg(text: str | None) -> list[str] | float | None:
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return [t.strip() for t in text.split(",") if t.strip()]


async def _serve_forever(server: FakeOpenAIServer) -> None:
    await server.start_async()
    print(f"fake-openai listening on {server.base_url}", flush=True)
    loop = asyncio.get_running_loop()
    assert server._stop_event is not None
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, server._stop_event.set)
    try:
        await server._stop_event.wait()
    finally:
        await server.stop_async()


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    parser = _build_parser()
    if prog:
        parser.prog = prog
    args = parser.parse_args(argv)
    try:
        server = FakeOpenAIServer(
            latency=args.latency,
            fault_rate=args.fault_rate,
            seed=args.seed,
            script=args.script,
            stall_seconds=args.stall_seconds,
            retry_after=args.retry_after,
            host=args.host,
            port=args.port,
            require_key=args.require_key,
            fault_types=[t.strip() for t in args.fault_types.split(",") if t.strip()],
            rate_limit=_limit_arg(args.rate_limit),
            token_limit=_limit_arg(args.token_limit),
            batch_delay=args.batch_delay,
            batch_fail=_fail_arg(args.batch_fail),
            batch_expire=args.batch_expire,
            tokenizer=args.tokenizer,
        )
    except (OSError, ValueError) as exc:  # unreadable or invalid script, bad option values
        parser.error(str(exc))
    if not 0 <= args.port <= 65535:
        parser.error(f"--port {args.port}: a TCP port is from 0 (a free one) to 65535")
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve_forever(server))
    except OSError as exc:  # the port is taken, or the address is not this machine's
        print(f"{parser.prog}: error: cannot listen on {args.host}:{args.port} ({exc.strerror or exc})",
              file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
